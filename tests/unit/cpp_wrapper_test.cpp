// The C++ wrapper (include/tern/tern.hpp) against the C API it wraps: the same outputs from the
// same inputs, errors as tern::Error with the C status and Tern's message, safe moved-from handles,
// borrowed and adopted tensor storage. This file includes no internal header: the wrapper's names
// (tern::Tensor, tern::Model...) are those of the internal classes, kept apart by its inline
// namespace at link time but not for lookup within one file.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "c_api.h"
#include "tern/tern.hpp"

namespace {

// Outputs of `model_path` through the C API for the given float inputs: the reference the wrapper
// is compared with.
std::vector<std::vector<float>> run_with_c_api(const std::string& model_path,
                                               const std::vector<std::string>& in_names,
                                               std::vector<std::vector<float>>& in_data,
                                               const std::vector<std::vector<int64_t>>& in_shapes,
                                               const std::vector<std::string>& out_names) {
  tern_model* m = nullptr;
  tern_session* s = nullptr;
  REQUIRE(tern_model_load_file(model_path.c_str(), &m) == TERN_OK);
  REQUIRE(tern_session_create(m, nullptr, &s) == TERN_OK);
  std::vector<tern_tensor*> ins;
  std::vector<const char*> in_c, out_c;
  for (size_t i = 0; i < in_names.size(); ++i) {
    tern_tensor* t = nullptr;
    REQUIRE(tern_tensor_create_from_data(TERN_FLOAT32, in_shapes[i].data(), in_shapes[i].size(),
                                         in_data[i].data(), in_data[i].size() * sizeof(float),
                                         nullptr, nullptr, &t) == TERN_OK);
    ins.push_back(t);
    in_c.push_back(in_names[i].c_str());
  }
  for (const std::string& n : out_names) out_c.push_back(n.c_str());
  std::vector<tern_tensor*> outs(out_names.size(), nullptr);
  REQUIRE(tern_session_run(s, nullptr, in_c.data(), ins.data(), ins.size(), out_c.data(),
                           out_c.size(), outs.data()) == TERN_OK);
  std::vector<std::vector<float>> result;
  for (tern_tensor* t : outs) {
    const float* p = static_cast<const float*>(tern_tensor_data(t));
    result.emplace_back(p, p + tern_tensor_byte_size(t) / sizeof(float));
    tern_tensor_destroy(t);
  }
  for (tern_tensor* t : ins) tern_tensor_destroy(t);
  tern_session_destroy(s);
  tern_model_destroy(m);
  return result;
}

// Runs a float-input model both ways (dynamic dims 1 or `dims` in order) and compares bitwise:
// the wrapper adds nothing between the caller and the library.
void check_same_as_c_api(const std::string& path, std::vector<int64_t> dims) {
  tern::Model model = tern::Model::load(path);
  tern::Session session(model, tern::SessionOptions().threads(1));
  std::vector<std::string> in_names, out_names;
  std::vector<std::vector<float>> data;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<tern::Tensor> inputs;
  size_t next = 0;
  for (const tern::IOInfo& in : model.inputs()) {
    REQUIRE(in.dtype == TERN_FLOAT32);
    std::vector<int64_t> shape = in.shape;
    int64_t n = 1;
    for (int64_t& d : shape) {
      if (d < 0) d = next < dims.size() ? dims[next++] : 1;
      n *= d;
    }
    std::vector<float> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 13) * 0.1f - 0.6f;
    in_names.push_back(in.name);
    data.push_back(std::move(v));
    shapes.push_back(shape);
  }
  for (size_t i = 0; i < data.size(); ++i) {
    inputs.push_back(tern::Tensor::borrow(data[i], shapes[i]));
    // Zero-copy: the tensor's data is the vector's.
    CHECK(inputs.back().raw_data() == static_cast<void*>(data[i].data()));
  }
  std::vector<const tern::Tensor*> ptrs;
  for (const tern::Tensor& t : inputs) ptrs.push_back(&t);
  for (const tern::IOInfo& out : model.outputs()) out_names.push_back(out.name);
  std::vector<tern::Tensor> outs = session.run(in_names, ptrs, out_names);
  const auto want = run_with_c_api(path, in_names, data, shapes, out_names);
  REQUIRE(outs.size() == want.size());
  for (size_t j = 0; j < outs.size(); ++j) {
    tern::Span<const float> got = outs[j].data<float>();
    REQUIRE(got.size() == want[j].size());
    CHECK(got.size() > 0);
    CHECK(std::memcmp(got.data(), want[j].data(), got.size() * sizeof(float)) == 0);
    CHECK(static_cast<size_t>(outs[j].element_count()) == got.size());
  }
}

}  // namespace

TEST_SUITE("api") {
  TEST_CASE("C++ wrapper: a model runs as through the C API (bitwise)") {
    // The fuzzers' seed model is in the repository: x [batch, 8] -> MatMul, Add, Reshape, Softmax.
    check_same_as_c_api(std::string(TERN_SOURCE_DIR) + "/tests/fuzz/corpus/tern_loader/matmul.tern",
                        {3});
    const std::string cls = std::string(TERN_SHARED_DIR) + "/models/ppocr_cls/model.onnx";
#if !defined(TERN_HAVE_ONNX)
    MESSAGE("skipped ppocr_cls: this build has no ONNX importer (TERN_WITH_ONNX=OFF)");
    return;
#endif
    if (!std::filesystem::exists(cls)) {
      MESSAGE("skipped ppocr_cls: " << cls << " is absent");
      return;
    }
    check_same_as_c_api(cls, {1, 48, 192});
  }

  TEST_CASE("C++ wrapper: errors are tern::Error with the C status and Tern's message") {
    try {
      (void)tern::Model::load("/nonexistent/dir/model.onnx");
      FAIL("no exception");
    } catch (const tern::Error& e) {
      CHECK(e.status() == TERN_ERR_IO);
      CHECK(e.message() == tern_last_error());
      CHECK(e.message().find("/nonexistent/dir/model.onnx") != std::string::npos);
      CHECK(std::string(e.what()).rfind("TERN_ERR_IO: ", 0) == 0);
    }
    tern::Model model = tern::Model::load(std::string(TERN_SOURCE_DIR) +
                                          "/tests/fuzz/corpus/tern_loader/matmul.tern");
    tern::Session session(model);
    const tern::IOInfo in = model.input(0);
    tern::Tensor wrong = tern::Tensor::create<float>({2, 5});  // the input is [batch, 8]
    try {
      (void)session.run({in.name}, {&wrong}, {model.output(0).name});
      FAIL("no exception");
    } catch (const tern::Error& e) {
      CHECK(e.status() == TERN_ERR_INVALID_ARGUMENT);
      CHECK(e.message().find(in.name) != std::string::npos);
    }
    CHECK_THROWS_AS(session.run({"no_such_input"}, {&wrong}, {model.output(0).name}), tern::Error);
    CHECK_THROWS_AS(tern::SessionOptions().backends("no_such_backend"), tern::Error);
    CHECK_THROWS_AS(tern::SessionOptions().flag("no.such.flag", "1"), tern::Error);
    // Reading a tensor as another type is refused, not reinterpreted.
    CHECK_THROWS_AS(wrong.data<int64_t>(), tern::Error);
    CHECK_THROWS_AS(model.input(99), tern::Error);
  }

  TEST_CASE("C++ wrapper: moved-from handles are empty and safe") {
    tern::Tensor a = tern::Tensor::create<float>({2, 3});
    a.data<float>()[4] = 7.5f;
    tern::Tensor b = std::move(a);
    CHECK(!a);  // NOLINT: testing the moved-from state
    CHECK(a.get() == nullptr);
    CHECK(a.rank() == 0);
    CHECK(a.byte_size() == 0);
    CHECK(a.element_count() == 0);
    CHECK(a.shape().empty());
    CHECK_THROWS_AS(a.data<float>(), tern::Error);
    CHECK(b.data<float>()[4] == 7.5f);
    CHECK(b.shape().to_vector() == std::vector<int64_t>{2, 3});
    // Move-assigning over a live handle destroys the old one (leaks show under ASan).
    tern::Tensor c = tern::Tensor::create<int64_t>({4});
    c = std::move(b);
    CHECK(c.dtype() == TERN_FLOAT32);
    c = std::move(c);  // self-move keeps it
    CHECK(c.dtype() == TERN_FLOAT32);

    tern::Model model = tern::Model::load(std::string(TERN_SOURCE_DIR) +
                                          "/tests/fuzz/corpus/tern_loader/matmul.tern");
    tern::Model model2 = std::move(model);
    CHECK(model.input_count() == 0);
    CHECK_THROWS_AS(model.input(0), tern::Error);
    try {
      tern::Session s(model);  // a moved-from model: the C API's NULL check, as an exception
      FAIL("no exception");
    } catch (const tern::Error& e) {
      CHECK(e.status() == TERN_ERR_INVALID_ARGUMENT);
    }
    tern::Session s1(model2);
    tern::Session s2 = std::move(s1);
    tern::Tensor x = tern::Tensor::create<float>({1, 8});
    CHECK_THROWS_AS(s1.run({model2.input(0).name}, {&x}, {model2.output(0).name}), tern::Error);
    CHECK(s2.run({model2.input(0).name}, {&x}, {model2.output(0).name}).size() == 1);
    tern::SessionOptions o1;
    tern::SessionOptions o2 = std::move(o1);
    CHECK_THROWS_AS(o1.threads(2), tern::Error);
    o2.threads(2);
    tern::Value v = tern::Value::from_tensor(x);
    tern::Value w = std::move(v);
    CHECK_THROWS_AS(v.kind(), tern::Error);
    CHECK(w.kind() == TERN_VALUE_TENSOR);
  }

  TEST_CASE("C++ wrapper: adopted storage, values and options") {
    std::vector<float> v{1, 2, 3, 4, 5, 6};
    const float* storage = v.data();
    tern::Tensor t = tern::Tensor::adopt(std::move(v), {3, 2});
    CHECK(t.data<float>().data() == storage);  // moved, not copied
    CHECK(t.data<float>()[5] == 6);
    tern::Tensor u = tern::Tensor::create<float>({3, 2});
    u.copy_from(t);
    CHECK(u.data<float>()[3] == 4);
    tern::Value seq = tern::Value::sequence(TERN_FLOAT32, {&t, &u});
    CHECK(seq.kind() == TERN_VALUE_SEQUENCE);
    CHECK(seq.sequence_length() == 2);
    CHECK(seq.sequence_at(1).data<float>()[0] == 1);
    CHECK_THROWS_AS(seq.sequence_at(2), tern::Error);
    tern::Value opt = tern::Value::optional(&seq);
    CHECK(opt.has_value());
    CHECK(opt.optional_value().sequence_length() == 2);
    CHECK(!tern::Value::optional(nullptr).has_value());
    CHECK(std::string(tern::version()) == tern_version());
    tern::check_abi();
    tern::RunOptions r;
    r.flag("sdp.math_enabled", "1");
    CHECK_THROWS_AS(r.flag("num_threads", "2"), tern::Error);  // a session-scope flag
  }
}
