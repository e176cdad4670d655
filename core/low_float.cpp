#include "core/low_float.h"

#include <cmath>
#include <limits>

namespace tern {

namespace {

struct Format {
  int ebits, mbits, bias;
  bool has_inf;    // E5M2: IEEE-style infinities
  bool uz;         // FNUZ: no negative zero, 0x80 is the one NaN
  bool fn;         // E4M3FN: only S.1111.111 is NaN, no infinities
  int total_bits;  // 8, or 4 for float4e2m1
};

Format format_of(DType t) {
  switch (t) {
    case DType::kFloat8E4M3FN:
      return {4, 3, 7, false, false, true, 8};
    case DType::kFloat8E4M3FNUZ:
      return {4, 3, 8, false, true, false, 8};
    case DType::kFloat8E5M2:
      return {5, 2, 15, true, false, false, 8};
    case DType::kFloat8E5M2FNUZ:
      return {5, 2, 16, false, true, false, 8};
    case DType::kFloat4E2M1:
      return {2, 1, 1, false, false, false, 4};
    default:
      return {0, 0, 0, false, false, false, 0};
  }
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

}  // namespace

float low_float_max(DType t) {
  switch (t) {
    case DType::kFloat8E4M3FN:
      return 448.0f;
    case DType::kFloat8E4M3FNUZ:
      return 240.0f;
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
      return 57344.0f;
    case DType::kFloat4E2M1:
      return 6.0f;
    case DType::kFloat8E8M0:
      return std::ldexp(1.0f, 127);
    default:
      return 0;
  }
}

float low_float_to_float(DType t, uint8_t code) {
  if (t == DType::kFloat8E8M0) return code == 0xff ? kNaN : std::ldexp(1.0f, int(code) - 127);
  const Format f = format_of(t);
  const int sign_bit = f.total_bits - 1;
  const bool neg = (code >> sign_bit) & 1;
  const int e = (code >> f.mbits) & ((1 << f.ebits) - 1);
  const int m = code & ((1 << f.mbits) - 1);
  if (f.uz && code == 0x80) return kNaN;
  if (f.fn && e == (1 << f.ebits) - 1 && m == (1 << f.mbits) - 1) return kNaN;
  if (f.has_inf && e == (1 << f.ebits) - 1) {
    if (m != 0) return kNaN;
    return neg ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  }
  float v = e == 0 ? std::ldexp(float(m), 1 - f.bias - f.mbits)
                   : std::ldexp(float(m + (1 << f.mbits)), e - f.bias - f.mbits);
  return neg ? -v : v;
}

uint8_t float_to_low_float(DType t, float x, bool saturate) {
  if (t == DType::kFloat8E8M0) {  // a power of two, rounded up (ONNX's default round_mode)
    if (std::isnan(x) || x <= 0) return std::isnan(x) ? 0xff : 0;
    if (std::isinf(x)) return saturate ? 0xfe : 0xff;
    int e = std::ilogb(x);
    if (std::ldexp(1.0f, e) < x) ++e;
    if (e < -127) return 0;
    if (e > 127) return saturate ? 0xfe : 0xff;
    return static_cast<uint8_t>(e + 127);
  }
  const Format f = format_of(t);
  const int sign_bit = f.total_bits - 1;
  const bool neg = std::signbit(x);
  const uint8_t sign = static_cast<uint8_t>(neg ? 1 << sign_bit : 0);
  const uint8_t zero = f.uz ? 0 : sign;  // FNUZ has no negative zero
  const uint8_t nan_code = f.uz ? 0x80 : static_cast<uint8_t>((1 << sign_bit) - 1) | sign;
  int max_bits = (1 << sign_bit) - 1;                        // FNUZ, float4: all ones
  if (f.fn) max_bits = (1 << sign_bit) - 2;                  // S.1111.111 is NaN
  if (f.has_inf) max_bits = (((1 << f.ebits) - 1) << f.mbits) - 1;  // below the infinity
  const uint8_t max_code = static_cast<uint8_t>(max_bits);
  const uint8_t inf_code = static_cast<uint8_t>(((1 << f.ebits) - 1) << f.mbits);
  const uint8_t overflow = saturate ? static_cast<uint8_t>(max_code | (neg ? 1 << sign_bit : 0))
                           : f.has_inf ? static_cast<uint8_t>(inf_code | sign)
                                       : nan_code;
  if (std::isnan(x)) {
    if (t == DType::kFloat4E2M1) return sign;  // float4 has no NaN: ±0, as ml_dtypes does
    return nan_code;
  }
  if (std::isinf(x)) {
    return t == DType::kFloat4E2M1 ? static_cast<uint8_t>(0x7 | (neg ? 8 : 0)) : overflow;
  }
  double a = std::fabs(static_cast<double>(x));
  if (a == 0) return zero;
  const int emin = 1 - f.bias;
  int e = std::ilogb(a);
  if (e < emin) e = emin;
  const double q = std::ldexp(1.0, e - f.mbits);
  const double r = std::nearbyint(a / q);  // default rounding mode: to nearest, ties to even
  const double v = r * q;
  if (v > low_float_max(t)) {
    if (t == DType::kFloat4E2M1) return static_cast<uint8_t>(0x7 | (neg ? 8 : 0));
    return overflow;
  }
  if (v == 0) return zero;
  uint8_t code;
  if (v < std::ldexp(1.0, emin)) {
    code = static_cast<uint8_t>(v / std::ldexp(1.0, emin - f.mbits));
  } else {
    const int ev = std::ilogb(v);
    const int mant = static_cast<int>(v / std::ldexp(1.0, ev - f.mbits)) - (1 << f.mbits);
    code = static_cast<uint8_t>(((ev + f.bias) << f.mbits) | mant);
  }
  return static_cast<uint8_t>(code | sign);
}

}  // namespace tern
