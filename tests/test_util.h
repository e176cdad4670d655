// Helpers shared by the unit tests: paths to ../shared, reference-case loading, comparison.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "c_api.h"
#include "core/tensor.h"

namespace tern_test {

// Float32 values uniform in [-1, 1).
inline tern::Tensor random_f32(tern::Shape shape, std::mt19937& rng) {
  tern::Tensor t = tern::Tensor::allocate(tern::DType::kFloat32, std::move(shape)).value();
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// A file's bytes (empty when it cannot be read).
inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// What f() prints on stdout: file descriptor 1 is redirected to a temporary file around the call,
// so the library's own lines (blas.verbose, oneDNN's verbose) are caught too.
template <class F>
std::string capture_stdout(F&& f) {
  std::fflush(stdout);
  char path[] = "/tmp/tern_stdout_XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  const int saved = dup(1);
  dup2(fd, 1);
  f();
  std::fflush(stdout);
  dup2(saved, 1);
  close(saved);
  close(fd);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(path);
  return text;
}

// x [batch, 8] -> MatMul -> Add -> Reshape [-1, 2, 3] -> Softmax -> y: the fuzzers' seed model,
// in the repository, so the tests that use it need nothing from ../shared.
inline std::string matmul_seed_model() {
  return std::string(TERN_SOURCE_DIR) + "/tests/fuzz/corpus/tern_loader/matmul.tern";
}

inline std::string shared_dir() {
  return TERN_SHARED_DIR;
}
inline std::string model_dir(const std::string& name) {
  return shared_dir() + "/models/" + name;
}
// Why the models in ../shared/models cannot be used by this build ("" when they can).
inline std::string models_unavailable() {
#if !defined(TERN_HAVE_ONNX)
  return "this build has no ONNX importer (TERN_MINIMAL=ON or TERN_WITH_ONNX=OFF)";
#else
  if (!std::filesystem::exists(shared_dir() + "/models/ppocr_cls/model.onnx")) {
    return "../shared/models is absent";
  }
  return "";
#endif
}
// The status for bytes that are not a .tern file: without the importer they might still be ONNX.
#if defined(TERN_HAVE_ONNX)
constexpr tern_status kNotTernFileStatus = TERN_ERR_INVALID_MODEL;
#else
constexpr tern_status kNotTernFileStatus = TERN_ERR_UNSUPPORTED;
#endif
inline bool have_shared_models() {
  return models_unavailable().empty();
}

// A session of `m` through the C API with these intra- and inter-op thread counts.
inline tern_session* c_api_session(tern_model* m, int threads, int interop) {
  tern_session_options* o = nullptr;
  REQUIRE(tern_session_options_create(&o) == TERN_OK);
  REQUIRE(tern_session_options_set_num_threads(o, threads) == TERN_OK);
  REQUIRE(tern_session_options_set_num_interop_threads(o, interop) == TERN_OK);
  tern_session* s = nullptr;
  const tern_status st = tern_session_create(m, o, &s);
  tern_session_options_destroy(o);
  REQUIRE_MESSAGE(st == TERN_OK, tern_last_error());
  return s;
}

struct Comparison {
  bool shapes_match = false;
  size_t mismatches = 0;
  double max_abs = 0, max_rel = 0;
};

// |a - b| <= atol + rtol * |b| elementwise (b is the reference); NaN matches NaN.
inline Comparison compare(const float* a, const float* b, size_t n, double rtol, double atol) {
  Comparison c;
  c.shapes_match = true;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    c.max_abs = std::max(c.max_abs, d);
    if (b[i] != 0) c.max_rel = std::max(c.max_rel, d / std::fabs(static_cast<double>(b[i])));
    if (!(d <= atol + rtol * std::fabs(static_cast<double>(b[i])))) ++c.mismatches;
  }
  return c;
}

// A reference case (../shared layout): inputs and expected outputs, as tern tensors.
struct ReferenceCase {
  std::vector<std::string> input_names, output_names;
  std::vector<tern::Tensor> inputs, outputs;
};
ReferenceCase load_reference_case(const std::string& dir, const tern_model* model);

// Owns C handles in tests.
struct Handles {
  std::vector<tern_tensor*> tensors;
  ~Handles() {
    for (auto* t : tensors) tern_tensor_destroy(t);
  }
};

}  // namespace tern_test
