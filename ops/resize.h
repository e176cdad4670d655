// Resize's sampling per axis (coordinate transformation and rounding resolved), shared by the
// backends' kernels: output index o of axis d reads source indices i0[o] and i1[o] with weight
// w1[o] on the second (nearest mode: i0 == i1, w1 == 0).
#pragma once

#include <vector>

#include "core/kernel.h"

namespace tern::ops {

struct ResizeTaps {
  std::vector<int64_t> i0, i1;
  std::vector<float> w1;
};

struct ResizeGeometry {
  bool linear = false;  // linear on the last two dims (the others keep their size)
  Shape in, out;
  std::vector<ResizeTaps> axes;  // one per dim
};

Expected<ResizeGeometry> resize_geometry(const OpContext& ctx);

}  // namespace tern::ops
