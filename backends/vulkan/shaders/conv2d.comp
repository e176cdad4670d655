#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "act.glsl"
// Direct 2-D convolution (groups, strides, dilations, pads) with the FusedConv epilogue:
// y = chain(conv(x, w) + bias + z). Each invocation computes one output pixel for four
// consecutive output channels, reading each input value once when they share a group.
layout(local_size_x = 64) in;
layout(binding = 0) readonly buffer BX { float x[]; };
layout(binding = 1) readonly buffer BW { float w[]; };
layout(binding = 2) readonly buffer BB { float bias[]; };
layout(binding = 3) readonly buffer BZ { float z[]; };
layout(binding = 4) writeonly buffer BY { float y[]; };
layout(push_constant) uniform P {
  uint N, C, H, W, M, OH, OW, Cg;
  uint KH, KW, SH, SW, DH, DW, PH, PW;
  uint Mg, ox, ow, ob, oz, oy, flags, acts;
  float ap[6];
} p;
DEFINE_APPLY_ACTS

void main() {
  const uint i = linear_id();
  const uint mq = (p.M + 3u) / 4u;
  const uint pixels = p.OH * p.OW;
  if (i >= p.N * mq * pixels) return;
  const uint pix = i % pixels;
  const uint m0 = ((i / pixels) % mq) * 4u;
  const uint n = i / (pixels * mq);
  const uint oh = pix / p.OW, ow_ = pix % p.OW;
  const int ih0 = int(oh * p.SH) - int(p.PH), iw0 = int(ow_ * p.SW) - int(p.PW);
  const uint kk = p.KH * p.KW;
  float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);
  const uint mlast = min(m0 + 3u, p.M - 1u);
  if (m0 / p.Mg == mlast / p.Mg) {  // one group: share the input loads
    const uint c0 = (m0 / p.Mg) * p.Cg;
    for (uint c = 0u; c < p.Cg; ++c) {
      const uint xbase = p.ox + (n * p.C + c0 + c) * p.H * p.W;
      const uint wbase = p.ow + (m0 * p.Cg + c) * kk;
      for (uint kh = 0u; kh < p.KH; ++kh) {
        const int ih = ih0 + int(kh * p.DH);
        if (ih < 0 || ih >= int(p.H)) continue;
        for (uint kw = 0u; kw < p.KW; ++kw) {
          const int iw = iw0 + int(kw * p.DW);
          if (iw < 0 || iw >= int(p.W)) continue;
          const float v = x[xbase + uint(ih) * p.W + uint(iw)];
          const uint wk = wbase + kh * p.KW + kw;
          for (uint j = 0u; j < 4u; ++j) {
            if (m0 + j <= mlast) acc[j] += v * w[wk + j * p.Cg * kk];
          }
        }
      }
    }
  } else {
    for (uint j = 0u; j < 4u; ++j) {
      const uint m = m0 + j;
      if (m > mlast) break;
      const uint c0 = (m / p.Mg) * p.Cg;
      for (uint c = 0u; c < p.Cg; ++c) {
        const uint xbase = p.ox + (n * p.C + c0 + c) * p.H * p.W;
        const uint wbase = p.ow + (m * p.Cg + c) * kk;
        for (uint kh = 0u; kh < p.KH; ++kh) {
          const int ih = ih0 + int(kh * p.DH);
          if (ih < 0 || ih >= int(p.H)) continue;
          for (uint kw = 0u; kw < p.KW; ++kw) {
            const int iw = iw0 + int(kw * p.DW);
            if (iw < 0 || iw >= int(p.W)) continue;
            acc[j] += x[xbase + uint(ih) * p.W + uint(iw)] * w[wbase + kh * p.KW + kw];
          }
        }
      }
    }
  }
  for (uint j = 0u; j < 4u; ++j) {
    const uint m = m0 + j;
    if (m > mlast) break;
    const uint o = (n * p.M + m) * pixels + pix;
    float v = acc[j];
    if ((p.flags & 1u) != 0u) v += bias[p.ob + m];
    if ((p.flags & 2u) != 0u) v += z[p.oz + o];
    y[p.oy + o] = apply_acts(v);
  }
}
