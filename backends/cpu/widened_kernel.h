// float16 / bfloat16 nodes the CPU has no kernel of their own for run through the float32 kernel
// of the same node: the half inputs are widened to float32 (constants once, at prepare), the
// float32 kernel runs, and its outputs are rounded back to the node's types. The model's
// semantics stay per node (every output is rounded to its declared type), the arithmetic
// accumulates in float32, and the conversions use the CPU's own instructions (F16C, AVX-512F,
// NEON) through VecOps.
#pragma once

#include <functional>
#include <memory>

#include "backends/cpu/vec/vec.h"
#include "core/kernel.h"

namespace tern {

// Whether any present input or output of ctx is float16 or bfloat16.
bool has_half_values(const OpContext& ctx);

// The widened kernel for ctx, preparing its float32 form with `prepare_f32`; UNSUPPORTED where
// the node cannot be widened (blocked layouts, subgraphs, an output whose float32 form changes
// more than its precision) or the float32 form has no kernel either.
Expected<std::unique_ptr<Kernel>> prepare_widened(
    const OpContext& ctx,
    const std::function<Expected<std::unique_ptr<Kernel>>(const OpContext&)>& prepare_f32);

// Rows of float16 / bfloat16 to float32 and back (round to nearest even), on `threads` threads.
void widen_to_f32(const VecOps& v, DType from, const void* src, float* dst, int64_t n, int threads);
void narrow_from_f32(const VecOps& v, DType to, const float* src, void* dst, int64_t n,
                     int threads);

}  // namespace tern
