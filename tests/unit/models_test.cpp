// The real models in ../shared/models/ against ONNX Runtime's reference outputs, through the C API;
// the .tern round trip; corrupted files.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "test_util.h"
#include "tools/tern/npy.h"

using namespace tern_test;

namespace {

struct RunResult {
  std::vector<std::vector<float>> outputs;
  std::vector<std::vector<int64_t>> shapes;
};

using Flag = std::pair<const char*, const char*>;

// Whether a session may run nodes its listed backends decline on the CPU.
enum class Fallback { kCpu, kNone };

// Runs the model on the reference inputs with `threads` intra-op threads (on `backends` with
// session flags `flags`, when given).
RunResult run_case(const tern_model* model, const ReferenceCase& rc, int threads,
                   const char* backends = nullptr, const std::vector<Flag>& flags = {},
                   Fallback fallback = Fallback::kCpu) {
  tern_session_options* opts = nullptr;
  REQUIRE(tern_session_options_create(&opts) == TERN_OK);
  REQUIRE(tern_session_options_set_num_threads(opts, threads) == TERN_OK);
  if (backends) REQUIRE(tern_session_options_set_backends(opts, backends) == TERN_OK);
  REQUIRE(tern_session_options_set_cpu_fallback(opts, fallback == Fallback::kCpu) == TERN_OK);
  for (const Flag& f : flags) {
    REQUIRE_MESSAGE(tern_session_options_set_flag(opts, f.first, f.second) == TERN_OK,
                    std::string(tern_last_error()));
  }
  tern_session* session = nullptr;
  tern_status st = tern_session_create(model, opts, &session);
  tern_session_options_destroy(opts);
  REQUIRE_MESSAGE(st == TERN_OK, std::string(tern_last_error()));
  Handles in, out;
  std::vector<const char*> in_names, out_names;
  for (size_t i = 0; i < rc.inputs.size(); ++i) {
    const tern::Tensor& t = rc.inputs[i];
    tern_tensor* h = nullptr;
    REQUIRE(tern_tensor_create_from_data(static_cast<tern_dtype>(t.dtype()), t.shape().data(),
                                         t.rank(), t.raw(), t.byte_size(), nullptr, nullptr,
                                         &h) == TERN_OK);
    in.tensors.push_back(h);
    in_names.push_back(rc.input_names[i].c_str());
  }
  for (const auto& n : rc.output_names) out_names.push_back(n.c_str());
  out.tensors.assign(out_names.size(), nullptr);
  st = tern_session_run(session, nullptr, in_names.data(), in.tensors.data(), in.tensors.size(),
                        out_names.data(), out_names.size(), out.tensors.data());
  tern_session_destroy(session);
  REQUIRE_MESSAGE(st == TERN_OK, std::string(tern_last_error()));
  RunResult r;
  for (tern_tensor* t : out.tensors) {
    REQUIRE(tern_tensor_dtype(t) == TERN_FLOAT32);
    const float* p = static_cast<const float*>(tern_tensor_data(t));
    r.outputs.emplace_back(p, p + tern_tensor_byte_size(t) / 4);
    r.shapes.emplace_back(tern_tensor_shape(t), tern_tensor_shape(t) + tern_tensor_rank(t));
  }
  return r;
}

// Runs the case at 1 and 2 threads; every output within rtol 1e-3, atol 1e-4 of the reference.
void check_runs(const std::string& name, const tern_model* model, const ReferenceCase& rc,
                const char* backends = nullptr, const std::vector<Flag>& flags = {},
                Fallback fallback = Fallback::kCpu) {
  for (int threads : {1, 2}) {
    RunResult r = run_case(model, rc, threads, backends, flags, fallback);
    for (size_t i = 0; i < rc.outputs.size(); ++i) {
      const tern::Tensor& ref = rc.outputs[i];
      CHECK(r.shapes[i] == ref.shape());
      REQUIRE(r.outputs[i].size() == static_cast<size_t>(ref.numel()));
      Comparison c =
          compare(r.outputs[i].data(), ref.data<float>(), r.outputs[i].size(), 1e-3, 1e-4);
      MESSAGE(name, " output '", rc.output_names[i], "' threads=", threads, ": max abs err ",
              c.max_abs, ", max rel err ", c.max_rel, ", mismatches ", c.mismatches);
      CHECK(c.mismatches == 0);
    }
  }
}

void check_against_reference(const std::string& name, const char* backends = nullptr,
                             const std::vector<Flag>& flags = {},
                             Fallback fallback = Fallback::kCpu) {
  if (!have_shared_models()) {
    MESSAGE((std::string("skipped: ") + models_unavailable()));
    return;
  }
  const std::string dir = model_dir(name);
  tern_model* model = nullptr;
  REQUIRE_MESSAGE(tern_model_load_file((dir + "/model.onnx").c_str(), &model) == TERN_OK,
                  std::string(tern_last_error()));
  check_runs(name, model, load_reference_case(dir, model), backends, flags, fallback);
  tern_model_destroy(model);
}

// Why the CUDA model tests cannot run here ("" when they can).
std::string cuda_unavailable() {
  if (!tern_cuda_is_built()) return "this build has no CUDA backend (TERN_WITH_CUDA=OFF)";
  if (!tern_cuda_is_available()) return "no CUDA device on this machine";
  return "";
}

// Why the Vulkan model tests cannot run here ("" when they can).
std::string vulkan_unavailable() {
  if (!tern_vulkan_is_built()) return "this build has no Vulkan backend (TERN_WITH_VULKAN=OFF)";
  if (!tern_vulkan_is_available()) return "no Vulkan device (install mesa-vulkan-drivers)";
  return "";
}

std::vector<char> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(f), {});
}

void write_file(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A test case from .npy files: <dir>/<stem>.input_<i>.npy and <stem>.output_<i>.npy, named by the
// model's inputs and outputs in order.
ReferenceCase load_npy_case(const std::string& dir, const std::string& stem,
                            const tern_model* model) {
  ReferenceCase rc;
  auto read = [&](const std::string& path) {
    tern_cli::NpyArray a;
    const std::string err = tern_cli::read_npy(path, &a);
    REQUIRE_MESSAGE(err.empty(), path, ": ", err);
    auto t = tern::Tensor::allocate(static_cast<tern::DType>(a.dtype), a.shape);
    REQUIRE(t.has_value());
    REQUIRE(t->byte_size() == a.data.size());
    std::memcpy(t->raw(), a.data.data(), a.data.size());
    return std::move(*t);
  };
  for (size_t i = 0; i < tern_model_input_count(model); ++i) {
    rc.input_names.push_back(tern_model_input_name(model, i));
    rc.inputs.push_back(read(dir + "/" + stem + ".input_" + std::to_string(i) + ".npy"));
  }
  for (size_t i = 0; i < tern_model_output_count(model); ++i) {
    rc.output_names.push_back(tern_model_output_name(model, i));
    rc.outputs.push_back(read(dir + "/" + stem + ".output_" + std::to_string(i) + ".npy"));
  }
  return rc;
}

}  // namespace

TEST_SUITE("models") {
  TEST_CASE("ppocr_cls matches ONNX Runtime") {
    check_against_reference("ppocr_cls");
  }
  TEST_CASE("ppocr_det matches ONNX Runtime") {
    check_against_reference("ppocr_det");
  }
  TEST_CASE("resnet18 matches ONNX Runtime") {
    check_against_reference("resnet18");
  }
  TEST_CASE("mobilenet_v2 matches ONNX Runtime") {
    check_against_reference("mobilenet_v2");
  }
  TEST_CASE("tiny_bert matches ONNX Runtime") {  // int64 inputs; Gather, Erf, ReduceMean, Pow...
    check_against_reference("tiny_bert");
  }

  // Builds without the ONNX importer (TERN_MINIMAL, cross builds under qemu) run the real models
  // from .tern files that a full build converted: scripts/aarch64.sh fills the folder.
  TEST_CASE("the five models match ONNX Runtime on CUDA (TF32 off; eager and CUDA graphs)") {
    const std::string why = cuda_unavailable();
    if (!why.empty()) {
      MESSAGE((std::string("skipped: ") + why));
      return;
    }
    const std::vector<Flag> exact = {{"cuda.matmul.allow_tf32", "0"}, {"cudnn.allow_tf32", "0"}};
    std::vector<Flag> graphs = exact;
    graphs.push_back({"cuda.graphs", "1"});
    for (const char* m : {"ppocr_cls", "ppocr_det", "resnet18", "mobilenet_v2", "tiny_bert"}) {
      check_against_reference(m, "cuda,cpu", exact);
      check_against_reference(m, "cuda,cpu", graphs);
    }
  }

  // Wholly on Vulkan: the session has no CPU backend to fall back to (cpu_fallback 0), so every
  // node of the optimized graph runs on Vulkan kernels (lavapipe, Mesa's CPU driver, on CI
  // machines) or the session fails.
  TEST_CASE("the five models match ONNX Runtime wholly on Vulkan") {
    const std::string why = vulkan_unavailable();
    if (!why.empty()) {
      MESSAGE((std::string("skipped: ") + why));
      return;
    }
    for (const char* m : {"ppocr_cls", "ppocr_det", "resnet18", "mobilenet_v2", "tiny_bert"}) {
      check_against_reference(m, "vulkan", {}, Fallback::kNone);
    }
  }

  TEST_CASE("converted .tern models in $TERN_TEST_TERN_MODELS match their references") {
    const char* dir = std::getenv("TERN_TEST_TERN_MODELS");
    if (dir == nullptr || *dir == 0) {
      MESSAGE(
          "skipped: TERN_TEST_TERN_MODELS is not set (a folder of NAME.tern, "
          "NAME.input_I.npy, NAME.output_I.npy)");
      return;
    }
    int models = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().extension() != ".tern") continue;
      const std::string stem = entry.path().stem().string();
      tern_model* model = nullptr;
      REQUIRE_MESSAGE(tern_model_load_file(entry.path().c_str(), &model) == TERN_OK,
                      std::string(tern_last_error()));
      check_runs(stem + ".tern", model, load_npy_case(dir, stem, model));
      tern_model_destroy(model);
      ++models;
    }
    CHECK_MESSAGE(models > 0, "no .tern model in ", std::string(dir));
  }

  TEST_CASE("onnx -> .tern -> load gives identical outputs") {
    if (!have_shared_models()) {
      MESSAGE((std::string("skipped: ") + models_unavailable()));
      return;
    }
    for (const char* name : {"ppocr_cls", "ppocr_det"}) {
      const std::string dir = model_dir(name);
      tern_model* onnx = nullptr;
      REQUIRE(tern_model_load_file((dir + "/model.onnx").c_str(), &onnx) == TERN_OK);
      const std::string tern_path = std::string("roundtrip_") + name + ".tern";
      REQUIRE_MESSAGE(tern_model_save(onnx, tern_path.c_str()) == TERN_OK,
                      std::string(tern_last_error()));
      tern_model* loaded = nullptr;
      REQUIRE_MESSAGE(tern_model_load_file(tern_path.c_str(), &loaded) == TERN_OK,
                      std::string(tern_last_error()));
      // From memory too: the bytes are copied, so the buffer can go right away.
      std::vector<char> bytes = read_file(tern_path);
      tern_model* from_memory = nullptr;
      REQUIRE(tern_model_load_memory(bytes.data(), bytes.size(), &from_memory) == TERN_OK);
      bytes.assign(bytes.size(), 0);
      ReferenceCase rc = load_reference_case(dir, onnx);
      RunResult a = run_case(onnx, rc, 1), b = run_case(loaded, rc, 1),
                c = run_case(from_memory, rc, 1);
      CHECK(a.outputs == b.outputs);  // bitwise: same graph, same kernels
      CHECK(a.outputs == c.outputs);
      CHECK(a.shapes == b.shapes);
      tern_model_destroy(onnx);
      tern_model_destroy(loaded);
      tern_model_destroy(from_memory);
      std::remove(tern_path.c_str());
    }
  }

  TEST_CASE("truncated, bit-flipped and empty model files are INVALID_MODEL, never a crash") {
    if (!have_shared_models()) {
      MESSAGE((std::string("skipped: ") + models_unavailable()));
      return;
    }
    tern_model* onnx = nullptr;
    REQUIRE(tern_model_load_file((model_dir("ppocr_cls") + "/model.onnx").c_str(), &onnx) ==
            TERN_OK);
    REQUIRE(tern_model_save(onnx, "corrupt_src.tern") == TERN_OK);
    tern_model_destroy(onnx);
    const std::vector<char> tern_bytes = read_file("corrupt_src.tern");
    const std::vector<char> onnx_bytes = read_file(model_dir("ppocr_cls") + "/model.onnx");
    std::remove("corrupt_src.tern");

    auto expect_invalid = [](const std::vector<char>& bytes, const char* what) {
      write_file("corrupt.bin", bytes);
      tern_model* m = nullptr;
      tern_status s = tern_model_load_file("corrupt.bin", &m);
      INFO(what, ": ", tern_status_name(s), ": ", std::string(tern_last_error()));
      CHECK(s == TERN_ERR_INVALID_MODEL);
      CHECK(m == nullptr);
      CHECK(std::string(tern_last_error()).size() > 10);
      tern_model_destroy(m);
    };
    expect_invalid({}, "empty file");
    for (double frac : {0.1, 0.5, 0.9, 0.999}) {
      size_t keep = static_cast<size_t>(static_cast<double>(tern_bytes.size()) * frac);
      expect_invalid(std::vector<char>(tern_bytes.begin(),
                                       tern_bytes.begin() + static_cast<std::ptrdiff_t>(keep)),
                     "truncated .tern");
    }
    for (double frac : {0.05, 0.3, 0.7}) {
      size_t keep = static_cast<size_t>(static_cast<double>(onnx_bytes.size()) * frac);
      expect_invalid(std::vector<char>(onnx_bytes.begin(),
                                       onnx_bytes.begin() + static_cast<std::ptrdiff_t>(keep)),
                     "truncated ONNX");
    }
    // Bit flips in the .tern header and tables: whatever they hit, the load either fails with
    // INVALID_MODEL or (a flip in a don't-care byte) succeeds; it never crashes.
    uint32_t seed = 12345;
    int invalid = 0;
    for (int trial = 0; trial < 300; ++trial) {
      std::vector<char> b = tern_bytes;
      seed = seed * 1664525u + 1013904223u;
      size_t pos = seed % std::min<size_t>(b.size(), 64 * 1024);
      b[pos] = static_cast<char>(b[pos] ^ (1 << (seed >> 29)));
      write_file("corrupt.bin", b);
      tern_model* m = nullptr;
      tern_status s = tern_model_load_file("corrupt.bin", &m);
      CHECK((s == TERN_OK || s == TERN_ERR_INVALID_MODEL || s == TERN_ERR_UNSUPPORTED));
      if (s != TERN_OK) ++invalid;
      tern_model_destroy(m);
    }
    MESSAGE(invalid,
            " of 300 bit-flipped .tern files rejected, the rest loaded (flips in names/data)");
    CHECK(invalid > 0);
    // A flipped identifier makes the bytes "not .tern", so they go to the ONNX importer, which
    // rejects them.
    std::vector<char> b = tern_bytes;
    b[5] ^= 0x20;
    expect_invalid(b, "identifier flipped");
    std::remove("corrupt.bin");
  }
}
