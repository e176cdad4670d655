// FusedConv (Tern-internal, made by the graph optimizer, never read from files):
//   Y = activation(Conv(X, W, B) + Z)
// with Conv's attributes, an optional residual Z of Y's shape (input 3), and attributes
// "activation" (Relu, LeakyRelu, Clip, Sigmoid, HardSigmoid, HardSwish, Tanh; absent: none) and
// "activation_params" (LeakyRelu alpha; Clip min, max; HardSigmoid alpha, beta).
#pragma once

#include <vector>

#include "ops/conv.h"

namespace tern::ops {

enum class FusedAct { kNone, kRelu, kLeakyRelu, kClip, kSigmoid, kHardSigmoid, kHardSwish, kTanh };

struct FusedConvParams {
  ConvParams conv;
  FusedAct act = FusedAct::kNone;
  std::vector<float> act_params;  // as the attribute gives them
  bool has_sum = false;
};

Expected<FusedConvParams> parse_fused_conv(const OpContext& ctx);
// y[i] = act(y[i]) for n elements.
void apply_fused_activation(FusedAct act, const std::vector<float>& params, float* y, int64_t n);

}  // namespace tern::ops
