// oneDNN's Winograd convolutions (cpu.conv.winograd, onednn_conv.cpp): which shapes take them,
// and Tern's packing of their weights.
#pragma once

#include <cstdint>
#include <vector>

#include <dnnl_types.h>

namespace tern::onednn {

// A 2-D 3x3 kernel, stride 1, no dilation, an output map of at least 12x12. oneDNN 2.6's kernels
// alone (AVX-512, weights in cache) beat its direct ones 2-3x on any map from 4x4; inside whole
// networks (transformed weights 1.8-4x larger, workspace reorders) maps under 12x12 gained
// nothing at one thread and lost at two: GoogLeNet at 80x80, 2 threads, 5.4 ms instead of 4.9
// with them, 4.9 without. Attributes left empty mean their default, 1.
inline bool winograd_shape(const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                           const std::vector<int64_t>& dilations,
                           const std::vector<int64_t>& out_spatial) {
  if (kernel.size() != 2 || kernel[0] != 3 || kernel[1] != 3 || out_spatial.size() != 2) {
    return false;
  }
  for (int64_t v : strides)
    if (v != 1) return false;
  for (int64_t v : dilations)
    if (v != 1) return false;
  return out_spatial[0] >= 12 && out_spatial[1] >= 12;
}

// Packs float32 weights `w` (oc x ic x 3 x 3, plain) into the Winograd layout `d` a primitive
// chose, as oneDNN's reorder would (its transform, the layouts of its float32 kernels, padded
// channels zero), in one pass writing runs of a block of output channels. oneDNN 2.6's reorder
// writes the transformed planes one value at a time with a stride of oc x ic (26-44 ms for
// 512x512 weights, 3-7 ms for 256x256: most of a ResNet's session creation). False for a layout
// this does not know: the caller then uses oneDNN's reorder.
bool pack_winograd_weights(const dnnl_wino_desc_t& d, const float* w, int64_t oc, int64_t ic,
                           float* out);

}  // namespace tern::onednn
