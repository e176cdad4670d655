#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// Inference BatchNormalization: y = (x - mean[c]) / sqrt(var[c] + eps) * scale[c] + bias[c] for
// x viewed as [N, C, inner]; FusedBatchNormalization's Relu after it when relu is set (NaN kept).
layout(local_size_x = 256) in;
layout(binding = 0) readonly buffer BX { float x[]; };
layout(binding = 1) readonly buffer BS { float scale[]; };
layout(binding = 2) readonly buffer BB { float bias[]; };
layout(binding = 3) readonly buffer BM { float mean[]; };
layout(binding = 4) readonly buffer BV { float var_[]; };
layout(binding = 5) writeonly buffer BY { float y[]; };
layout(push_constant) uniform P {
  uint n, C, inner, ox, os, ob, om, ov, oy;
  float eps;
  uint relu;
} p;

void main() {
  const uint i = linear_id();
  if (i >= p.n) return;
  const uint c = (i / p.inner) % p.C;
  const float s = scale[p.os + c] * inversesqrt(var_[p.ov + c] + p.eps);
  const float v = (x[p.ox + i] - mean[p.om + c]) * s + bias[p.ob + c];
  y[p.oy + i] = p.relu != 0u && v < 0.0 ? 0.0 : v;
}
