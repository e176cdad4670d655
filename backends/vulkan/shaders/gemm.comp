#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "act.glsl"
// Batched GEMM, 64x64 output tiles through shared memory, 4x4 outputs per invocation:
// y[b][m][n] = chain(alpha * sum_k A(b,m,k) B(b,k,n) + beta * C(b,m,n) + Z[b][m][n])
// with A, B and C addressed by strides (transposes, broadcast bias rows or columns) and y, z
// row-major [M][N] per batch (batch = workgroup z).
layout(local_size_x = 16, local_size_y = 16) in;
layout(binding = 0) readonly buffer BA { T a[]; };
layout(binding = 1) readonly buffer BB { T b[]; };
layout(binding = 2) readonly buffer BC { T c[]; };
layout(binding = 3) readonly buffer BZ { T z[]; };
layout(binding = 4) writeonly buffer BY { T y[]; };
layout(push_constant) uniform P {
  uint M, N, K, oa, ob, oc, oz, oy;
  uint sab, sam, sak, sbb, sbk, sbn, scb, scm;
  uint scn, syb, szb, flags;
  float alpha, beta;
  uint acts;
  float ap[6];
} p;
DEFINE_APPLY_ACTS

const uint BM = 64u, BN = 64u, BK = 16u;
shared A sa[BK][BM + 1u];
shared A sb[BK][BN + 1u];

void main() {
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  const uint tid = ty * 16u + tx;
  const uint batch = gl_WorkGroupID.z;
  const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
  const uint abase = p.oa + batch * p.sab, bbase = p.ob + batch * p.sbb;
  A acc[4][4];
  for (uint i = 0u; i < 4u; ++i)
    for (uint j = 0u; j < 4u; ++j) acc[i][j] = A(0);
  for (uint k0 = 0u; k0 < p.K; k0 += BK) {
    for (uint l = 0u; l < 4u; ++l) {  // 1024 elements of each tile, 4 per invocation
      const uint e = tid + l * 256u;
      const uint am = e / BK, ak = e % BK;  // A tile: BM x BK
      const uint gm = m0 + am, gk = k0 + ak;
      sa[ak][am] = (gm < p.M && gk < p.K) ? A(a[abase + gm * p.sam + gk * p.sak]) : A(0);
      const uint bk = e / BN, bn = e % BN;  // B tile: BK x BN
      const uint hk = k0 + bk, hn = n0 + bn;
      sb[bk][bn] = (hk < p.K && hn < p.N) ? A(b[bbase + hk * p.sbk + hn * p.sbn]) : A(0);
    }
    barrier();
    for (uint k = 0u; k < BK; ++k) {
      A av[4], bv[4];
      for (uint i = 0u; i < 4u; ++i) av[i] = sa[k][ty + 16u * i];
      for (uint j = 0u; j < 4u; ++j) bv[j] = sb[k][tx + 16u * j];
      for (uint i = 0u; i < 4u; ++i)
        for (uint j = 0u; j < 4u; ++j) acc[i][j] += av[i] * bv[j];
    }
    barrier();
  }
  for (uint i = 0u; i < 4u; ++i) {
    const uint m = m0 + ty + 16u * i;
    if (m >= p.M) continue;
    for (uint j = 0u; j < 4u; ++j) {
      const uint n = n0 + tx + 16u * j;
      if (n >= p.N) continue;
      float v = p.alpha * float(acc[i][j]);
      if ((p.flags & 1u) != 0u) v += p.beta * float(c[p.oc + batch * p.scb + m * p.scm + n * p.scn]);
      const uint o = m * p.N + n;
      if ((p.flags & 2u) != 0u) v += float(z[p.oz + batch * p.szb + o]);
      y[p.oy + batch * p.syb + o] = T(apply_acts(v));
    }
  }
}
