// Conv: params, shape inference and the naive reference (float32, 1-D to 3-D, groups, dilations).
#pragma once

#include "core/kernel.h"
#include "ops/common/window.h"

namespace tern::ops {

struct ConvParams {
  Window win;
  int64_t group = 1;
  Shape x, w, y;  // [N, C, ...], [M, C/group, k...], [N, M, ...]
  bool has_bias = false;
};

// any_float: shape inference's check (float16/bfloat16 too); kernels keep the default (float32).
Expected<ConvParams> parse_conv(const OpContext& ctx, bool any_float = false);
// y = conv(x, w) + b; b may be null. Accumulates in double.
void conv_reference(const ConvParams& p, const float* x, const float* w, const float* b, float* y);

}  // namespace tern::ops
