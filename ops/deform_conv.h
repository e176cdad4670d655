// DeformConv (opsets 19, 22): a 2-D convolution whose every kernel tap samples the input at its
// regular position plus a learned offset (bilinear, zero outside the image), optionally scaled
// by a mask (modulated deformable convolution, DCNv2). Channels split into `offset_group` groups
// that share offsets, independently of the convolution's `group`. The parameters the reference
// kernel (ops/deform_conv.cpp) and the CPU kernel (backends/cpu/kernels/deform_conv.cpp) share.
#pragma once

#include <cstdint>

#include "core/kernel.h"

namespace tern::ops {

struct DeformConvParams {
  int64_t n = 0, c = 0, h = 0, w = 0;  // X [N, C, H, W]
  int64_t m = 0, kh = 0, kw = 0;       // W [M, C / group, kH, kW]
  int64_t oh = 0, ow = 0;              // Y [N, M, oH, oW]
  int64_t group = 1, offset_group = 1;
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1;
  bool has_bias = false, has_mask = false;
  DType dtype = DType::kFloat32;
};

// Validates inputs and attributes: offset [N, offset_group * kH * kW * 2, oH, oW] holding (dy, dx)
// per tap, mask [N, offset_group * kH * kW, oH, oW], B [M].
Expected<DeformConvParams> parse_deform_conv(const OpContext& ctx);

}  // namespace tern::ops
