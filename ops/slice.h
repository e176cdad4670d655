// Slice's resolved geometry (ONNX's clamping applied), shared by the backends' kernels.
#pragma once

#include <vector>

#include "core/kernel.h"

namespace tern::ops {

struct SliceParams {
  Shape in_shape, out_shape;
  std::vector<int64_t> start, step;  // per input dim
  size_t esize = 0;
};

// Starts/ends/axes/steps from attributes (opset < 10) or known inputs (opset >= 10).
Expected<SliceParams> parse_slice(const OpContext& ctx);

}  // namespace tern::ops
