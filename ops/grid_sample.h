// GridSample (opsets 16, 20, 22): X [N, C, spatial...] sampled at the normalized locations of
// grid [N, out spatial..., r] (r = the spatial rank; grid's last dim lists x (the last spatial
// dim) first). The parameters and the per-dim sampling geometry the reference kernel
// (ops/grid_sample.cpp) and the CPU kernel (backends/cpu/kernels/grid_sample.cpp) share.
//
// Along each spatial dim of `size` elements a grid value g becomes a source coordinate: with
// align_corners g = -1 and 1 are the centres of the end elements, otherwise their outer edges;
// nearest rounds it half to even; outside the valid span (the end centres with align_corners,
// the outer edges otherwise) border padding clamps it to [0, size - 1] and reflection mirrors it
// into the span. Each interpolation tap then reads its element with the padding applied to the
// index: zeros reads 0 outside, border the nearest element, reflection the mirrored one. This is
// ONNX's reference (per dim; ONNX Runtime's 2-D kernel clamps every dim once one is outside,
// which differs only for cubic with border padding).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/kernel.h"

namespace tern::ops {

enum class GridMode { kLinear, kNearest, kCubic };
enum class GridPadding { kZeros, kBorder, kReflection };

struct GridSampleParams {
  GridMode mode = GridMode::kLinear;
  GridPadding padding = GridPadding::kZeros;
  bool align_corners = false;
  int64_t batch = 0, channels = 0;
  Shape in_dims, out_dims;  // spatial dims of X and of the output (grid's middle dims)
};

Expected<GridSampleParams> parse_grid_sample(const OpContext& ctx);

// Taps per spatial dim: 1 (nearest), 2 (linear) or 4 (cubic).
inline int grid_taps(GridMode mode) {
  return mode == GridMode::kNearest ? 1 : mode == GridMode::kLinear ? 2 : 4;
}

// x mirrored into [lo, hi] at its ends as often as it takes (lo == hi gives lo).
template <class T>
T grid_reflect(T x, T lo, T hi) {
  const T range = hi - lo;
  if (!(range > 0)) return lo;
  if (x >= lo && x <= hi) return x;
  const T dx = x < lo ? lo - x : x - hi;
  const T r = std::fmod(dx, 2 * range);  // exact: which pass over the span, and where in it
  if (x < lo) return r <= range ? lo + r : hi - (r - range);
  return r <= range ? hi - r : lo + (r - range);
}

// The source coordinate along a dim of `size` elements (see the top of this file), then held in
// [-4, size + 4] so that the taps' index arithmetic stays small: beyond that every tap of every
// mode is outside, and padding has already brought border and reflection coordinates in (a NaN
// grid value becomes -4).
template <class T>
T grid_source_coord(T g, int64_t size, const GridSampleParams& p) {
  const T n = static_cast<T>(size);
  T x = p.align_corners ? (g + 1) / 2 * (n - 1) : ((g + 1) * n - 1) / 2;
  if (p.mode == GridMode::kNearest) x = std::nearbyint(x);
  const T lo = p.align_corners ? T(0) : T(-0.5), hi = p.align_corners ? n - 1 : n - T(0.5);
  if (p.padding == GridPadding::kBorder && (x < lo || x > hi)) {
    x = std::clamp(x, T(0), n - 1);
  } else if (p.padding == GridPadding::kReflection) {
    x = grid_reflect(x, lo, hi);
  }
  if (!(x >= T(-4))) return T(-4);
  return std::min(x, n + 4);
}

// Keys' cubic convolution weights (a = -0.75) of the four taps floor(x) - 1 .. floor(x) + 2 for
// t = x - floor(x) in [0, 1).
template <class T>
void grid_cubic_weights(T t, T w[4]) {
  constexpr T a = T(-0.75);
  const T t1 = t + 1, t2 = 1 - t, t3 = 2 - t;
  w[0] = ((a * t1 - 5 * a) * t1 + 8 * a) * t1 - 4 * a;
  w[1] = ((a + 2) * t - (a + 3)) * t * t + 1;
  w[2] = ((a + 2) * t2 - (a + 3)) * t2 * t2 + 1;
  w[3] = ((a * t3 - 5 * a) * t3 + 8 * a) * t3 - 4 * a;
}

// Element index of tap i along a dim of `size` under the padding mode: border clamps, reflection
// mirrors (about the end centres with align_corners, the outer edges otherwise); zeros sets
// *inside to whether i is in [0, size) and returns i clamped.
inline int64_t grid_tap_index(int64_t i, int64_t size, const GridSampleParams& p, bool* inside) {
  const bool in = i >= 0 && i < size;
  *inside = in || p.padding != GridPadding::kZeros;
  if (in) return i;
  if (p.padding == GridPadding::kReflection) {
    const int64_t period = p.align_corners ? 2 * (size - 1) : 2 * size;
    if (period == 0) return 0;
    int64_t m = i % period;
    if (m < 0) m += period;
    if (m >= size) m = period - m - (p.align_corners ? 0 : 1);
    return std::clamp<int64_t>(m, 0, size - 1);
  }
  return std::clamp<int64_t>(i, 0, size - 1);
}

}  // namespace tern::ops
