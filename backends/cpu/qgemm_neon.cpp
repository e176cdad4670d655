// The aarch64 path of Tern's int8 GEMM (qgemm.h): 4 rows x 16 columns of int32 sums in 16
// registers, each SDOT (vdotq_laneq_s32) adding four k of one row into four columns, then the
// requantisation in registers (the same float arithmetic as the portable path's, so the paths
// agree bit for bit). Compiled for ARMv8.2-A + dotprod in a baseline build: only called when
// the CPU has the instructions (qgemm::best_path).
#if defined(__aarch64__)
#include <arm_neon.h>

#include <cstring>

#include "backends/cpu/qgemm.h"

#define TERN_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))

namespace tern::qgemm {
namespace {

// One row's four column vectors += four k of that row (32-bit lane `lane` of a) x the panel's
// vectors b0..b3.
#define TERN_QGEMM_ROW(c0, c1, c2, c3, a, lane) \
  c0 = vdotq_laneq_s32(c0, b0, a, lane);        \
  c1 = vdotq_laneq_s32(c1, b1, a, lane);        \
  c2 = vdotq_laneq_s32(c2, b2, a, lane);        \
  c3 = vdotq_laneq_s32(c3, b3, a, lane)
// Four k of every row: the panel's next 64 bytes.
#define TERN_QGEMM_GROUP(lane)                                    \
  do {                                                            \
    const int8x16_t b0 = vld1q_s8(b), b1 = vld1q_s8(b + 16);      \
    const int8x16_t b2 = vld1q_s8(b + 32), b3 = vld1q_s8(b + 48); \
    b += 64;                                                      \
    TERN_QGEMM_ROW(c00, c01, c02, c03, a0, lane);                 \
    TERN_QGEMM_ROW(c10, c11, c12, c13, a1, lane);                 \
    TERN_QGEMM_ROW(c20, c21, c22, c23, a2, lane);                 \
    TERN_QGEMM_ROW(c30, c31, c32, c33, a3, lane);                 \
  } while (0)

}  // namespace

TERN_DOTPROD void neon_dot_tile(const int8_t* const* l, const int8_t* panel, int64_t kd, int rows,
                                int cols, int64_t row0, int64_t col0, void* c, int64_t ldc,
                                const Epilogue& e) {
  // Named accumulators: an array of vectors indexed in loops is kept in memory by GCC.
  const int32x4_t z = vdupq_n_s32(0);
  int32x4_t c00 = z, c01 = z, c02 = z, c03 = z, c10 = z, c11 = z, c12 = z, c13 = z;
  int32x4_t c20 = z, c21 = z, c22 = z, c23 = z, c30 = z, c31 = z, c32 = z, c33 = z;
  const int8_t* b = panel;
  const int8_t *l0 = l[0], *l1 = l[1], *l2 = l[2], *l3 = l[3];
  for (int64_t k = 0; k < kd; k += 16) {
    const int8x16_t a0 = vld1q_s8(l0 + k), a1 = vld1q_s8(l1 + k);
    const int8x16_t a2 = vld1q_s8(l2 + k), a3 = vld1q_s8(l3 + k);
    TERN_QGEMM_GROUP(0);
    TERN_QGEMM_GROUP(1);
    TERN_QGEMM_GROUP(2);
    TERN_QGEMM_GROUP(3);
  }
  const int32x4_t acc[4][4] = {
      {c00, c01, c02, c03}, {c10, c11, c12, c13}, {c20, c21, c22, c23}, {c30, c31, c32, c33}};
  if (e.out_i32) {
    for (int r = 0; r < rows; ++r) {
      int32_t sums[kPanel];
      for (int j = 0; j < 4; ++j) vst1q_s32(sums + 4 * j, acc[r][j]);
      store_int32_row(sums, cols, row0 + r, col0, c, ldc, e);
    }
    return;
  }
  const float32x4_t lo = vdupq_n_f32(e.lo), hi = vdupq_n_f32(e.hi);
  const int32x4_t zero = vdupq_n_s32(e.zero);
  for (int r = 0; r < rows; ++r) {
    const int64_t row = row0 + r;
    int32x4_t q[4];
    for (int j = 0; j < 4; ++j) {
      int32x4_t bias;
      float32x4_t scale;
      if (e.per_row) {
        bias = vdupq_n_s32(e.bias[row]);
        scale = vdupq_n_f32(e.scale[row]);
      } else if ((j + 1) * 4 <= cols) {
        bias = vld1q_s32(e.bias + col0 + j * 4);
        scale = vld1q_f32(e.scale + col0 + j * 4);
      } else {  // past the last column: the values are not stored
        int32_t bt[4] = {};
        float st[4] = {};
        for (int t = 0; t < 4 && j * 4 + t < cols; ++t) {
          bt[t] = e.bias[col0 + j * 4 + t];
          st[t] = e.scale[col0 + j * 4 + t];
        }
        bias = vld1q_s32(bt);
        scale = vld1q_f32(st);
      }
      float32x4_t v = vmulq_f32(vcvtq_f32_s32(vaddq_s32(acc[r][j], bias)), scale);
      v = vminq_f32(vmaxq_f32(v, lo), hi);
      q[j] = vaddq_s32(vcvtnq_s32_f32(v), zero);  // round to nearest, ties to even
    }
    // In the output type's range already: the narrowing saturates nothing.
    const int16x8_t h0 = vcombine_s16(vmovn_s32(q[0]), vmovn_s32(q[1]));
    const int16x8_t h1 = vcombine_s16(vmovn_s32(q[2]), vmovn_s32(q[3]));
    const uint8x16_t bytes = e.out_u8
                                 ? vcombine_u8(vqmovun_s16(h0), vqmovun_s16(h1))
                                 : vreinterpretq_u8_s8(vcombine_s8(vqmovn_s16(h0), vqmovn_s16(h1)));
    auto* out = static_cast<uint8_t*>(c) + row * ldc + col0;
    if (cols == 16) {
      vst1q_u8(out, bytes);
    } else {
      uint8_t tmp[16];
      vst1q_u8(tmp, bytes);
      std::memcpy(out, tmp, static_cast<size_t>(cols));
    }
  }
}

#undef TERN_QGEMM_GROUP
#undef TERN_QGEMM_ROW

}  // namespace tern::qgemm
#endif  // __aarch64__
