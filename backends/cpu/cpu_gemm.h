// Row-major single-precision GEMM on the intra-op threads: C = alpha * op(A) * op(B) + beta * C.
// OpenBLAS (held at one thread) computes each part; Tern splits the work over OpenMP threads so
// GEMMs, oneDNN and our own kernels share one pool. Without OpenBLAS our own packed GEMM runs
// (own_sgemm.h: NEON on aarch64).
//
// Partitions: by default the larger of M and N is split into one part per thread. With
// deterministic set the split is a fixed grid that depends on the shapes only, so every element
// is computed by the same call whatever the thread count: results are bitwise reproducible.
#pragma once

#include <cstdint>

namespace tern {

struct GemmShape {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
};

// Which GEMM runs: "openblas", or "own_sgemm(neon)" / "own_sgemm(portable)" (kernel names).
const char* cpu_gemm_name();

void cpu_sgemm(const GemmShape& s, float alpha, const float* a, const float* b, float beta,
               float* c, int threads, bool deterministic);

// One group of an im2col convolution: y[m, pixels] = w[m, depth] * col[depth, pixels], plus
// bias[row] on each row where bias is not null (all row-major, packed).
void cpu_conv_group_gemm(int64_t m, int64_t pixels, int64_t depth, const float* w, const float* col,
                         const float* bias, float* y, int threads, bool deterministic);

// `count` independent GEMMs of one shape (batched MatMul): in parallel over the batch when there
// are at least as many matrices as threads, else one after another, each split.
void cpu_sgemm_batch(const GemmShape& s, float alpha, const float* const* a, const float* const* b,
                     float beta, float* const* c, int64_t count, int threads, bool deterministic);

}  // namespace tern
