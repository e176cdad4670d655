// Sliding-window geometry shared by Conv, ConvTranspose and the pooling ops: kernel, strides,
// dilations and pads per spatial dim, with ONNX's auto_pad and ceil_mode rules.
#pragma once

#include <vector>

#include "core/kernel.h"

namespace tern::ops {

struct Window {
  size_t spatial = 0;  // number of spatial dims (input rank - 2)
  std::vector<int64_t> in, out, kernel, strides, dilations, pads_begin, pads_end;
};

// Reads strides/dilations/pads/auto_pad (and kernel_shape unless `kernel` is given) for a
// forward window op (Conv, pooling) over input `x_shape` [N, C, spatial...]; computes `out`.
Expected<Window> forward_window(const Attributes& attrs, const Shape& x_shape,
                                std::vector<int64_t> kernel, bool ceil_mode);

// The same window with at most three spatial dims, padded with leading 1s to exactly three
// (D, H, W) so one loop nest serves 1-D, 2-D and 3-D ops.
Window as_3d(const Window& w);

}  // namespace tern::ops
