#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// 2-D MaxPool (mode 0) and AveragePool (mode 1: padding excluded from the divisor, mode 2:
// included, up to the explicit end pads) over planes of H x W.
layout(local_size_x = 256) in;
layout(binding = 0) readonly buffer BX { float x[]; };
layout(binding = 1) writeonly buffer BY { float y[]; };
layout(push_constant) uniform P {
  uint planes, H, W, OH, OW, KH, KW, SH;
  uint SW, PH, PW, DH, DW, PHE, PWE, mode;
  uint ox, oy;
} p;

void main() {
  const uint i = linear_id();
  const uint pixels = p.OH * p.OW;
  if (i >= p.planes * pixels) return;
  const uint plane = i / pixels, pix = i % pixels;
  const int ih0 = int((pix / p.OW) * p.SH) - int(p.PH);
  const int iw0 = int((pix % p.OW) * p.SW) - int(p.PW);
  const uint base = p.ox + plane * p.H * p.W;
  float acc = p.mode == 0u ? uintBitsToFloat(0xff800000u) : 0.0;  // -inf
  uint count = 0u, padded = 0u;
  for (uint kh = 0u; kh < p.KH; ++kh) {
    const int ih = ih0 + int(kh * p.DH);
    for (uint kw = 0u; kw < p.KW; ++kw) {
      const int iw = iw0 + int(kw * p.DW);
      if (ih < int(p.H + p.PHE) && iw < int(p.W + p.PWE)) ++padded;
      if (ih < 0 || ih >= int(p.H) || iw < 0 || iw >= int(p.W)) continue;
      const float v = x[base + uint(ih) * p.W + uint(iw)];
      if (p.mode == 0u) {
        if (isnan(v) || v > acc) acc = v;
      } else {
        acc += v;
      }
      ++count;
    }
  }
  if (p.mode != 0u) {
    const uint div = p.mode == 2u ? padded : count;
    acc = div > 0u ? acc / float(div) : 0.0;
  }
  y[p.oy + i] = acc;
}
