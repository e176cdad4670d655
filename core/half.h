// IEEE half and bfloat16 conversions (portable; no F16C needed).
#pragma once

#include <cstdint>
#include <cstring>

namespace tern {

inline float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0) {
    if (man == 0) return bits_to_float(sign);
    float f = static_cast<float>(man) * (1.0f / 16777216.0f);  // subnormal: man * 2^-24
    return sign ? -f : f;
  }
  if (exp == 31) return bits_to_float(sign | 0x7f800000u | (man << 13));
  return bits_to_float(sign | ((exp + 112) << 23) | (man << 13));
}

// Round to nearest even.
inline uint16_t float_to_half(float f) {
  uint32_t u = float_to_bits(f), sign = (u >> 16) & 0x8000;
  uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u) return uint16_t(sign | 0x7c00 | (abs > 0x7f800000u ? 0x200 : 0));
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00);  // overflow to inf
  if (abs < 0x38800000u) {                                 // subnormal or zero
    float v = bits_to_float(abs) * 16777216.0f;            // scale so the result is an integer
    uint32_t m = static_cast<uint32_t>(v);
    float rem = v - static_cast<float>(m);
    if (rem > 0.5f || (rem == 0.5f && (m & 1))) ++m;
    return uint16_t(sign | m);
  }
  uint32_t r = abs + 0xfff + ((abs >> 13) & 1) - (112u << 23);
  return uint16_t(sign | (r >> 13));
}

inline float bfloat16_to_float(uint16_t b) {
  return bits_to_float(uint32_t(b) << 16);
}
inline uint16_t float_to_bfloat16(float f) {
  uint32_t u = float_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  return uint16_t((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

}  // namespace tern
