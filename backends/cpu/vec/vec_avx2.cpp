// avx2 build of the vectorised primitives (x86-64 only; chosen at run time when the CPU has it).
#include "backends/cpu/vec/vec.h"

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,prefer-vector-width=256")
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#endif

#define TERN_VEC_NS vec_avx2
#define TERN_VEC_WIDTH 8
// The SIMD type first: vec_impl.inc computes with it.
#include "backends/cpu/vec/vec_simd_x86.inc"

#include "backends/cpu/vec/vec_impl.inc"

#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options

namespace tern::vec_detail {
const VecOps kAvx2Ops = {"avx2",
                         vec_avx2::scale,
                         vec_avx2::max,
                         vec_avx2::exp_sum,
                         vec_avx2::erf,
                         vec_avx2::sigmoid,
                         vec_avx2::tanh,
                         vec_avx2::layer_norm,
                         vec_avx2::activation,
                         vec_avx2::moments,
                         vec_avx2::affine,
                         vec_avx2::binary,
                         vec_avx2::half_to_float_row,
                         vec_avx2::float_to_half_row,
                         vec_avx2::bfloat16_to_float_row,
                         vec_avx2::float_to_bfloat16_row};
}  // namespace tern::vec_detail
#endif
