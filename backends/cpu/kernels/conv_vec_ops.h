// The vector operations the convolution tiles are written in (conv_stem, conv_depthwise): one
// struct per x86 ISA level, each function compiled for that level and inlined into tiles compiled
// under the same target. A kernel's V derives from one and adds its tile sizes.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

#define TERN_VEC512 [[gnu::always_inline]] __attribute__((target("avx512f,avx2,fma"))) static inline
#define TERN_VEC256 [[gnu::always_inline]] __attribute__((target("avx2,fma"))) static inline

namespace tern::conv_vec {

struct Avx512 {
  using T = __m512;
  static constexpr int L = 16;
  TERN_VEC512 T load(const float* p) { return _mm512_loadu_ps(p); }
  TERN_VEC512 T bcast(const float* p) { return _mm512_set1_ps(*p); }
  TERN_VEC512 T fma(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
  TERN_VEC512 T set1(float f) { return _mm512_set1_ps(f); }
  TERN_VEC512 T mul(T a, T b) { return _mm512_mul_ps(a, b); }
  TERN_VEC512 T add(T a, T b) { return _mm512_add_ps(a, b); }
  // a > b ? a : b and a < b ? a : b (MAXPS, MINPS), through the all-lanes masked forms: GCC 12
  // warns inside _mm512_max_ps and _mm512_min_ps.
  TERN_VEC512 T max(T a, T b) { return _mm512_mask_max_ps(a, 0xFFFF, a, b); }
  TERN_VEC512 T min(T a, T b) { return _mm512_mask_min_ps(a, 0xFFFF, a, b); }
  TERN_VEC512 T leaky(T v, float alpha) {
    const __mmask16 neg = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ);
    return _mm512_mask_mul_ps(v, neg, v, _mm512_set1_ps(alpha));
  }
  TERN_VEC512 void store(float* p, T v) { _mm512_storeu_ps(p, v); }
  // The first n lanes.
  TERN_VEC512 void store_n(float* p, T v, int n) {
    _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1), v);
  }
};

struct Avx2 {
  using T = __m256;
  static constexpr int L = 8;
  TERN_VEC256 T load(const float* p) { return _mm256_loadu_ps(p); }
  TERN_VEC256 T bcast(const float* p) { return _mm256_broadcast_ss(p); }
  TERN_VEC256 T fma(T a, T b, T c) { return _mm256_fmadd_ps(a, b, c); }
  TERN_VEC256 T set1(float f) { return _mm256_set1_ps(f); }
  TERN_VEC256 T mul(T a, T b) { return _mm256_mul_ps(a, b); }
  TERN_VEC256 T add(T a, T b) { return _mm256_add_ps(a, b); }
  TERN_VEC256 T max(T a, T b) { return _mm256_max_ps(a, b); }
  TERN_VEC256 T min(T a, T b) { return _mm256_min_ps(a, b); }
  TERN_VEC256 T leaky(T v, float alpha) {
    const T neg = _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ);
    return _mm256_blendv_ps(v, _mm256_mul_ps(v, _mm256_set1_ps(alpha)), neg);
  }
  TERN_VEC256 void store(float* p, T v) { _mm256_storeu_ps(p, v); }
  // The first n lanes.
  TERN_VEC256 void store_n(float* p, T v, int n) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_maskstore_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane), v);
  }
};

}  // namespace tern::conv_vec

#undef TERN_VEC512
#undef TERN_VEC256

#endif
