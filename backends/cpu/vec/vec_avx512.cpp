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

namespace tern::vec_detail {
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
                           vec_avx512::float_to_half_row};
}  // namespace tern::vec_detail
#endif
