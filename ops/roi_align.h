// RoiAlign (opsets 10, 16, 22): average or max of bilinear samples over a grid in each output
// bin of each region of interest. Opset 10's regions are in "output_half_pixel" coordinates (no
// half-pixel shift, regions at least one pixel); opset 16 added the attribute and made
// "half_pixel" the default. The parameters and the sampling geometry the reference kernel
// (ops/roi_align.cpp) and the CPU kernel share.
#pragma once

#include <cstdint>
#include <vector>

#include "core/kernel.h"

namespace tern::ops {

struct RoiAlignParams {
  bool max_mode = false;
  bool half_pixel = true;
  int64_t out_h = 1, out_w = 1, sampling_ratio = 0;
  float spatial_scale = 1.0f;
  int64_t channels = 0, height = 0, width = 0, rois = 0, batch = 0;
};

Expected<RoiAlignParams> parse_roi_align(const OpContext& ctx);

// One bilinear sample: the four neighbours' flat offsets (y * width + x) and weights; all weights
// 0 for a sample outside the image.
struct RoiSample {
  int64_t o1 = 0, o2 = 0, o3 = 0, o4 = 0;
  float w1 = 0, w2 = 0, w3 = 0, w4 = 0;
};

// The samples of region r (corners x1, y1, x2, y2 in input coordinates), bin by bin: out_h *
// out_w bins of grid_h * grid_w samples each (*grid_count receives grid_h * grid_w, at least 1).
std::vector<RoiSample> roi_samples(const RoiAlignParams& p, const float* roi, int64_t* grid_count);

}  // namespace tern::ops
