#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// 2-D ConvTranspose (groups, strides, dilations, pads), one output element per invocation:
// y[n, m, oh, ow] = bias[m] + sum over the input pixels and taps that land on (oh, ow).
// Weights are [C, M / group, KH, KW].
layout(local_size_x = 64) in;
layout(binding = 0) readonly buffer BX { float x[]; };
layout(binding = 1) readonly buffer BW { float w[]; };
layout(binding = 2) readonly buffer BB { float bias[]; };
layout(binding = 3) writeonly buffer BY { float y[]; };
layout(push_constant) uniform P {
  uint N, C, H, W, M, OH, OW, Cg;
  uint Mg, KH, KW, SH, SW, DH, DW, PH;
  uint PW, ox, ow, ob, oy, has_bias;
} p;

void main() {
  const uint i = linear_id();
  const uint pixels = p.OH * p.OW;
  if (i >= p.N * p.M * pixels) return;
  const uint pix = i % pixels;
  const uint m = (i / pixels) % p.M;
  const uint n = i / (pixels * p.M);
  const int oh = int(pix / p.OW), ow_ = int(pix % p.OW);
  const uint g = m / p.Mg, mg = m % p.Mg;
  float acc = p.has_bias != 0u ? bias[p.ob + m] : 0.0;
  for (uint kh = 0u; kh < p.KH; ++kh) {
    const int th = oh + int(p.PH) - int(kh * p.DH);
    if (th < 0 || th % int(p.SH) != 0) continue;
    const int ih = th / int(p.SH);
    if (ih >= int(p.H)) continue;
    for (uint kw = 0u; kw < p.KW; ++kw) {
      const int tw = ow_ + int(p.PW) - int(kw * p.DW);
      if (tw < 0 || tw % int(p.SW) != 0) continue;
      const int iw = tw / int(p.SW);
      if (iw >= int(p.W)) continue;
      for (uint c = 0u; c < p.Cg; ++c) {
        const uint ci = g * p.Cg + c;
        acc += x[p.ox + ((n * p.C + ci) * p.H + uint(ih)) * p.W + uint(iw)] *
               w[p.ow + ((ci * p.Mg + mg) * p.KH + kh) * p.KW + kw];
      }
    }
  }
  y[p.oy + i] = acc;
}
