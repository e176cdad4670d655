// FusedConv (Tern-internal, made by the graph optimizer, never read from files):
//   Y = epilogue(Conv(X, W, B) + Z)
// with Conv's attributes, an optional residual Z of Y's shape (input 3), and an epilogue: the
// element-wise steps named by the strings attribute "activations", applied in order (Relu,
// LeakyRelu, Clip, Sigmoid, HardSigmoid, HardSwish, Tanh, Affine; absent: none), whose
// parameters follow one another in the floats attribute "activation_params" (LeakyRelu alpha;
// Clip min, max; HardSigmoid alpha, beta; Affine scale, shift: x * scale + shift).
#pragma once

#include <vector>

#include "ops/conv.h"

namespace tern::ops {

enum class FusedAct {
  kRelu,
  kLeakyRelu,
  kClip,
  kSigmoid,
  kHardSigmoid,
  kHardSwish,
  kTanh,
  kAffine,
  kSwish  // x * sigmoid(alpha x)
};

struct FusedStep {
  FusedAct act = FusedAct::kRelu;
  std::vector<float> params;
};

struct FusedConvParams {
  ConvParams conv;
  std::vector<FusedStep> epilogue;
  bool has_sum = false;
};

Expected<FusedConvParams> parse_fused_conv(const OpContext& ctx, bool any_float = false);
// A Conv node's params as a FusedConv without epilogue or residual; FusedConv's as they are
// (for kernels serving both ops). any_float: as parse_conv's.
Expected<FusedConvParams> parse_conv_or_fused(const OpContext& ctx, bool any_float = false);
// y[i] = step(y[i]) for n elements (plain loops: the reference, and the CPU's steps without
// exponentials, backends/cpu/fused_steps.h).
void apply_step(const FusedStep& step, float* y, int64_t n);
// y[i] = epilogue(y[i]) for n elements.
void apply_epilogue(const std::vector<FusedStep>& epilogue, float* y, int64_t n);

}  // namespace tern::ops
