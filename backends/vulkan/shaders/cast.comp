#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// Cast between float32 (kind 0), int32 (1) and int64 (2, two words, little-endian); float to
// integer truncates toward zero.
layout(local_size_x = 256) in;
layout(binding = 0) readonly buffer BX { uint x[]; };
layout(binding = 1) writeonly buffer BY { uint y[]; };
layout(push_constant) uniform P {
  uint n, from, to, ox, oy;
} p;

void main() {
  const uint i = linear_id();
  if (i >= p.n) return;
  float f = 0.0;
  int iv = 0;
  bool is_int = true;
  uint lo = 0u, hi = 0u;
  if (p.from == 0u) {
    f = uintBitsToFloat(x[p.ox + i]);
    is_int = false;
  } else if (p.from == 1u) {
    iv = int(x[p.ox + i]);
    lo = uint(iv);
    hi = iv < 0 ? 0xffffffffu : 0u;
  } else {
    lo = x[p.ox + 2u * i];
    hi = x[p.ox + 2u * i + 1u];
    iv = int(lo);
  }
  if (is_int) {  // exact where the value fits in 32 bits
    const bool small = (hi == 0u && lo < 0x80000000u) || (hi == 0xffffffffu && lo >= 0x80000000u);
    f = small ? float(int(lo)) : float(int(hi)) * 4294967296.0 + float(lo);
  }
  if (p.to == 0u) {
    y[p.oy + i] = floatBitsToUint(f);
  } else if (p.to == 1u) {
    y[p.oy + i] = is_int ? lo : uint(int(trunc(f)));
  } else {
    if (!is_int) {
      const float t = trunc(f);
      if (abs(t) < 2147483648.0) {
        const int s = int(t);
        lo = uint(s);
        hi = s < 0 ? 0xffffffffu : 0u;
      } else {
        const float h = floor(t / 4294967296.0);
        hi = uint(int(h));
        lo = uint(t - h * 4294967296.0);
      }
    }
    y[p.oy + 2u * i] = lo;
    y[p.oy + 2u * i + 1u] = hi;
  }
}
