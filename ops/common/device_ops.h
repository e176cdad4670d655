// Op geometry that the device backends (CUDA, Vulkan) share: the strided views Transpose, Slice
// and Expand read their input through, the pooling window and mode, and LayerNormalization's rows.
#pragma once

#include "core/kernel.h"
#include "ops/common/window.h"

namespace tern::ops {

// Output element (c0, c1, ...) reads input element offset + sum(c_d * strides[d]); strides may be
// negative (Slice with negative steps) or 0 (broadcast).
struct StridedView {
  Shape strides;
  int64_t offset = 0;
};
Expected<StridedView> transpose_view(const OpContext& ctx);
Expected<StridedView> slice_view(const OpContext& ctx);
StridedView expand_view(const Shape& x, const Shape& y);

enum class PoolMode { kMax, kAvgExcludePad, kAvgIncludePad, kLp2 };
// MaxPool / AveragePool / LpPool (p = 2) on float32 [N, C, 1-3 spatial dims] without MaxPool's
// indices output: the window and mode, or UNSUPPORTED saying what a device kernel lacks.
struct PoolSpec {
  Window win;
  PoolMode mode = PoolMode::kMax;
};
Expected<PoolSpec> device_pool_spec(const OpContext& ctx);

// LayerNormalization as rows of n elements (scale and bias float32 with n values; no Mean or
// InvStdDev outputs), or UNSUPPORTED.
struct LayerNormSpan {
  int64_t rows = 1, n = 1;
  float eps = 1e-5f;
  bool bias = false;
};
Expected<LayerNormSpan> layer_norm_span(const OpContext& ctx);

}  // namespace tern::ops
