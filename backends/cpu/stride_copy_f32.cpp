#include "backends/cpu/stride_copy_f32.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tern {

#if defined(__x86_64__)
__attribute__((target("avx2"))) void copy_stride2_f32(const float* src, int64_t avail, int64_t n,
                                                      float* dst) {
  int64_t j = 0;
  for (; j + 8 <= n && 2 * j + 16 <= avail; j += 8) {
    const __m256 a = _mm256_loadu_ps(src + 2 * j), b = _mm256_loadu_ps(src + 2 * j + 8);
    // a0 a2 b0 b2 | a4 a6 b4 b6, then its 64-bit pairs in the order 0 2 1 3.
    const __m256 evens = _mm256_shuffle_ps(a, b, 0x88);
    _mm256_storeu_ps(dst + j,
                     _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(evens), 0xD8)));
  }
  for (; j < n; ++j) dst[j] = src[2 * j];
}
#else
void copy_stride2_f32(const float* src, int64_t, int64_t n, float* dst) {
  for (int64_t j = 0; j < n; ++j) dst[j] = src[2 * j];
}
#endif

}  // namespace tern
