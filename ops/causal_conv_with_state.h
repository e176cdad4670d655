// CausalConvWithState (ONNX opset 27): a depthwise causal 1-D convolution that carries its left
// context. Each channel's row is prefixed with past_state (B, C, k-1) (zeros when absent),
// convolved with its own k taps (weight (C, 1, k), optional bias (C)), optionally followed by SiLU
// ("silu" or its alias "swish"); present_state is the last k-1 positions of the prefixed row. The
// parameters the reference kernel (ops/causal_conv_with_state.cpp) and the CPU kernel share.
#pragma once

#include <cstdint>

#include "core/kernel.h"

namespace tern::ops {

struct CausalConvParams {
  int64_t batch = 0, channels = 0, length = 0, taps = 0;  // taps: the kernel size k
  bool has_bias = false, has_past = false, silu = false;
  DType dtype = DType::kFloat32;

  int64_t carry() const { return taps - 1; }  // the state's length
};

Expected<CausalConvParams> parse_causal_conv(const OpContext& ctx);

}  // namespace tern::ops
