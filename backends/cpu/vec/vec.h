// Tern's own vectorised primitives, compiled once per x86 ISA level (scalar, AVX2, AVX-512) from
// one source (vec_impl.inc) and chosen at run time. Which table a kernel gets follows the CPU's
// capability capped by the cpu.max_capability flag (env TERN_CPU_CAPABILITY), so the dispatch can
// be observed and tested: kernels put VecOps::isa into their names.
#pragma once

#include <cstdint>

namespace tern {

enum class CpuIsa : int { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

struct VecOps {
  const char* isa;  // "scalar" | "avx2" | "avx512"
  // sum(a[i] * b[i]), accumulated in 16 fixed lanes so every ISA adds in the same order.
  float (*dot)(const float* a, const float* b, int64_t n);
  // y[i] += a * x[i]
  void (*axpy)(float a, const float* x, float* y, int64_t n);
  // y[i] *= a
  void (*scale)(float* y, float a, int64_t n);
  // max(x[i]); -inf for n == 0
  float (*max)(const float* x, int64_t n);
  // y[i] = exp(x[i] - sub) (0 where x[i] - sub < -87.3, e.g. -inf), returns sum(y) in double
  double (*exp_sum)(const float* x, float sub, float* y, int64_t n);
  // C[m*ldc + n] = alpha * dot(A row m, B row n) over k for m < M, n < N (A·Bᵀ, both row-major)
  void (*gemm_nt)(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                  int64_t m, int64_t n, int64_t k, float alpha);
};

// The table for an ISA level (levels the build or the CPU lack fall back to a lower one).
const VecOps& vec_ops(CpuIsa isa);

namespace vec_detail {
extern const VecOps kScalarOps;
extern const VecOps kAvx2Ops;    // only on x86-64
extern const VecOps kAvx512Ops;  // only on x86-64
}  // namespace vec_detail

}  // namespace tern
