// FusedConv's element-wise epilogue (ops/fused_conv.h) for the CPU's own and oneDNN kernels, on
// the vector primitives (backends/cpu/vec/vec.h) where they have the step.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/vec/vec.h"
#include "ops/fused_conv.h"

namespace tern {

// y[i] = steps(y[i]) for n values, a cache-sized run at a time: Sigmoid, Tanh, SiLU (Swish) and
// Affine on `v`'s vector primitives (a scalar exponential costs 10-20 ns a value, more than the
// convolution's own work on a first layer), the other steps, without exponentials, on their
// plain loops (ops::apply_step).
void apply_fused_steps(const VecOps& v, const std::vector<ops::FusedStep>& steps, float* y,
                       int64_t n);

}  // namespace tern
