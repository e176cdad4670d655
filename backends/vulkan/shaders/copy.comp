#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// Strided copy of n elements of `es` words (U16: 16-bit elements): output element i, decomposed
// over `shape`, reads in[oi + sum(c * si)] and writes out[oo + sum(c * so)]. Transpose, Slice,
// Expand and each input of Concat are such copies.
#if defined(U16)
#extension GL_EXT_shader_16bit_storage : require
#define W uint16_t
#else
#define W uint
#endif
layout(local_size_x = 256) in;
layout(binding = 0) readonly buffer BI { W src[]; };
layout(binding = 1) writeonly buffer BO { W dst[]; };
layout(push_constant) uniform P {
  uint n, rank, es, oi, oo;
  uint shape[6], si[6], so[6];
} p;

void main() {
  const uint i = linear_id();
  if (i >= p.n) return;
  uint r = i, a = 0u, b = 0u;
  for (int d = int(p.rank) - 1; d >= 0; --d) {
    const uint c = r % p.shape[d];
    r /= p.shape[d];
    a += c * p.si[d];
    b += c * p.so[d];
  }
  for (uint w = 0u; w < p.es; ++w) dst[p.oo + b * p.es + w] = src[p.oi + a * p.es + w];
}
