#include "backends/cpu/own_sgemm.h"

#include <algorithm>
#include <vector>

#if defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace tern {

namespace {

// The micro-tile: kMr rows of op(A) times kNr columns of op(B), held in registers over a K block.
constexpr int kMr = 8;
constexpr int kNr = 8;
// Blocks of op(A) rows and op(B) columns packed at once (A block: kMc x kGemmKc floats, 128 KiB;
// B block: kGemmKc x kNc floats, 512 KiB).
constexpr int64_t kMc = 128;
constexpr int64_t kNc = 512;

#if defined(__aarch64__)
// acc[i][0..7] += a[i] * b[0..7] for each k: 16 accumulators (8 rows x 2 q-registers), A and B
// panels read as two q-registers each, fused multiply-add by lane.
void micro_kernel(int64_t kc, const float* a, const float* b, float* tile) {
  float32x4_t c00 = vdupq_n_f32(0), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
              c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00,
              c61 = c00, c70 = c00, c71 = c00;
  for (int64_t p = 0; p < kc; ++p) {
    const float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4);
    const float32x4_t a0 = vld1q_f32(a), a1 = vld1q_f32(a + 4);
    c00 = vfmaq_laneq_f32(c00, b0, a0, 0);
    c01 = vfmaq_laneq_f32(c01, b1, a0, 0);
    c10 = vfmaq_laneq_f32(c10, b0, a0, 1);
    c11 = vfmaq_laneq_f32(c11, b1, a0, 1);
    c20 = vfmaq_laneq_f32(c20, b0, a0, 2);
    c21 = vfmaq_laneq_f32(c21, b1, a0, 2);
    c30 = vfmaq_laneq_f32(c30, b0, a0, 3);
    c31 = vfmaq_laneq_f32(c31, b1, a0, 3);
    c40 = vfmaq_laneq_f32(c40, b0, a1, 0);
    c41 = vfmaq_laneq_f32(c41, b1, a1, 0);
    c50 = vfmaq_laneq_f32(c50, b0, a1, 1);
    c51 = vfmaq_laneq_f32(c51, b1, a1, 1);
    c60 = vfmaq_laneq_f32(c60, b0, a1, 2);
    c61 = vfmaq_laneq_f32(c61, b1, a1, 2);
    c70 = vfmaq_laneq_f32(c70, b0, a1, 3);
    c71 = vfmaq_laneq_f32(c71, b1, a1, 3);
    a += kMr;
    b += kNr;
  }
  const float32x4_t rows[kMr][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31},
                                    {c40, c41}, {c50, c51}, {c60, c61}, {c70, c71}};
  for (int i = 0; i < kMr; ++i) {
    vst1q_f32(tile + i * kNr, rows[i][0]);
    vst1q_f32(tile + i * kNr + 4, rows[i][1]);
  }
}
constexpr const char* kKernelName = "own_sgemm(neon)";
#else
// Portable: fixed-size loops the compiler keeps in vector registers (SSE2 on x86-64 baseline).
void micro_kernel(int64_t kc, const float* a, const float* b, float* tile) {
  float acc[kMr][kNr] = {};
  for (int64_t p = 0; p < kc; ++p) {
    for (int i = 0; i < kMr; ++i) {
      for (int j = 0; j < kNr; ++j) acc[i][j] += a[i] * b[j];
    }
    a += kMr;
    b += kNr;
  }
  for (int i = 0; i < kMr; ++i) {
    for (int j = 0; j < kNr; ++j) tile[i * kNr + j] = acc[i][j];
  }
}
constexpr const char* kKernelName = "own_sgemm(portable)";
#endif

// op(A)[i0 + i, p0 + p] for i < mc, p < kc into panels of kMr rows: [panel][p][kMr], rows past mc
// zero.
void pack_a(const GemmShape& s, const float* a, int64_t i0, int64_t mc, int64_t p0, int64_t kc,
            float* out) {
  for (int64_t ip = 0; ip < mc; ip += kMr) {
    const int64_t rows = std::min<int64_t>(kMr, mc - ip);
    for (int64_t p = 0; p < kc; ++p) {
      for (int64_t i = 0; i < kMr; ++i) {
        const int64_t r = i0 + ip + i, col = p0 + p;
        out[p * kMr + i] = i < rows ? (s.trans_a ? a[col * s.lda + r] : a[r * s.lda + col]) : 0.0f;
      }
    }
    out += kc * kMr;
  }
}

// op(B)[p0 + p, j0 + j] for p < kc, j < nc into panels of kNr columns: [panel][p][kNr], columns
// past nc zero.
void pack_b(const GemmShape& s, const float* b, int64_t p0, int64_t kc, int64_t j0, int64_t nc,
            float* out) {
  for (int64_t jp = 0; jp < nc; jp += kNr) {
    const int64_t cols = std::min<int64_t>(kNr, nc - jp);
    for (int64_t p = 0; p < kc; ++p) {
      const int64_t row = p0 + p;
      float* dst = out + p * kNr;
      if (!s.trans_b && cols == kNr) {
        const float* src = b + row * s.ldb + j0 + jp;
        for (int j = 0; j < kNr; ++j) dst[j] = src[j];
      } else {
        for (int64_t j = 0; j < kNr; ++j) {
          const int64_t col = j0 + jp + j;
          dst[j] = j < cols ? (s.trans_b ? b[col * s.ldb + row] : b[row * s.ldb + col]) : 0.0f;
        }
      }
    }
    out += kc * kNr;
  }
}

}  // namespace

const char* own_sgemm_kernel_name() {
  return kKernelName;
}

void own_sgemm(const GemmShape& s, float alpha, const float* a, const float* b, float beta,
               float* c, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  if (m1 <= m0 || n1 <= n0) return;
  if (s.k <= 0) {
    for (int64_t i = m0; i < m1; ++i) {
      for (int64_t j = n0; j < n1; ++j)
        c[i * s.ldc + j] = beta == 0 ? 0.0f : beta * c[i * s.ldc + j];
    }
    return;
  }
  thread_local std::vector<float> a_pack, b_pack;
  a_pack.resize(static_cast<size_t>(((kMc + kMr - 1) / kMr) * kMr * kGemmKc));
  b_pack.resize(static_cast<size_t>(((kNc + kNr - 1) / kNr) * kNr * kGemmKc));
  alignas(64) float tile[kMr * kNr];
  for (int64_t jc = n0; jc < n1; jc += kNc) {
    const int64_t nc = std::min(kNc, n1 - jc);
    for (int64_t pc = 0; pc < s.k; pc += kGemmKc) {
      const int64_t kc = std::min(kGemmKc, s.k - pc);
      const bool first = pc == 0;
      pack_b(s, b, pc, kc, jc, nc, b_pack.data());
      for (int64_t ic = m0; ic < m1; ic += kMc) {
        const int64_t mc = std::min(kMc, m1 - ic);
        pack_a(s, a, ic, mc, pc, kc, a_pack.data());
        for (int64_t jr = 0; jr < nc; jr += kNr) {
          const int64_t nr = std::min<int64_t>(kNr, nc - jr);
          const float* bp = b_pack.data() + (jr / kNr) * kc * kNr;
          for (int64_t ir = 0; ir < mc; ir += kMr) {
            const int64_t mr = std::min<int64_t>(kMr, mc - ir);
            micro_kernel(kc, a_pack.data() + (ir / kMr) * kc * kMr, bp, tile);
            for (int64_t i = 0; i < mr; ++i) {
              float* crow = c + (ic + ir + i) * s.ldc + jc + jr;
              const float* t = tile + i * kNr;
              if (!first) {
                for (int64_t j = 0; j < nr; ++j) crow[j] += alpha * t[j];
              } else if (beta == 0) {
                for (int64_t j = 0; j < nr; ++j) crow[j] = alpha * t[j];
              } else {
                for (int64_t j = 0; j < nr; ++j) crow[j] = alpha * t[j] + beta * crow[j];
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace tern
