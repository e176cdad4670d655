#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// y = a (op) b with numpy broadcasting (rank 0: same shapes, no index math).
layout(local_size_x = 256) in;
layout(binding = 0) readonly buffer BA { T a[]; };
layout(binding = 1) readonly buffer BB { T b[]; };
layout(binding = 2) writeonly buffer BY { T y[]; };
layout(push_constant) uniform P {
  uint n, rank, op, oa, ob, oy;
  uint shape[6], sa[6], sb[6];
} p;

float pow_onnx(float x, float e) {
  if (e == 0.0) return 1.0;
  if (x >= 0.0) return pow(x, e);
  if (e != floor(e)) return uintBitsToFloat(0x7fc00000u);  // NaN
  const float r = pow(-x, e);
  return mod(e, 2.0) == 1.0 ? -r : r;
}

A binop(uint op, A x, A z) {
  switch (op) {
    case 0u: return x + z;
    case 1u: return x - z;
    case 2u: return x * z;
    case 3u: return x / z;
    case 4u: return A(pow_onnx(float(x), float(z)));
    case 5u: return (isnan(x) || isnan(z)) ? x + z : max(x, z);
    case 6u: return (isnan(x) || isnan(z)) ? x + z : min(x, z);
    default: return x >= A(0) ? x : x * z;  // PRelu
  }
}

void main() {
  const uint i = linear_id();
  if (i >= p.n) return;
  uint ia = i, ib = i;
  if (p.rank > 0u) {
    uint r = i;
    ia = 0u;
    ib = 0u;
    for (int d = int(p.rank) - 1; d >= 0; --d) {
      const uint c = r % p.shape[d];
      r /= p.shape[d];
      ia += c * p.sa[d];
      ib += c * p.sb[d];
    }
  }
  y[p.oy + i] = T(binop(p.op, A(a[p.oa + ia]), A(b[p.ob + ib])));
}
