// MatMul, FusedMatMul and Gemm on cpu_sgemm: OpenBLAS's sgemm where the build has it, else Tern's
// own packed GEMM (NEON on aarch64); split over the intra-op threads either way.
#include <algorithm>
#include <vector>

#include "backends/cpu/blas_verbose.h"
#include "backends/cpu/cpu_gemm.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "ops/fused_matmul.h"

namespace tern {
namespace {

Status matmul(const ops::MatMulParams& p, const KernelArgs& a, const ExecContext& exec,
              const char* op) {
  const float* A = a.inputs[0]->data<float>();
  const float* B = a.inputs[1]->data<float>();
  float* Y = a.outputs[0]->data<float>();
  if (p.M == 0 || p.N == 0) return Status::ok();
  const int64_t count = static_cast<int64_t>(p.a_offsets.size());
  if (p.K == 0) {
    std::fill(Y, Y + count * p.M * p.N, 0.0f);
    return Status::ok();
  }
  GemmShape s{false, false, p.M, p.N, p.K, p.K, p.N, p.N};
  BlasVerbose verbose(exec, op, cpu_gemm_label(s), s, count);
  if (count == 1) {
    cpu_sgemm(s, 1.0f, A + p.a_offsets[0], B + p.b_offsets[0], 0.0f, Y, exec.num_threads,
              exec.deterministic);
    return Status::ok();
  }
  std::vector<const float*> as(static_cast<size_t>(count)), bs(static_cast<size_t>(count));
  std::vector<float*> cs(static_cast<size_t>(count));
  for (int64_t m = 0; m < count; ++m) {
    as[static_cast<size_t>(m)] = A + p.a_offsets[static_cast<size_t>(m)];
    bs[static_cast<size_t>(m)] = B + p.b_offsets[static_cast<size_t>(m)];
    cs[static_cast<size_t>(m)] = Y + m * p.M * p.N;
  }
  cpu_sgemm_batch(s, 1.0f, as.data(), bs.data(), 0.0f, cs.data(), count, exec.num_threads,
                  exec.deterministic);
  return Status::ok();
}

Status run_matmul(const ops::MatMulParams& p, const KernelArgs& a, const ExecContext& exec) {
  return matmul(p, a, exec, "MatMul");
}

Status run_gemm(const ops::GemmParams& p, const KernelArgs& a, const ExecContext& exec) {
  const float* c = a.inputs.size() > 2 && a.inputs[2] ? a.inputs[2]->data<float>() : nullptr;
  float* Y = a.outputs[0]->data<float>();
  ops::gemm_fill_bias(p, c, Y);
  if (p.M == 0 || p.N == 0 || p.K == 0) return Status::ok();
  GemmShape s{p.trans_a, p.trans_b, p.M, p.N, p.K, p.trans_a ? p.M : p.K, p.trans_b ? p.K : p.N,
              p.N};
  BlasVerbose verbose(exec, "Gemm", cpu_gemm_label(s), s);
  cpu_sgemm(s, p.alpha, a.inputs[0]->data<float>(), a.inputs[1]->data<float>(), c ? 1.0f : 0.0f, Y,
            exec.num_threads, exec.deterministic);
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_matmul(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::MatMulParams p, ops::parse_matmul(ctx));
  return make_kernel(cpu_gemm_name(), std::move(p), run_matmul);
}

Status run_fused_matmul(const ops::FusedMatMulParams& p, const KernelArgs& a,
                        const ExecContext& exec) {
  TERN_RETURN_IF_ERROR(matmul(p.mm, a, exec, "FusedMatMul"));
  const float* bias = p.has_bias ? a.inputs[2]->data<float>() : nullptr;
  float* y = a.outputs[0]->data<float>();
  const int64_t rows = p.mm.N ? a.outputs[0]->numel() / p.mm.N : 0;
  parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(p.mm.N, 1)), exec.num_threads,
               [&](int64_t r0, int64_t r1) {
                 ops::apply_bias_activation(p, bias, y + r0 * p.mm.N, r1 - r0);
               });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_fused_matmul(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::FusedMatMulParams p, ops::parse_fused_matmul(ctx));
  return make_kernel(cpu_gemm_name(), std::move(p), run_fused_matmul);
}

Expected<std::unique_ptr<Kernel>> make_gemm(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::GemmParams p, ops::parse_gemm(ctx));
  return make_kernel(cpu_gemm_name(), std::move(p), run_gemm);
}

}  // namespace

TERN_REGISTRATION void register_cpu_gemm(KernelRegistry& r) {
  r.add("MatMul", "cpu", DType::kFloat32, make_matmul);
  r.add("FusedMatMul", "cpu", DType::kFloat32, make_fused_matmul);
  r.add("Gemm", "cpu", DType::kFloat32, make_gemm);
}

}  // namespace tern
