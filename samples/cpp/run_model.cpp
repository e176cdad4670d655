// samples/c/run_model.c in C++ over include/tern/tern.hpp: loads a model, fills every input with
// the same fixed pattern, runs it once and prints each output's shape and first values, exactly as
// the C sample does (tests/install_test.sh compares the two). Errors arrive as tern::Error.
// Usage: run_model_cpp MODEL [DIM ...]  -- DIMs fill the inputs' dynamic dims in order (default 1),
// e.g. run_model_cpp ppocr_cls.onnx 1 48 192
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tern/tern.hpp"

namespace {

// The input pattern: floats in [-0.5, 0.5), integers 0..6 (token ids, indices), bools alternate.
void fill(tern::Tensor& t) {
  switch (t.dtype()) {
    case TERN_FLOAT32: {
      tern::Span<float> v = t.data<float>();
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i * 7 % 23) / 23.0f - 0.5f;
      break;
    }
    case TERN_INT64: {
      tern::Span<int64_t> v = t.data<int64_t>();
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(i % 7);
      break;
    }
    case TERN_INT32: {
      tern::Span<int32_t> v = t.data<int32_t>();
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(i % 7);
      break;
    }
    case TERN_BOOL: {
      auto* p = static_cast<unsigned char*>(t.raw_data());
      for (size_t i = 0; i < t.byte_size(); ++i) p[i] = static_cast<unsigned char>(i % 2);
      break;
    }
    default:
      if (t.byte_size() > 0) std::memset(t.raw_data(), 0, t.byte_size());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL [DIM ...]\n", argv[0]);
    return 2;
  }
  try {
    tern::check_abi();
    std::printf("Tern %s\n", tern::version());
    tern::Model model = tern::Model::load(argv[1]);
    tern::Session session(model);
    int next_dim = 2;
    std::vector<tern::Tensor> inputs;
    std::vector<const tern::Tensor*> input_ptrs;
    std::vector<std::string> in_names, out_names;
    for (const tern::IOInfo& in : model.inputs()) {
      std::vector<int64_t> dims = in.shape;
      for (int64_t& d : dims) {
        if (d < 0) d = next_dim < argc ? std::strtoll(argv[next_dim++], nullptr, 10) : 1;
      }
      inputs.push_back(tern::Tensor::create(in.dtype, dims));
      fill(inputs.back());
      in_names.push_back(in.name);
    }
    for (const tern::Tensor& t : inputs) input_ptrs.push_back(&t);
    for (const tern::IOInfo& out : model.outputs()) out_names.push_back(out.name);
    std::vector<tern::Tensor> outputs = session.run(in_names, input_ptrs, out_names);
    for (size_t j = 0; j < outputs.size(); ++j) {
      const tern::Tensor& t = outputs[j];
      std::printf("%s: dtype %d shape [", out_names[j].c_str(), static_cast<int>(t.dtype()));
      const tern::Shape shape = t.shape();
      for (size_t d = 0; d < shape.size(); ++d) {
        std::printf(d ? ",%lld" : "%lld", static_cast<long long>(shape[d]));
      }
      std::printf("]");
      if (t.dtype() == TERN_FLOAT32) {
        tern::Span<const float> v = t.data<float>();
        for (size_t d = 0; d < v.size() && d < 6; ++d) std::printf(" %.6g", v[d]);
        if (v.size() > 6) std::printf(" ...");
      }
      std::printf("\n");
    }
  } catch (const tern::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
