#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "act.glsl"
// y = chain(x), element-wise.
layout(local_size_x = 256) in;
layout(binding = 0) readonly buffer BX { T x[]; };
layout(binding = 1) writeonly buffer BY { T y[]; };
layout(push_constant) uniform P {
  uint n, ox, oy, acts;
  float ap[6];
} p;
DEFINE_APPLY_ACTS

void main() {
  const uint i = linear_id();
  if (i >= p.n) return;
  y[p.oy + i] = T(apply_acts(float(x[p.ox + i])));
}
