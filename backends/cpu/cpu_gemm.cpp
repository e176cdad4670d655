#include "backends/cpu/cpu_gemm.h"

#include <algorithm>

#include "backends/cpu/own_sgemm.h"
#include "core/parallel.h"

#if defined(TERN_HAVE_OPENBLAS)
#include <cblas.h>
#endif

namespace tern {

namespace {

// Fixed tile sizes for deterministic partitions (shape-only).
constexpr int64_t kDetRows = 64;
constexpr int64_t kDetCols = 256;

void gemm_one(const GemmShape& s, float alpha, const float* a, const float* b, float beta, float* c,
              int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t m = m1 - m0, n = n1 - n0;
  if (m <= 0 || n <= 0) return;
#if defined(TERN_HAVE_OPENBLAS)
  // Element (i, p) of op(A) and (p, j) of op(B).
  const float* ap = s.trans_a ? a + m0 : a + m0 * s.lda;
  const float* bp = s.trans_b ? b + n0 * s.ldb : b + n0;
  float* cp = c + m0 * s.ldc + n0;
  if (s.k == 0) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j)
        cp[i * s.ldc + j] = beta == 0 ? 0.0f : beta * cp[i * s.ldc + j];
    }
    return;
  }
  if (m == 1) {
    // One row (a classifier's fully connected layer at batch 1): a matrix-vector product. sgemm
    // would copy all of B into its packed panels first, on every call.
    const blasint incx = static_cast<blasint>(s.trans_a ? s.lda : 1);
    if (s.trans_b) {  // B holds op(B)'s columns as rows: y = B[n x k] * a
      cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<blasint>(n), static_cast<blasint>(s.k),
                  alpha, bp, static_cast<blasint>(s.ldb), ap, incx, beta, cp, 1);
    } else {  // y = B[k x n]^T * a
      cblas_sgemv(CblasRowMajor, CblasTrans, static_cast<blasint>(s.k), static_cast<blasint>(n),
                  alpha, bp, static_cast<blasint>(s.ldb), ap, incx, beta, cp, 1);
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans,
              s.trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(s.k), alpha, ap,
              static_cast<blasint>(s.lda), bp, static_cast<blasint>(s.ldb), beta, cp,
              static_cast<blasint>(s.ldc));
#else
  own_sgemm(s, alpha, a, b, beta, c, m0, m1, n0, n1);
#endif
}

// Every matrix split into the fixed tile grid; tasks are (matrix, tile) pairs.
void deterministic_gemms(const GemmShape& s, float alpha, const float* const* a,
                         const float* const* b, float beta, float* const* c, int64_t count,
                         int threads) {
  const int64_t tm = (s.m + kDetRows - 1) / kDetRows, tn = (s.n + kDetCols - 1) / kDetCols;
  const int64_t tiles = tm * tn;
  parallel_for(count * tiles, 1, threads, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t mat = t / tiles, i = (t % tiles) / tn, j = t % tn;
      gemm_one(s, alpha, a[mat], b[mat], beta, c[mat], i * kDetRows,
               std::min(s.m, (i + 1) * kDetRows), j * kDetCols, std::min(s.n, (j + 1) * kDetCols));
    }
  });
}

}  // namespace

const char* cpu_gemm_name() {
#if defined(TERN_HAVE_OPENBLAS)
  return "openblas";
#else
  return own_sgemm_kernel_name();
#endif
}

void cpu_sgemm(const GemmShape& s, float alpha, const float* a, const float* b, float beta,
               float* c, int threads, bool deterministic) {
  if (s.m <= 0 || s.n <= 0) return;
  if (deterministic) {
    deterministic_gemms(s, alpha, &a, &b, beta, &c, 1, threads);
    return;
  }
  // Small products are not worth waking threads for.
  const double flops = 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) *
                       static_cast<double>(std::max<int64_t>(s.k, 1));
  if (threads <= 1 || flops < 2e5) {
    gemm_one(s, alpha, a, b, beta, c, 0, s.m, 0, s.n);
    return;
  }
  if (s.m >= s.n) {
    parallel_for(s.m, 8, threads, [&](int64_t m0, int64_t m1) {
      gemm_one(s, alpha, a, b, beta, c, m0, m1, 0, s.n);
    });
  } else {
    parallel_for((s.n + 15) / 16, 1, threads, [&](int64_t n0, int64_t n1) {
      gemm_one(s, alpha, a, b, beta, c, 0, s.m, n0 * 16, std::min(s.n, n1 * 16));
    });
  }
}

void cpu_sgemm_batch(const GemmShape& s, float alpha, const float* const* a, const float* const* b,
                     float beta, float* const* c, int64_t count, int threads, bool deterministic) {
  if (s.m <= 0 || s.n <= 0 || count <= 0) return;
  if (deterministic) {
    deterministic_gemms(s, alpha, a, b, beta, c, count, threads);
    return;
  }
  if (count >= threads) {
    parallel_for(count, 1, threads, [&](int64_t b0, int64_t b1) {
      for (int64_t i = b0; i < b1; ++i) gemm_one(s, alpha, a[i], b[i], beta, c[i], 0, s.m, 0, s.n);
    });
    return;
  }
  for (int64_t i = 0; i < count; ++i) cpu_sgemm(s, alpha, a[i], b[i], beta, c[i], threads, false);
}

void cpu_conv_group_gemm(int64_t m, int64_t pixels, int64_t depth, const float* w, const float* col,
                         const float* bias, float* y, int threads, bool deterministic) {
  cpu_sgemm(GemmShape{false, false, m, pixels, depth, depth, pixels, pixels}, 1.0f, w, col, 0.0f, y,
            threads, deterministic);
  if (!bias) return;
  for (int64_t o = 0; o < m; ++o) {
    float* yo = y + o * pixels;
    for (int64_t i = 0; i < pixels; ++i) yo[i] += bias[o];
  }
}

}  // namespace tern
