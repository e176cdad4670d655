// The torch.backends counterparts of issue 28 item 8 through the C API: availability and its
// reasons (mkl, nnpack, cusparselt, opt_einsum, flash attention), tern_config_show listing them,
// the BLAS verbose switch (process-wide and for one run: a MatMul's line appears with its shape
// only in runs that asked for it) and the fp16/bf16 math-reduction flag's typed and generic views.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <random>
#include <string>

#include "c_api.h"
#include "graph_builder.h"
#include "serialization/model_io.h"
#include "test_util.h"

using namespace tern;
using namespace tern_test;

namespace {

// x [4, 8] x W [8, 16] -> y, and x x x2 for a product of two activations (x2 [8, 16] an input).
tern_model* matmul_model() {
  GraphMaker mk;
  Graph& g = mk.g;
  g.opset = 17;
  const int x = g.add_value("x", ValueType{DType::kFloat32, true, {Dim{4, ""}, Dim{8, ""}}});
  const int x2 = g.add_value("x2", ValueType{DType::kFloat32, true, {Dim{8, ""}, Dim{16, ""}}});
  g.inputs = {x, x2};
  std::mt19937 rng(3);
  const int y = mk.node("MatMul", {x, mk.constant("w", random_f32({8, 16}, rng))});
  const int z = mk.node("MatMul", {x, x2});
  g.values[static_cast<size_t>(y)].name = "y";
  g.values[static_cast<size_t>(z)].name = "z";
  g.outputs = {y, z};
  const std::string path = "/tmp/tern_blas_verbose_" + std::to_string(::getpid()) + ".tern";
  REQUIRE(serialization::save_tern(g, path).is_ok());
  tern_model* m = nullptr;
  REQUIRE(tern_model_load_file(path.c_str(), &m) == TERN_OK);
  std::remove(path.c_str());
  return m;
}

// What one run of s with options r prints on stdout.
std::string run_captured(tern_session* s, const tern_run_options* r) {
  std::mt19937 rng(4);
  Tensor xv = random_f32({4, 8}, rng), x2v = random_f32({8, 16}, rng);
  const int64_t xs[] = {4, 8}, x2s[] = {8, 16};
  tern_tensor *x = nullptr, *x2 = nullptr;
  REQUIRE(tern_tensor_create_from_data(TERN_FLOAT32, xs, 2, xv.raw(), xv.byte_size(), nullptr,
                                       nullptr, &x) == TERN_OK);
  REQUIRE(tern_tensor_create_from_data(TERN_FLOAT32, x2s, 2, x2v.raw(), x2v.byte_size(), nullptr,
                                       nullptr, &x2) == TERN_OK);
  const char* in_names[] = {"x", "x2"};
  const tern_tensor* ins[] = {x, x2};
  const char* out_names[] = {"y", "z"};
  tern_tensor* outs[2] = {nullptr, nullptr};
  tern_status st = TERN_OK;
  const std::string text =
      capture_stdout([&] { st = tern_session_run(s, r, in_names, ins, 2, out_names, 2, outs); });
  CHECK(st == TERN_OK);
  for (tern_tensor* t : outs) tern_tensor_destroy(t);
  tern_tensor_destroy(x);
  tern_tensor_destroy(x2);
  return text;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_SUITE("api") {
  TEST_CASE("torch.backends availability: mkl, nnpack, cusparselt absent with reasons") {
    CHECK(tern_opt_einsum_is_available() == 1);
    CHECK(tern_is_flash_attention_available() == 1);
    CHECK(tern_mkl_is_available() == 0);
    CHECK(tern_nnpack_is_available() == 0);
    CHECK(tern_cusparselt_is_available() == 0);
    CHECK(std::string(tern_backend_unavailable_reason("mkl")).find("MKL") != std::string::npos);
    CHECK(std::string(tern_backend_unavailable_reason("nnpack")).find("NNPACK") !=
          std::string::npos);
    CHECK(std::string(tern_backend_unavailable_reason("cusparselt")).find("cuSPARSELt") !=
          std::string::npos);
    CHECK(std::string(tern_backend_unavailable_reason("opt_einsum")).empty());
    CHECK(std::string(tern_backend_unavailable_reason("flash_attention")).empty());
    // The answers agree with the is_available functions.
    CHECK(std::string(tern_backend_unavailable_reason("onednn")).empty() ==
          (tern_onednn_is_available() == 1));
    CHECK(std::string(tern_backend_unavailable_reason("mkldnn")).empty() ==
          (tern_onednn_is_available() == 1));
    CHECK(std::string(tern_backend_unavailable_reason("openblas")).empty() ==
          (tern_openblas_is_available() == 1));
    CHECK(std::string(tern_backend_unavailable_reason("cuda")).empty() ==
          (tern_cuda_is_available() == 1));
    CHECK(std::string(tern_backend_unavailable_reason("vulkan")).empty() ==
          (tern_vulkan_is_available() == 1));
    CHECK(std::string(tern_backend_unavailable_reason("cudnn")).empty() ==
          (tern_cudnn_is_available() == 1));
    CHECK(tern_backend_unavailable_reason("abacus") == nullptr);
    CHECK(tern_backend_unavailable_reason(nullptr) == nullptr);
    const std::string config = tern_config_show();
    CHECK(config.find("nnpack: unavailable (not built") != std::string::npos);
    CHECK(config.find("opt_einsum: available") != std::string::npos);
  }

  TEST_CASE("fp16/bf16 math-reduction flag: typed and generic views") {
    const int before = tern_sdp_fp16_bf16_reduction_math_allowed();
    CHECK(before == 0);  // PyTorch's default
    tern_sdp_allow_fp16_bf16_reduction_math(1);
    char buf[16];
    REQUIRE(tern_flag_get("sdp.allow_fp16_bf16_reduction_math", buf, sizeof buf) == TERN_OK);
    CHECK(std::string(buf) == "true");
    tern_sdp_allow_fp16_bf16_reduction_math(before);
    CHECK(tern_sdp_fp16_bf16_reduction_math_allowed() == before);
    tern_run_options* r = nullptr;
    REQUIRE(tern_run_options_create(&r) == TERN_OK);
    CHECK(tern_run_options_set_flag(r, "sdp.allow_fp16_bf16_reduction_math", "on") == TERN_OK);
    tern_run_options_destroy(r);
  }

  TEST_CASE("BLAS verbose: each GEMM's line with its shape, only in runs that ask for it") {
    tern_model* m = matmul_model();
    tern_session* s = nullptr;
    REQUIRE(tern_session_create(m, nullptr, &s) == TERN_OK);
    CHECK(run_captured(s, nullptr).find("tern_blas_verbose") == std::string::npos);
    // Process-wide.
    REQUIRE(tern_blas_set_verbose(TERN_VERBOSE_ON) == TERN_OK);
    const std::string on = run_captured(s, nullptr);
    MESSAGE(on);
    CHECK(count(on, "tern_blas_verbose,exec,MatMul,") == 2);
    CHECK(count(on, ",NN,m=4,n=16,k=8,batch=1,") == 2);
    REQUIRE(tern_blas_set_verbose(TERN_VERBOSE_OFF) == TERN_OK);
    CHECK(run_captured(s, nullptr).find("tern_blas_verbose") == std::string::npos);
    CHECK(tern_blas_set_verbose(TERN_VERBOSE_ON_CREATION) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_blas_set_verbose(static_cast<tern_verbose_level>(7)) == TERN_ERR_INVALID_ARGUMENT);
    // For one run: only the runs given these options print.
    tern_run_options* r = nullptr;
    REQUIRE(tern_run_options_create(&r) == TERN_OK);
    REQUIRE(tern_run_options_set_flag(r, "blas.verbose", "true") == TERN_OK);
    CHECK(count(run_captured(s, r), "tern_blas_verbose,exec,MatMul,") == 2);
    CHECK(run_captured(s, nullptr).find("tern_blas_verbose") == std::string::npos);
    tern_run_options_destroy(r);
    tern_session_destroy(s);
    tern_model_destroy(m);
  }
}
