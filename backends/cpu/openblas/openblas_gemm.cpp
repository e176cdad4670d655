// MatMul and Gemm on OpenBLAS's sgemm.
#include <cblas.h>

#include "core/kernel_registry.h"
#include "ops/matmul.h"

namespace tern {
namespace {

Status run_matmul(const ops::MatMulParams& p, const KernelArgs& a, const ExecContext&) {
  const float* A = a.inputs[0]->data<float>();
  const float* B = a.inputs[1]->data<float>();
  float* Y = a.outputs[0]->data<float>();
  if (p.M == 0 || p.N == 0) return Status::ok();
  for (size_t m = 0; m < p.a_offsets.size(); ++m) {
    float* y = Y + static_cast<int64_t>(m) * p.M * p.N;
    if (p.K == 0) {
      std::fill(y, y + p.M * p.N, 0.0f);
      continue;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(p.M),
                static_cast<blasint>(p.N), static_cast<blasint>(p.K), 1.0f, A + p.a_offsets[m],
                static_cast<blasint>(p.K), B + p.b_offsets[m], static_cast<blasint>(p.N), 0.0f, y,
                static_cast<blasint>(p.N));
  }
  return Status::ok();
}

Status run_gemm(const ops::GemmParams& p, const KernelArgs& a, const ExecContext&) {
  const float* c = a.inputs.size() > 2 && a.inputs[2] ? a.inputs[2]->data<float>() : nullptr;
  float* Y = a.outputs[0]->data<float>();
  ops::gemm_fill_bias(p, c, Y);
  if (p.M == 0 || p.N == 0 || p.K == 0) return Status::ok();
  cblas_sgemm(CblasRowMajor, p.trans_a ? CblasTrans : CblasNoTrans,
              p.trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(p.M),
              static_cast<blasint>(p.N), static_cast<blasint>(p.K), p.alpha,
              a.inputs[0]->data<float>(), static_cast<blasint>(p.trans_a ? p.M : p.K),
              a.inputs[1]->data<float>(), static_cast<blasint>(p.trans_b ? p.K : p.N),
              c ? 1.0f : 0.0f, Y, static_cast<blasint>(p.N));
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_matmul(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::MatMulParams p, ops::parse_matmul(ctx));
  return make_kernel("openblas", std::move(p), run_matmul);
}

Expected<std::unique_ptr<Kernel>> make_gemm(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::GemmParams p, ops::parse_gemm(ctx));
  return make_kernel("openblas", std::move(p), run_gemm);
}

}  // namespace

void register_cpu_openblas_gemm(KernelRegistry& r) {
  r.add("MatMul", "cpu", DType::kFloat32, make_matmul);
  r.add("Gemm", "cpu", DType::kFloat32, make_gemm);
}

}  // namespace tern
