#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "act.glsl"
// y = chain(x) four elements per invocation (n, ox and oy are multiples of 4; counted in vec4s).
layout(local_size_x = 256) in;
layout(binding = 0) readonly buffer BX { vec4 x[]; };
layout(binding = 1) writeonly buffer BY { vec4 y[]; };
layout(push_constant) uniform P {
  uint n, ox, oy, acts;
  float ap[6];
} p;
DEFINE_APPLY_ACTS

void main() {
  const uint i = linear_id();
  if (i >= p.n) return;
  const vec4 v = x[p.ox + i];
  y[p.oy + i] = vec4(apply_acts(v.x), apply_acts(v.y), apply_acts(v.z), apply_acts(v.w));
}
