// ConvInteger and QLinearConv parameters (ops/conv_integer.cpp), shared with the CPU backend's
// oneDNN int8 convolution.
#pragma once

#include "core/kernel.h"
#include "ops/conv.h"

namespace tern::ops {

struct QConvParams {
  ConvParams conv;
  DType x_type = DType::kUndefined, w_type = DType::kUndefined;
  DType y_type = DType::kUndefined;  // QLinearConv: y_zero_point's; ConvInteger: int32
  bool linear = false;               // QLinearConv / FusedQLinearConv (requantised output)
  bool relu = false;                 // FusedQLinearConv's "activation" = "Relu" (QDQ fusion)
};

// Checks and parses a ConvInteger or QLinearConv node (types, shapes of the scales and zero
// points, the window).
Expected<QConvParams> parse_qconv(const OpContext& ctx);

}  // namespace tern::ops
