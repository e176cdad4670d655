#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// Gather along an axis: y[o, i, j] = x[o, idx[i], j] for elements of `es` words; indices are
// int64 or int32, negative ones count from the end. An index outside the axis writes zeros and
// sets bit 1 of the thread's device error word (vk_context.h), which fails the run.
layout(local_size_x = 256) in;
layout(binding = 0) readonly buffer BX { uint x[]; };
layout(binding = 1) readonly buffer BI { int idx[]; };
layout(binding = 2) writeonly buffer BY { uint y[]; };
layout(binding = 3) buffer BE { uint err[]; };
layout(push_constant) uniform P {
  uint n, inner, count, axis, es, idx64, ox, oi, oy, oe;
} p;

void main() {
  const uint e = linear_id();
  if (e >= p.n) return;
  const uint w = e % p.es;
  const uint i = e / p.es;  // output element
  const uint j = i % p.inner;
  const uint k = (i / p.inner) % p.count;
  const uint o = i / (p.inner * p.count);
  const uint at = p.oi + k * (p.idx64 + 1u);
  int v = idx[at];
  // An int64 index is in range only when its high word is the low word's sign extension.
  const bool wide = p.idx64 != 0u && idx[at + 1u] != (v < 0 ? -1 : 0);
  if (v < 0) v += int(p.axis);
  uint out_v = 0u;
  if (!wide && v >= 0 && v < int(p.axis)) {
    out_v = x[p.ox + ((o * p.axis + uint(v)) * p.inner + j) * p.es + w];
  } else {
    atomicOr(err[p.oe], 1u);
  }
  y[p.oy + e] = out_v;
}
