#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// Softmax (log = 0) or LogSoftmax (log = 1) of x viewed as [outer, n, inner] over n, one
// workgroup per row.
layout(local_size_x = 64) in;
layout(binding = 0) readonly buffer BX { T x[]; };
layout(binding = 1) writeonly buffer BY { T y[]; };
layout(push_constant) uniform P {
  uint outer, n, inner, log_, ox, oy;
} p;
shared float part[64];

float group_sum(float v, bool is_max) {
  const uint t = gl_LocalInvocationID.x;
  part[t] = v;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1u) {
    if (t < s) part[t] = is_max ? max(part[t], part[t + s]) : part[t] + part[t + s];
    barrier();
  }
  const float r = part[0];
  barrier();
  return r;
}

void main() {
  const uint row = group_id();
  if (row >= p.outer * p.inner) return;
  const uint t = gl_LocalInvocationID.x;
  const uint base = (row / p.inner) * p.n * p.inner + row % p.inner;
  float mx = uintBitsToFloat(0xff800000u);
  for (uint j = t; j < p.n; j += 64u) mx = max(mx, float(x[p.ox + base + j * p.inner]));
  mx = group_sum(mx, true);
  float s = 0.0;
  for (uint j = t; j < p.n; j += 64u) s += exp(float(x[p.ox + base + j * p.inner]) - mx);
  s = group_sum(s, false);
  const float ls = log(s);
  for (uint j = t; j < p.n; j += 64u) {
    const float v = float(x[p.ox + base + j * p.inner]) - mx;
    y[p.oy + base + j * p.inner] = T(p.log_ != 0u ? v - ls : exp(v) / s);
  }
}
