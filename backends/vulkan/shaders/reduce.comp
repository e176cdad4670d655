#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// Reduction of x viewed as [outer, r, inner] over r, one workgroup per output: sum (0), mean (1),
// max (2), min (3), prod (4), sum of squares (5), L1 (6), L2 (7), log-sum (8), log-sum-exp (9).
layout(local_size_x = 64) in;
layout(binding = 0) readonly buffer BX { float x[]; };
layout(binding = 1) writeonly buffer BY { float y[]; };
layout(push_constant) uniform P {
  uint outer, r, inner, op, ox, oy;
} p;
shared float part[64];

float combine(float a, float b) {
  if (p.op == 2u) return (isnan(a) || isnan(b)) ? a + b : max(a, b);
  if (p.op == 3u) return (isnan(a) || isnan(b)) ? a + b : min(a, b);
  if (p.op == 4u) return a * b;
  return a + b;
}

float init() {
  if (p.op == 2u || p.op == 9u) return uintBitsToFloat(0xff800000u);
  if (p.op == 3u) return uintBitsToFloat(0x7f800000u);
  if (p.op == 4u) return 1.0;
  return 0.0;
}

// The workgroup's combination of one value per invocation (`op` as in combine()).
float reduce_group(float v, uint op_now) {
  const uint t = gl_LocalInvocationID.x;
  part[t] = v;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1u) {
    if (t < s) {
      const float a = part[t], b = part[t + s];
      part[t] = op_now == 2u ? ((isnan(a) || isnan(b)) ? a + b : max(a, b))
                             : (op_now == 3u ? ((isnan(a) || isnan(b)) ? a + b : min(a, b))
                                             : (op_now == 4u ? a * b : a + b));
    }
    barrier();
  }
  const float out_v = part[0];
  barrier();
  return out_v;
}

void main() {
  const uint o = group_id();
  if (o >= p.outer * p.inner) return;
  const uint base = p.ox + (o / p.inner) * p.r * p.inner + o % p.inner;
  const uint t = gl_LocalInvocationID.x;
  float m = 0.0;
  if (p.op == 9u) {  // log-sum-exp: the maximum first
    float mx = init();
    for (uint j = t; j < p.r; j += 64u) mx = max(mx, x[base + j * p.inner]);
    m = reduce_group(mx, 2u);
    if (isinf(m)) m = 0.0;
  }
  float acc = p.op == 9u ? 0.0 : init();
  for (uint j = t; j < p.r; j += 64u) {
    float v = x[base + j * p.inner];
    if (p.op == 5u || p.op == 7u) v = v * v;
    else if (p.op == 6u) v = abs(v);
    else if (p.op == 9u) v = exp(v - m);
    acc = p.op == 9u ? acc + v : combine(acc, v);
  }
  const uint op_now = (p.op == 2u || p.op == 3u || p.op == 4u) ? p.op : 0u;
  float total = reduce_group(acc, op_now);
  if (t != 0u) return;
  if (p.op == 1u) total /= float(p.r);
  else if (p.op == 7u) total = sqrt(total);
  else if (p.op == 8u) total = log(total);
  else if (p.op == 9u) total = log(total) + m;
  y[p.oy + o] = total;
}
