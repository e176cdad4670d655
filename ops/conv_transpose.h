// ConvTranspose: params, shape inference and the naive reference (float32, 1-D to 3-D, groups).
#pragma once

#include "core/kernel.h"
#include "ops/common/window.h"

namespace tern::ops {

struct ConvTransposeParams {
  Window win;  // in = x spatial, out = y spatial
  std::vector<int64_t> output_padding;
  int64_t group = 1;
  Shape x, w, y;  // [N, C, ...], [C, M/group, k...], [N, M, ...]
  bool has_bias = false;
};

// any_float: shape inference's check (float16/bfloat16 too); kernels keep the default (float32).
Expected<ConvTransposeParams> parse_conv_transpose(const OpContext& ctx, bool any_float = false);
void conv_transpose_reference(const ConvTransposeParams& p, const float* x, const float* w,
                              const float* b, float* y);

}  // namespace tern::ops
