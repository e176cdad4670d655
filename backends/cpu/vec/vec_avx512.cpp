// avx512 build of the vectorised primitives (x86-64 only; chosen at run time when the CPU has it).
#include "backends/cpu/vec/vec.h"

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,prefer-vector-width=512")
#if defined(__clang__)
#pragma clang attribute push( \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma"))), apply_to = function)
#endif

#define TERN_VEC_NS vec_avx512
#define TERN_VEC_WIDTH 16
// The SIMD type first: vec_impl.inc computes with it.
#include "backends/cpu/vec/vec_simd_x86.inc"

#include "backends/cpu/vec/vec_impl.inc"

#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options

namespace tern::vec_avx512 {
// float -> bfloat16 with AVX-512 BF16's VCVTNEPS2BF16 (round to nearest even, NaN quiet,
// subnormal inputs read as zero); the tail through masked loads and stores. The targets are the
// file's and BF16: the intrinsics were declared under the file's.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,avx512bf16"))) void
float_to_bfloat16_native_row(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256bh b = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), reinterpret_cast<const __m256i&>(b));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m256bh b = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i));
    _mm256_mask_storeu_epi16(y + i, m, reinterpret_cast<const __m256i&>(b));
  }
}
}  // namespace tern::vec_avx512

namespace tern::vec_detail {
void (*const kAvx512Bf16Narrow)(const float*, uint16_t*,
                                int64_t) = vec_avx512::float_to_bfloat16_native_row;
const VecOps kAvx512Ops = {"avx512",
                           vec_avx512::scale,
                           vec_avx512::max,
                           vec_avx512::exp_sum,
                           vec_avx512::erf,
                           vec_avx512::sigmoid,
                           vec_avx512::tanh,
                           vec_avx512::layer_norm,
                           vec_avx512::activation,
                           vec_avx512::moments,
                           vec_avx512::affine,
                           vec_avx512::binary,
                           vec_avx512::half_to_float_row,
                           vec_avx512::float_to_half_row,
                           vec_avx512::bfloat16_to_float_row,
                           vec_avx512::float_to_bfloat16_row};
}  // namespace tern::vec_detail
#endif
