#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// Resize of planes [H, W] -> [OH, OW] with per-axis taps computed on the host (the CPU op's
// coordinate rules): taps[3 * oh + 0..2] = i0, i1, weight of i1 for rows, then the same for
// columns from `tw`; nearest modes have i0 == i1.
layout(local_size_x = 256) in;
layout(binding = 0) readonly buffer BX { float x[]; };
layout(binding = 1) readonly buffer BT { uint taps[]; };
layout(binding = 2) writeonly buffer BY { float y[]; };
layout(push_constant) uniform P {
  uint planes, H, W, OH, OW, ox, ot, oy, tw;
} p;

void main() {
  const uint i = linear_id();
  const uint pixels = p.OH * p.OW;
  if (i >= p.planes * pixels) return;
  const uint plane = i / pixels, oh = (i % pixels) / p.OW, ow = i % p.OW;
  const uint h0 = taps[p.ot + 3u * oh], h1 = taps[p.ot + 3u * oh + 1u];
  const float wh = uintBitsToFloat(taps[p.ot + 3u * oh + 2u]);
  const uint w0 = taps[p.ot + p.tw + 3u * ow], w1 = taps[p.ot + p.tw + 3u * ow + 1u];
  const float ww = uintBitsToFloat(taps[p.ot + p.tw + 3u * ow + 2u]);
  const uint base = p.ox + plane * p.H * p.W;
  const float top = x[base + h0 * p.W + w0] * (1.0 - ww) + x[base + h0 * p.W + w1] * ww;
  const float bot = x[base + h1 * p.W + w0] * (1.0 - ww) + x[base + h1 * p.W + w1] * ww;
  y[p.oy + i] = wh == 0.0 ? top : top * (1.0 - wh) + bot * wh;
}
