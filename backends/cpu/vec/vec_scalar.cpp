// Scalar build of the vectorised primitives (the baseline every CPU runs) and the dispatcher.
#include "backends/cpu/vec/vec.h"

#include "backends/cpu/cpu_capability.h"

#include <cstdint>

#define TERN_VEC_NS vec_scalar
// The SIMD type first: vec_impl.inc computes with it.
#include "backends/cpu/vec/vec_simd_scalar.inc"

#include "backends/cpu/vec/vec_impl.inc"

namespace tern {

namespace vec_detail {
const VecOps kScalarOps = {"scalar",
                           vec_scalar::scale,
                           vec_scalar::max,
                           vec_scalar::exp_sum,
                           vec_scalar::erf,
                           vec_scalar::sigmoid,
                           vec_scalar::tanh,
                           vec_scalar::layer_norm,
                           vec_scalar::activation,
                           vec_scalar::moments,
                           vec_scalar::affine,
                           vec_scalar::binary,
                           vec_scalar::half_to_float_row,
                           vec_scalar::float_to_half_row,
                           vec_scalar::bfloat16_to_float_row,
                           vec_scalar::float_to_bfloat16_row};
}  // namespace vec_detail

const VecOps& vec_ops(CpuIsa isa) {
#if defined(__x86_64__)
  if (isa == CpuIsa::kAvx512) {
    static const VecOps avx512 = [] {
      VecOps v = vec_detail::kAvx512Ops;
      if (cpu_features().avx512_bf16) v.float_to_bfloat16 = vec_detail::kAvx512Bf16Narrow;
      return v;
    }();
    return avx512;
  }
  if (isa == CpuIsa::kAvx2) return vec_detail::kAvx2Ops;
#elif defined(__aarch64__)
  (void)isa;  // NEON is part of every ARMv8-A CPU
  return vec_detail::kNeonOps;
#else
  (void)isa;
#endif
  return vec_detail::kScalarOps;
}

}  // namespace tern
