// Resize's sampling per axis, resolved once from the attributes and the known scales/sizes/roi and
// shared by the backends' kernels.
//
// ResizePlan is the general form: output index o of an axis is the weighted sum of `taps` input
// indices (nearest: 1; linear: 2; cubic: 4; antialiased downscaling: the filter's footprint), with
// the indices clamped into the input (the edge repeats) and, for tf_crop_and_resize, a flag where
// the source lies outside the input (the output is then extrapolation_value). Every kernel that
// applies the axes one after another computes what ONNX defines: the interpolation is separable.
//
// ResizeGeometry is the narrow form some kernels take: nearest on any axes or linear (not
// antialiased) on the last two, each output reading i0 and i1 with weight w1 on the second.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/kernel.h"
#include "ops/common/op_utils.h"

namespace tern::ops {

struct ResizeAxis {
  int64_t in = 1, out = 1;
  int taps = 1;                  // per output index
  std::vector<int64_t> index;    // out x taps, each in [0, in)
  std::vector<float> weight;     // out x taps
  std::vector<uint8_t> outside;  // tf_crop_and_resize: 1 where the output is extrapolated
  bool identity = false;         // out == in, o reads o alone, nothing extrapolated
};

enum class ResizeMode { kNearest, kLinear, kCubic };

struct ResizePlan {
  ResizeMode mode = ResizeMode::kNearest;
  bool antialias = false;  // linear/cubic filters widened when downscaling
  DType dtype = DType::kFloat32;
  Shape in, out;
  std::vector<ResizeAxis> axes;  // one per dim
  bool extrapolate = false;      // some axis has an `outside` flag set
  float extrapolation_value = 0.0f;
};

Expected<ResizePlan> resize_plan(const OpContext& ctx);

// Fills the outputs that tf_crop_and_resize extrapolates (plan.extrapolate) with the value, over
// a plain-layout output of plan.out; T is the element type.
template <class T>
void fill_extrapolated(const ResizePlan& plan, T* out);

struct ResizeTaps {
  std::vector<int64_t> i0, i1;
  std::vector<float> w1;
};

struct ResizeGeometry {
  bool linear = false;  // linear on the last two dims (the others keep their size)
  Shape in, out;
  std::vector<ResizeTaps> axes;  // one per dim
};

// UNSUPPORTED where the plan does not fit the narrow form (cubic, antialiased downscaling,
// tf_crop_and_resize's extrapolation, linear on a leading dim).
Expected<ResizeGeometry> resize_geometry(const OpContext& ctx);

// A resampled value stored as T: integers round to nearest and saturate (NaN gives 0); floating
// types round as their conversion does.
template <class T>
T round_resampled(double v);

// ---- implementation of the templates -----------------------------------------------------------

template <class T>
T round_resampled(double v) {
  if constexpr (std::is_integral_v<T>) {
    if (std::isnan(v)) return T(0);
    const double lo = static_cast<double>(std::numeric_limits<T>::lowest());
    const double hi = static_cast<double>(std::numeric_limits<T>::max());
    return static_cast<T>(std::clamp(std::nearbyint(v), lo, hi));
  } else {
    return from_double<T>(v);
  }
}

template <class T>
void fill_extrapolated(const ResizePlan& plan, T* out) {
  const size_t r = plan.out.size();
  if (!plan.extrapolate || r == 0) return;
  const int64_t inner = plan.out[r - 1];
  if (inner == 0) return;
  const int64_t rows = numel(plan.out) / inner;
  const T value = round_resampled<T>(plan.extrapolation_value);
  const ResizeAxis& last = plan.axes[r - 1];
  for (int64_t row = 0; row < rows; ++row) {
    bool row_outside = false;
    int64_t rem = row;
    for (size_t d = r - 1; d-- > 0;) {
      const ResizeAxis& ax = plan.axes[d];
      const int64_t o = rem % plan.out[d];
      rem /= plan.out[d];
      if (!ax.outside.empty() && ax.outside[static_cast<size_t>(o)]) row_outside = true;
    }
    T* y = out + row * inner;
    for (int64_t i = 0; i < inner; ++i) {
      if (row_outside || (!last.outside.empty() && last.outside[static_cast<size_t>(i)])) {
        y[i] = value;
      }
    }
  }
}

}  // namespace tern::ops
