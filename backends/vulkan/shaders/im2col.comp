#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// The columns of a 2-D convolution (one group): col[n][(c * KH + kh) * KW + kw][oh * OW + ow] is
// the input value that kernel tap meets at that output pixel (0 in the padding).
layout(local_size_x = 256) in;
layout(binding = 0) readonly buffer BX { float x[]; };
layout(binding = 1) writeonly buffer BC { float col[]; };
layout(push_constant) uniform P {
  uint N, C, H, W, OH, OW, KH, KW;
  uint SH, SW, DH, DW, PH, PW, ox, oc;
} p;

void main() {
  const uint i = linear_id();
  const uint pixels = p.OH * p.OW;
  const uint rows = p.C * p.KH * p.KW;
  if (i >= p.N * rows * pixels) return;
  const uint pix = i % pixels;
  const uint r = (i / pixels) % rows;
  const uint n = i / (pixels * rows);
  const uint kw = r % p.KW, kh = (r / p.KW) % p.KH, c = r / (p.KW * p.KH);
  const int ih = int((pix / p.OW) * p.SH + kh * p.DH) - int(p.PH);
  const int iw = int((pix % p.OW) * p.SW + kw * p.DW) - int(p.PW);
  float v = 0.0;
  if (ih >= 0 && ih < int(p.H) && iw >= 0 && iw < int(p.W))
    v = x[p.ox + ((n * p.C + c) * p.H + uint(ih)) * p.W + uint(iw)];
  col[p.oc + i] = v;
}
