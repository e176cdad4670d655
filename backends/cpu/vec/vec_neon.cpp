// NEON build of the vectorised primitives (aarch64, where Advanced SIMD is always present): the
// same formulas as vec_impl.inc on 4-lane registers with fused multiply-add, and the same 16
// accumulator lanes (totalled in lane order, where the x86 builds take a tree). Tails go through
// the vector code on a padded copy (padding that adds nothing: -inf for max, exp(-inf) = 0).
#include "backends/cpu/vec/vec.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#include <cmath>
#include <cstring>

#include "core/half.h"

namespace tern::vec_neon {
namespace {

inline float32x4_t exp4(float32x4_t x) {
  const uint32x4_t nan = vmvnq_u32(vceqq_f32(x, x));
  float32x4_t xc = vbslq_f32(nan, vdupq_n_f32(0.0f), x);
  xc = vmaxq_f32(vminq_f32(xc, vdupq_n_f32(88.7f)), vdupq_n_f32(-87.3f));
  const float32x4_t fx = vrndnq_f32(vmulq_f32(xc, vdupq_n_f32(1.44269504088896341f)));
  float32x4_t r = vfmsq_f32(xc, fx, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, fx, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
  p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
  p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
  float32x4_t y = vaddq_f32(vfmaq_f32(r, vmulq_f32(p, r), r), vdupq_n_f32(1.0f));
  const int32x4_t bits = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(fx), vdupq_n_s32(127)), 23);
  y = vmulq_f32(y, vreinterpretq_f32_s32(bits));
  y = vbslq_f32(vcltq_f32(x, vdupq_n_f32(-87.3f)), vdupq_n_f32(0.0f), y);
  return vbslq_f32(nan, x, y);
}

// vec_impl.inc's rational approximation on [-4, 4]; NaN stays NaN.
inline float32x4_t erf4(float32x4_t x) {
  const float32x4_t c = vmaxq_f32(vminq_f32(x, vdupq_n_f32(4.0f)), vdupq_n_f32(-4.0f));
  const float32x4_t x2 = vmulq_f32(c, c);
  static const float kP[] = {2.77068142495902e-08f,  -2.10102402082508e-06f,
                             -5.69250639462346e-05f, -7.34990630326855e-04f,
                             -2.95459980854025e-03f, -1.60960333262415e-02f};
  static const float kQ[] = {-2.13374055278905e-04f, -1.68282697438203e-03f, -7.37332916720468e-03f,
                             -1.42647390514189e-02f};
  float32x4_t p = vdupq_n_f32(-2.72614225801306e-10f);
  for (float k : kP) p = vfmaq_f32(vdupq_n_f32(k), p, x2);
  float32x4_t q = vdupq_n_f32(-1.45660718464996e-05f);
  for (float k : kQ) q = vfmaq_f32(vdupq_n_f32(k), q, x2);
  const uint32x4_t nan = vmvnq_u32(vceqq_f32(x, x));
  return vbslq_f32(nan, x, vdivq_f32(vmulq_f32(c, p), q));
}

inline float32x4_t sigmoid4(float32x4_t x) {
  return vdivq_f32(vdupq_n_f32(1.0f), vaddq_f32(vdupq_n_f32(1.0f), exp4(vnegq_f32(x))));
}

// vec_impl.inc's rational approximation on [-7.9, 7.9]; NaN stays NaN.
inline float32x4_t tanh4(float32x4_t x) {
  const float32x4_t c = vmaxq_f32(vminq_f32(x, vdupq_n_f32(7.90531110763549805f)),
                                  vdupq_n_f32(-7.90531110763549805f));
  const float32x4_t x2 = vmulq_f32(c, c);
  static const float kP[] = {2.00018790482477e-13f, -8.60467152213735e-11f, 5.12229709037114e-08f,
                             1.48572235717979e-05f, 6.37261928875436e-04f,  4.89352455891786e-03f};
  static const float kQ[] = {1.18534705686654e-04f, 2.26843463243900e-03f, 4.89352518554385e-03f};
  float32x4_t p = vdupq_n_f32(-2.76076847742355e-16f);
  for (float k : kP) p = vfmaq_f32(vdupq_n_f32(k), p, x2);
  float32x4_t q = vdupq_n_f32(1.19825839466702e-06f);
  for (float k : kQ) q = vfmaq_f32(vdupq_n_f32(k), q, x2);
  const uint32x4_t nan = vmvnq_u32(vceqq_f32(x, x));
  return vbslq_f32(nan, x, vdivq_f32(vmulq_f32(c, p), q));
}

// y[i] = f(x[i]) four at a time; the last 1-3 through a padded copy.
template <typename F>
void map4(const float* x, float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, f(vld1q_f32(x + i)));
  if (i < n) {
    float in[4] = {0, 0, 0, 0}, out[4];
    std::memcpy(in, x + i, static_cast<size_t>(n - i) * sizeof(float));
    vst1q_f32(out, f(vld1q_f32(in)));
    std::memcpy(y + i, out, static_cast<size_t>(n - i) * sizeof(float));
  }
}

void scale(float* y, float a, int64_t n) {
  map4(y, y, n, [a](float32x4_t v) { return vmulq_f32(v, vdupq_n_f32(a)); });
}

float max(const float* x, int64_t n) {
  const float32x4_t ninf = vdupq_n_f32(-__builtin_inff());
  float32x4_t acc[4] = {ninf, ninf, ninf, ninf};
  // x > acc ? x : acc, as the other builds: a NaN never replaces the running maximum.
  auto step = [](float32x4_t a, float32x4_t v) { return vbslq_f32(vcgtq_f32(v, a), v, a); };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int g = 0; g < 4; ++g) acc[g] = step(acc[g], vld1q_f32(x + i + 4 * g));
  }
  if (i < n) {
    float pad[16];
    for (float& v : pad) v = -__builtin_inff();
    std::memcpy(pad, x + i, static_cast<size_t>(n - i) * sizeof(float));
    for (int g = 0; g < 4; ++g) acc[g] = step(acc[g], vld1q_f32(pad + 4 * g));
  }
  float lanes[16];
  for (int g = 0; g < 4; ++g) vst1q_f32(lanes + 4 * g, acc[g]);
  float m = lanes[0];
  for (int j = 1; j < 16; ++j) m = lanes[j] > m ? lanes[j] : m;
  return m;
}

double exp_sum(const float* x, float sub, float* y, int64_t n) {
  float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
  const float32x4_t vsub = vdupq_n_f32(sub);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int g = 0; g < 4; ++g) {
      const float32x4_t e = exp4(vsubq_f32(vld1q_f32(x + i + 4 * g), vsub));
      vst1q_f32(y + i + 4 * g, e);
      acc[g] = vaddq_f32(acc[g], e);
    }
  }
  if (i < n) {
    float pad[16] = {}, out[16];
    std::memcpy(pad, x + i, static_cast<size_t>(n - i) * sizeof(float));
    for (int g = 0; g < 4; ++g)
      vst1q_f32(out + 4 * g, exp4(vsubq_f32(vld1q_f32(pad + 4 * g), vsub)));
    std::memcpy(y + i, out, static_cast<size_t>(n - i) * sizeof(float));
    // The lanes past n add nothing, whatever sub is (-inf padding gave -inf - -inf = NaN).
    std::memset(out + (n - i), 0, static_cast<size_t>(16 - (n - i)) * sizeof(float));
    for (int g = 0; g < 4; ++g) acc[g] = vaddq_f32(acc[g], vld1q_f32(out + 4 * g));
  }
  float lanes[16];
  for (int g = 0; g < 4; ++g) vst1q_f32(lanes + 4 * g, acc[g]);
  double s = 0;
  for (float v : lanes) s += v;
  return s;
}

void erf(const float* x, float* y, int64_t n) {
  map4(x, y, n, erf4);
}

void sigmoid(const float* x, float* y, int64_t n) {
  map4(x, y, n, sigmoid4);
}

void tanh(const float* x, float* y, int64_t n) {
  map4(x, y, n, tanh4);
}

// The row reductions in 16 lanes as 4 registers, like the other builds.
float sum16(const float* x, int64_t n, float mean, bool squares) {
  float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
  const float32x4_t m = vdupq_n_f32(mean);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int j = 0; j < 4; ++j) {
      float32x4_t v = vsubq_f32(vld1q_f32(x + i + 4 * j), m);
      acc[j] = squares ? vfmaq_f32(acc[j], v, v) : vaddq_f32(acc[j], v);
    }
  }
  float lanes[16];
  for (int j = 0; j < 4; ++j) vst1q_f32(lanes + 4 * j, acc[j]);
  for (int j = 0; i < n; ++i, ++j) {
    const float d = x[i] - mean;
    lanes[j] += squares ? d * d : d;
  }
  float s = 0;
  for (float v : lanes) s += v;
  return s;
}

void layer_norm(const float* x, const float* scale, const float* bias, float eps, float* y,
                int64_t n) {
  const float mean = sum16(x, n, 0.0f, false) / static_cast<float>(n);
  const float inv = 1.0f / std::sqrt(sum16(x, n, mean, true) / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) {
    y[i] = (x[i] - mean) * inv * scale[i] + (bias ? bias[i] : 0.0f);
  }
}

inline float32x4_t select_neg(float32x4_t x, float32x4_t neg) {
  return vbslq_f32(vcltq_f32(x, vdupq_n_f32(0.0f)), neg, x);
}

void activation(int act, float alpha, const float* x, float* y, int64_t n) {
  const float32x4_t a = vdupq_n_f32(alpha), half = vdupq_n_f32(0.5f), one = vdupq_n_f32(1.0f);
  switch (act) {
    case 0:
      return map4(x, y, n, [=](float32x4_t v) {
        return vmulq_f32(vmulq_f32(half, v),
                         vaddq_f32(one, erf4(vmulq_f32(v, vdupq_n_f32(0.70710678118654752f)))));
      });
    case 1:
      return map4(x, y, n, [=](float32x4_t v) {
        const float32x4_t cube = vmulq_f32(vmulq_f32(v, v), vmulq_f32(v, vdupq_n_f32(0.044715f)));
        const float32x4_t inner = vmulq_f32(vdupq_n_f32(0.79788456080286536f), vaddq_f32(v, cube));
        return vmulq_f32(vmulq_f32(half, v), vaddq_f32(one, tanh4(inner)));
      });
    case 2:
      return map4(x, y, n, [=](float32x4_t v) { return select_neg(v, vmulq_f32(v, a)); });
    case 3:
      return map4(x, y, n, [=](float32x4_t v) {
        return select_neg(v, vmulq_f32(a, vsubq_f32(exp4(v), one)));
      });
    case 5:
      return map4(x, y, n, [=](float32x4_t v) { return select_neg(v, vdupq_n_f32(0.0f)); });
    case 6:
      return map4(x, y, n, [=](float32x4_t v) {
        return vdivq_f32(v, vaddq_f32(one, exp4(vnegq_f32(vmulq_f32(a, v)))));
      });
    default:
      return map4(x, y, n, tanh4);
  }
}

void moments(const float* x, int64_t n, float eps, float* mean_out, float* inv_out) {
  const float mean = sum16(x, n, 0.0f, false) / static_cast<float>(n);
  *mean_out = mean;
  *inv_out = 1.0f / std::sqrt(sum16(x, n, mean, true) / static_cast<float>(n) + eps);
}

void affine(const float* x, float a, float b, float* y, int64_t n) {
  const float32x4_t va = vdupq_n_f32(a), vb = vdupq_n_f32(b);
  map4(x, y, n, [=](float32x4_t v) { return vfmaq_f32(vb, v, va); });
}

template <int Op>
void binary_op(const float* a, int a_step, const float* b, int b_step, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float u = a[a_step ? i : 0], v = b[b_step ? i : 0];
    y[i] = Op == 0 ? u + v : Op == 1 ? u - v : Op == 2 ? u * v : u / v;
  }
}

void binary(int op, const float* a, int a_step, const float* b, int b_step, float* y, int64_t n) {
  if (op == 0) return binary_op<0>(a, a_step, b, b_step, y, n);
  if (op == 1) return binary_op<1>(a, a_step, b, b_step, y, n);
  if (op == 2) return binary_op<2>(a, a_step, b, b_step, y, n);
  binary_op<3>(a, a_step, b, b_step, y, n);
}

// IEEE half <-> float through the conversions every ARMv8-A CPU has (round to nearest even).
void half_to_float_row(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x + i))));
  for (; i < n; ++i) {
    vst1q_lane_f32(y + i, vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(x[i]))), 0);
  }
}

void float_to_half_row(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
  for (; i < n; ++i) {
    vst1_lane_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vdupq_n_f32(x[i]))), 0);
  }
}

// bfloat16 <-> float: the high half of the float's bits; round to nearest even on the way back, a
// NaN kept quiet (core/half.h's float_to_bfloat16).
void bfloat16_to_float_row(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    vst1q_f32(y + i, vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(x + i), 16)));
  for (; i < n; ++i) y[i] = bfloat16_to_float(x[i]);
}

void float_to_bfloat16_row(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t f = vld1q_f32(x + i);
    const uint32x4_t u = vreinterpretq_u32_f32(f);
    const uint32x4_t lsb = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
    const uint32x4_t rounded = vaddq_u32(vaddq_u32(u, vdupq_n_u32(0x7fff)), lsb);
    const uint32x4_t quiet = vorrq_u32(u, vdupq_n_u32(0x400000));
    const uint32x4_t ordered = vceqq_f32(f, f);  // all ones unless NaN
    vst1_u16(y + i, vshrn_n_u32(vbslq_u32(ordered, rounded, quiet), 16));
  }
  for (; i < n; ++i) y[i] = float_to_bfloat16(x[i]);
}

}  // namespace
}  // namespace tern::vec_neon

namespace tern::vec_detail {
const VecOps kNeonOps = {"neon",
                         vec_neon::scale,
                         vec_neon::max,
                         vec_neon::exp_sum,
                         vec_neon::erf,
                         vec_neon::sigmoid,
                         vec_neon::tanh,
                         vec_neon::layer_norm,
                         vec_neon::activation,
                         vec_neon::moments,
                         vec_neon::affine,
                         vec_neon::binary,
                         vec_neon::half_to_float_row,
                         vec_neon::float_to_half_row,
                         vec_neon::bfloat16_to_float_row,
                         vec_neon::float_to_bfloat16_row};
}  // namespace tern::vec_detail
#endif
