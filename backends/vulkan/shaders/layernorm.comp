#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// LayerNormalization over the last n elements of each row: y = (x - mean) / sqrt(var + eps) *
// scale + bias (bias optional), one workgroup per row.
layout(local_size_x = 64) in;
layout(binding = 0) readonly buffer BX { float x[]; };
layout(binding = 1) readonly buffer BS { float scale[]; };
layout(binding = 2) readonly buffer BB { float bias[]; };
layout(binding = 3) writeonly buffer BY { float y[]; };
layout(push_constant) uniform P {
  uint rows, n, has_bias, ox, os, ob, oy;
  float eps;
} p;
shared float part[64];

float group_sum(float v) {
  const uint t = gl_LocalInvocationID.x;
  part[t] = v;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1u) {
    if (t < s) part[t] += part[t + s];
    barrier();
  }
  const float r = part[0];
  barrier();
  return r;
}

void main() {
  const uint row = group_id();
  if (row >= p.rows) return;
  const uint t = gl_LocalInvocationID.x;
  const uint base = row * p.n;
  float s = 0.0;
  for (uint j = t; j < p.n; j += 64u) s += x[p.ox + base + j];
  const float mean = group_sum(s) / float(p.n);
  float q = 0.0;
  for (uint j = t; j < p.n; j += 64u) {
    const float d = x[p.ox + base + j] - mean;
    q += d * d;
  }
  const float rstd = inversesqrt(group_sum(q) / float(p.n) + p.eps);
  for (uint j = t; j < p.n; j += 64u) {
    float v = (x[p.ox + base + j] - mean) * rstd * scale[p.os + j];
    if (p.has_bias != 0u) v += bias[p.ob + j];
    y[p.oy + base + j] = v;
  }
}
