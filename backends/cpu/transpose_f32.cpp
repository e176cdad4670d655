#include "backends/cpu/transpose_f32.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tern {

#if defined(__x86_64__)
namespace {

// One 8 x 8 block: dst[c * ldd + r] = src[r * lds + c].
__attribute__((target("avx2"))) void block8(const float* src, int64_t lds, float* dst,
                                            int64_t ldd) {
  __m256 r[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
  __m256 t[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    for (int k = 0; k < 2; ++k) {
      const __m256 a = t[4 * i + k], b = t[4 * i + 2 + k];
      r[4 * i + 2 * k] = _mm256_shuffle_ps(a, b, 0x44);
      r[4 * i + 2 * k + 1] = _mm256_shuffle_ps(a, b, 0xEE);
    }
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dst + i * ldd, _mm256_permute2f128_ps(r[i], r[4 + i], 0x20));
    _mm256_storeu_ps(dst + (4 + i) * ldd, _mm256_permute2f128_ps(r[i], r[4 + i], 0x31));
  }
}

}  // namespace
#endif

void transpose_f32(const float* src, int64_t lds, int64_t rows, int64_t cols, float* dst,
                   int64_t ldd) {
  int64_t r8 = 0, c8 = 0;
#if defined(__x86_64__)
  r8 = rows / 8 * 8;
  c8 = cols / 8 * 8;
  for (int64_t r = 0; r < r8; r += 8) {
    for (int64_t c = 0; c < c8; c += 8) block8(src + r * lds + c, lds, dst + c * ldd + r, ldd);
  }
#endif
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = r < r8 ? c8 : 0; c < cols; ++c) dst[c * ldd + r] = src[r * lds + c];
  }
}

}  // namespace tern
