// Resize (opset 10-19) and the sampling plan its kernels share (ops/resize.h).
//
// Every mode, coordinate transformation and attribute of opset 19: nearest (all rounding modes),
// linear and cubic (any cubic_coeff_a, exclude_outside) on any axes and any rank; antialias (the
// linear or cubic filter stretched by 1/scale when downscaling, weights renormalised);
// coordinate modes half_pixel, half_pixel_symmetric, pytorch_half_pixel, align_corners,
// asymmetric, tf_half_pixel_for_nearest and tf_crop_and_resize (roi, extrapolation_value);
// 'axes' and keep_aspect_ratio_policy. Opset 10 takes (X, scales) with asymmetric coordinates.
// Integer tensors resampled by linear or cubic filters round to nearest and saturate.
//
// The reference kernel: nearest gathers rows (any dtype); the filters sum, per output element,
// the product of the axes' taps in double (every numeric dtype). The CPU backend's separable
// kernels (backends/cpu/kernels/resize_separable.cpp) apply the same plan one axis at a time.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "ops/resize.h"

#include "core/parallel.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

enum class Coord {
  kHalfPixel,
  kHalfPixelSymmetric,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelNearest,
  kTfCropAndResize
};
enum class Nearest { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

struct ResizeAttrs {
  ops::ResizeMode mode = ops::ResizeMode::kNearest;
  bool antialias = false, exclude_outside = false;
  double cubic_a = -0.75;
  Coord coord = Coord::kHalfPixel;
  Nearest nearest = Nearest::kRoundPreferFloor;
  float extrapolation_value = 0.0f;
};

Expected<ResizeAttrs> parse_attrs(const OpContext& ctx) {
  ResizeAttrs a;
  TERN_ASSIGN_OR_RETURN(std::string mode, ctx.attrs().get_string("mode", "nearest"));
  const std::string coord_default = ctx.opset >= 11 ? "half_pixel" : "asymmetric";
  TERN_ASSIGN_OR_RETURN(std::string coord,
                        ctx.attrs().get_string("coordinate_transformation_mode", coord_default));
  TERN_ASSIGN_OR_RETURN(std::string nearest,
                        ctx.attrs().get_string("nearest_mode", "round_prefer_floor"));
  TERN_ASSIGN_OR_RETURN(int64_t antialias, ctx.attrs().get_int("antialias", 0));
  TERN_ASSIGN_OR_RETURN(int64_t exclude, ctx.attrs().get_int("exclude_outside", 0));
  TERN_ASSIGN_OR_RETURN(float cubic_a, ctx.attrs().get_float("cubic_coeff_a", -0.75f));
  TERN_ASSIGN_OR_RETURN(a.extrapolation_value, ctx.attrs().get_float("extrapolation_value", 0.0f));
  a.antialias = antialias != 0;
  a.exclude_outside = exclude != 0;
  a.cubic_a = cubic_a;
  if (mode == "linear" || mode == "bilinear" || mode == "trilinear") {
    a.mode = ops::ResizeMode::kLinear;
  } else if (mode == "cubic" || mode == "bicubic") {
    a.mode = ops::ResizeMode::kCubic;
  } else if (mode != "nearest") {
    return invalid_model(ctx.where, ": Resize mode '", mode, "' (valid: nearest, linear, cubic)");
  }
  static const std::pair<const char*, Coord> kCoords[] = {
      {"half_pixel", Coord::kHalfPixel},
      {"half_pixel_symmetric", Coord::kHalfPixelSymmetric},
      {"pytorch_half_pixel", Coord::kPytorchHalfPixel},
      {"align_corners", Coord::kAlignCorners},
      {"asymmetric", Coord::kAsymmetric},
      {"tf_half_pixel_for_nearest", Coord::kTfHalfPixelNearest},
      {"tf_crop_and_resize", Coord::kTfCropAndResize}};
  bool known = false;
  for (const auto& [name, c] : kCoords) {
    if (coord == name) a.coord = c, known = true;
  }
  if (!known) {
    return invalid_model(ctx.where, ": coordinate_transformation_mode '", coord, "' is not valid");
  }
  static const std::pair<const char*, Nearest> kNearest[] = {
      {"round_prefer_floor", Nearest::kRoundPreferFloor},
      {"round_prefer_ceil", Nearest::kRoundPreferCeil},
      {"floor", Nearest::kFloor},
      {"ceil", Nearest::kCeil}};
  known = false;
  for (const auto& [name, n] : kNearest) {
    if (nearest == name) a.nearest = n, known = true;
  }
  if (!known) return invalid_model(ctx.where, ": nearest_mode '", nearest, "' is not valid");
  return a;
}

// Per dim after 'axes' is applied: the scale, the output size and the roi (start, end).
struct Extent {
  Shape out;
  std::vector<double> scale, roi_start, roi_end;
};

Expected<Extent> resolve_extent(const OpContext& ctx, const ResizeAttrs& a) {
  const Shape& in = ctx.inputs[0].shape;
  const int64_t r = static_cast<int64_t>(in.size());
  if (r == 0) return invalid_argument(ctx.where, ": X is a scalar; Resize needs rank >= 1");
  TERN_ASSIGN_OR_RETURN(auto axes_attr, ctx.attrs().get_ints("axes"));
  TERN_ASSIGN_OR_RETURN(std::string keep_ratio,
                        ctx.attrs().get_string("keep_aspect_ratio_policy", "stretch"));
  if (keep_ratio != "stretch" && keep_ratio != "not_larger" && keep_ratio != "not_smaller") {
    return invalid_model(ctx.where, ": keep_aspect_ratio_policy '", keep_ratio, "' is not valid");
  }
  std::vector<size_t> axes;
  for (int64_t ax : axes_attr) {
    TERN_ASSIGN_OR_RETURN(int64_t d, ops::normalize_axis(ax, r, "axes"));
    if (std::find(axes.begin(), axes.end(), static_cast<size_t>(d)) != axes.end()) {
      return invalid_model(ctx.where, ": axes lists dim ", d, " twice");
    }
    axes.push_back(static_cast<size_t>(d));
  }
  if (axes.empty()) {
    for (int64_t d = 0; d < r; ++d) axes.push_back(static_cast<size_t>(d));
  }
  const size_t n = axes.size();

  // Opset 10: (X, scales). Opset 11+: (X, roi, scales, sizes).
  const size_t roi_at = 1, scales_at = ctx.opset >= 11 ? 2 : 1, sizes_at = 3;
  auto known = [&](size_t i) {
    return ctx.has_input(i) && ctx.inputs[i].value && ctx.inputs[i].value->numel() > 0;
  };
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  if (known(scales_at)) {
    const Tensor& t = *ctx.inputs[scales_at].value;
    for (int64_t i = 0; i < t.numel(); ++i) scales.push_back(t.float_at(i));
  }
  if (ctx.opset >= 11 && known(sizes_at)) sizes = ops::read_ints(*ctx.inputs[sizes_at].value);
  if (scales.empty() == sizes.empty()) {
    return invalid_model(ctx.where, ": exactly one of 'scales' and 'sizes' must be given");
  }
  if (!scales.empty() && scales.size() != n) {
    return invalid_model(ctx.where, ": scales has ", scales.size(), " entries for ", n, " axes");
  }
  if (!sizes.empty() && sizes.size() != n) {
    return invalid_model(ctx.where, ": sizes has ", sizes.size(), " entries for ", n, " axes");
  }

  Extent e;
  e.out = in;
  e.scale.assign(static_cast<size_t>(r), 1.0);
  e.roi_start.assign(static_cast<size_t>(r), 0.0);
  e.roi_end.assign(static_cast<size_t>(r), 1.0);
  if (a.coord == Coord::kTfCropAndResize) {
    if (!known(roi_at)) {
      return unsupported(ctx.where, ": tf_crop_and_resize needs 'roi' as a constant");
    }
    const Tensor& t = *ctx.inputs[roi_at].value;
    if (static_cast<size_t>(t.numel()) != 2 * n) {
      return invalid_model(ctx.where, ": roi has ", t.numel(), " values for ", n, " axes");
    }
    for (size_t i = 0; i < n; ++i) {
      e.roi_start[axes[i]] = t.float_at(static_cast<int64_t>(i));
      e.roi_end[axes[i]] = t.float_at(static_cast<int64_t>(n + i));
      if (!std::isfinite(e.roi_start[axes[i]]) || !std::isfinite(e.roi_end[axes[i]]) ||
          std::fabs(e.roi_start[axes[i]]) > 1e6 || std::fabs(e.roi_end[axes[i]]) > 1e6) {
        return invalid_model(ctx.where, ": roi values must be finite (and within +-1e6)");
      }
    }
  }
  if (!scales.empty()) {
    for (size_t i = 0; i < n; ++i) {
      const size_t d = axes[i];
      if (!(scales[i] > 0) || !std::isfinite(scales[i])) {
        return invalid_model(ctx.where, ": scales must be positive and finite");
      }
      e.scale[d] = scales[i];
      const double roi = a.coord == Coord::kTfCropAndResize ? e.roi_end[d] - e.roi_start[d] : 1.0;
      const double len = std::floor(static_cast<double>(in[d]) * roi * scales[i]);
      if (!(len >= 0 && len < 9.0e15)) {
        return invalid_model(ctx.where, ": scale ", scales[i],
                             " gives an output size out of range");
      }
      e.out[d] = static_cast<int64_t>(len);
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      if (sizes[i] < 0) return invalid_model(ctx.where, ": sizes must be >= 0");
      const size_t d = axes[i];
      e.out[d] = sizes[i];
      e.scale[d] = in[d] ? static_cast<double>(sizes[i]) / static_cast<double>(in[d]) : 1.0;
    }
    if (keep_ratio != "stretch") {
      double s = keep_ratio == "not_larger" ? std::numeric_limits<double>::infinity() : 0.0;
      for (size_t d : axes) {
        s = keep_ratio == "not_larger" ? std::min(s, e.scale[d]) : std::max(s, e.scale[d]);
      }
      for (size_t d : axes) {
        e.scale[d] = s;
        const double len = s * static_cast<double>(in[d]) + 0.5;  // rounded half up
        if (!(len >= 0 && len < 9.0e15)) {
          return invalid_model(ctx.where, ": sizes give an output size out of range");
        }
        e.out[d] = static_cast<int64_t>(len);
      }
    }
  }
  // Each axis's taps are tables of its output length: bound the output before they are made
  // (the memory planner, which checks the budget, runs after the kernels are prepared).
  double elements = 1;
  for (int64_t o : e.out) elements *= static_cast<double>(o);
  if (elements > static_cast<double>(int64_t{1} << 40)) {
    return invalid_argument(ctx.where, ": the output ", shape_str(e.out),
                            " has more than 2^40 elements");
  }
  for (size_t d = 0; d < e.scale.size(); ++d) {
    if (e.scale[d] < 1e-6 && e.out[d] > 0) {
      return unsupported(ctx.where, ": a scale below 1e-6 (", e.scale[d], ") on dim ", d);
    }
  }
  for (int64_t d = 0; d < r; ++d) {
    if (in[static_cast<size_t>(d)] == 0 && e.out[static_cast<size_t>(d)] > 0) {
      return invalid_model(ctx.where, ": dim ", d, " is empty and cannot be resized to ",
                           e.out[static_cast<size_t>(d)]);
    }
  }
  return e;
}

// The source coordinate of output index x on dim d; `outside` is set where tf_crop_and_resize
// samples past the input.
double source_coord(const ResizeAttrs& a, const Extent& e, int64_t in, size_t d, int64_t x,
                    bool* outside) {
  const double s = e.scale[d], xo = static_cast<double>(x), len_in = static_cast<double>(in);
  const int64_t out = e.out[d];
  switch (a.coord) {
    case Coord::kHalfPixel:
      return (xo + 0.5) / s - 0.5;
    case Coord::kHalfPixelSymmetric: {
      const double adjustment = static_cast<double>(out) / (s * len_in);
      const double offset = len_in / 2 * (1 - adjustment);
      return offset + (xo + 0.5) / s - 0.5;
    }
    case Coord::kPytorchHalfPixel:
      return out > 1 ? (xo + 0.5) / s - 0.5 : 0.0;
    case Coord::kAlignCorners: {
      // The resized length is in * scale before rounding down (the output size), as ONNX's
      // reference computes it: 4 -> 3 by scale 0.8 maps output 2 to input 2 * 3 / 2.2.
      const double resized = len_in * s;
      return out == 1 || resized <= 1 ? 0.0 : xo * (len_in - 1) / (resized - 1);
    }
    case Coord::kAsymmetric:
      return xo / s;
    case Coord::kTfHalfPixelNearest:
      return (xo + 0.5) / s;
    case Coord::kTfCropAndResize: {
      const double b = e.roi_start[d], f = e.roi_end[d];
      const double c =
          out > 1 ? b * (len_in - 1) + xo * (f - b) * (len_in - 1) / static_cast<double>(out - 1)
                  : 0.5 * (b + f) * (len_in - 1);
      *outside = c < 0 || c > len_in - 1;
      return c;
    }
  }
  return 0;
}

int64_t nearest_of(Nearest m, double c) {
  if (!std::isfinite(c)) c = 0;
  double r;
  switch (m) {
    case Nearest::kRoundPreferFloor:
      r = c == std::floor(c) + 0.5 ? std::floor(c) : std::round(c);
      break;
    case Nearest::kRoundPreferCeil:
      r = c == std::floor(c) + 0.5 ? std::ceil(c) : std::round(c);
      break;
    case Nearest::kFloor:
      r = std::floor(c);
      break;
    case Nearest::kCeil:
      r = std::ceil(c);
      break;
    default:
      r = c;
  }
  return static_cast<int64_t>(std::clamp(r, -1.0, 9.0e15));
}

double cubic_weight(double x, double A) {
  x = std::fabs(x);
  if (x <= 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
  if (x < 2) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
  return 0;
}

// One axis's taps. The filters put tap k of output o at index floor(c) - (support - 1) + k
// around the source coordinate c, weighed by the kernel at (index - c) * min(scale, 1) when
// antialiased (the footprint widens by 1/scale, weights renormalised), else at index - c.
ops::ResizeAxis axis_taps(const ResizeAttrs& a, const Extent& e, int64_t in, size_t d) {
  ops::ResizeAxis ax;
  ax.in = in;
  ax.out = e.out[d];
  const bool tf_crop = a.coord == Coord::kTfCropAndResize;
  if (tf_crop) ax.outside.assign(static_cast<size_t>(ax.out), 0);
  auto clamp_index = [&](int64_t i) { return std::clamp<int64_t>(i, 0, in - 1); };
  if (a.mode == ops::ResizeMode::kNearest) {
    ax.taps = 1;
    for (int64_t o = 0; o < ax.out; ++o) {
      bool outside = false;
      const double c = source_coord(a, e, in, d, o, &outside);
      if (tf_crop) ax.outside[static_cast<size_t>(o)] = outside;
      ax.index.push_back(clamp_index(nearest_of(a.nearest, c)));
      ax.weight.push_back(1.0f);
    }
  } else {
    const double support = a.mode == ops::ResizeMode::kCubic ? 2 : 1;
    const double s = a.antialias ? std::min(e.scale[d], 1.0) : 1.0;
    // Taps from start = floor(-support / s) + 1 to -start + 1 after the coordinate's floor.
    const int64_t start = static_cast<int64_t>(std::floor(-support / s)) + 1;
    ax.taps = static_cast<int>(2 - 2 * start);
    for (int64_t o = 0; o < ax.out; ++o) {
      bool outside = false;
      double c = source_coord(a, e, in, d, o, &outside);
      if (tf_crop) ax.outside[static_cast<size_t>(o)] = outside;
      if (a.mode == ops::ResizeMode::kLinear && !a.antialias) {
        c = std::clamp(c, 0.0, static_cast<double>(in - 1));  // the edge: what padding gives
      }
      if (!std::isfinite(c)) c = 0;
      c = std::clamp(c, -9.0e15, 9.0e15);
      const double f = std::floor(c);
      double sum = 0;
      const size_t first = ax.weight.size();
      for (int k = 0; k < ax.taps; ++k) {
        const int64_t i = static_cast<int64_t>(f) + start + k;
        const double dist = (static_cast<double>(i) - c) * s;
        double w = a.mode == ops::ResizeMode::kCubic ? cubic_weight(dist, a.cubic_a)
                                                     : std::max(0.0, 1 - std::fabs(dist));
        if (a.exclude_outside && (i < 0 || i >= in)) w = 0;
        sum += w;
        ax.index.push_back(clamp_index(i));
        ax.weight.push_back(static_cast<float>(w));
      }
      if ((a.antialias || a.exclude_outside) && sum != 0) {
        for (size_t k = first; k < ax.weight.size(); ++k) {
          ax.weight[k] = static_cast<float>(ax.weight[k] / sum);
        }
      }
    }
  }
  // Identity: each output o reads input o alone (taps clamped onto o add up to weight 1).
  ax.identity = ax.out == ax.in && !tf_crop;
  for (int64_t o = 0; ax.identity && o < ax.out; ++o) {
    double self = 0, other = 0;
    for (int k = 0; k < ax.taps; ++k) {
      const size_t t =
          static_cast<size_t>(o) * static_cast<size_t>(ax.taps) + static_cast<size_t>(k);
      (ax.index[t] == o ? self : other) += std::fabs(ax.weight[t]);
    }
    ax.identity = self == 1.0 && other == 0.0;
  }
  return ax;
}

Expected<ops::ResizePlan> make_plan(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ResizeAttrs a, parse_attrs(ctx));
  const DType dt = ctx.inputs[0].dtype;
  if (dt == DType::kString) return ops::dtype_error(ctx, 0, "non-string types");
  if (a.mode != ops::ResizeMode::kNearest) {
    const bool numeric = ops::visit_all_numeric(dt, [](auto) {});
    if (!numeric) return ops::dtype_error(ctx, 0, "numeric types (linear and cubic)");
  }
  TERN_ASSIGN_OR_RETURN(Extent e, resolve_extent(ctx, a));
  ops::ResizePlan p;
  p.mode = a.mode;
  p.antialias = a.antialias && a.mode != ops::ResizeMode::kNearest;
  p.dtype = dt;
  p.in = ctx.inputs[0].shape;
  p.out = e.out;
  p.extrapolation_value = a.extrapolation_value;
  for (size_t d = 0; d < p.in.size(); ++d) {
    if (p.in[d] == 0 || p.out[d] == 0) {  // nothing to sample: an empty axis
      ops::ResizeAxis ax;
      ax.in = p.in[d];
      ax.out = p.out[d];
      ax.identity = ax.in == ax.out;
      p.axes.push_back(std::move(ax));
      continue;
    }
    p.axes.push_back(axis_taps(a, e, p.in[d], d));
    for (uint8_t f : p.axes.back().outside) p.extrapolate = p.extrapolate || f;
  }
  return p;
}

Status infer_resize(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ResizeAttrs a, parse_attrs(ctx));
  TERN_ASSIGN_OR_RETURN(Extent e, resolve_extent(ctx, a));
  if (ctx.inputs[0].dtype == DType::kString) return ops::dtype_error(ctx, 0, "non-string types");
  ctx.set_output(0, ctx.inputs[0].dtype, e.out);
  return Status::ok();
}

template <class T>
void gather_row(const T* src, const int64_t* index, int64_t n, T* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = src[index[i]];
}

// Nearest: each output row copies the input row its leading indices select, gathered along the
// last dim; repeated rows (upscaling) are copied whole.
void run_nearest(const ops::ResizePlan& p, const Tensor& x, Tensor& y, int threads) {
  const size_t r = p.in.size(), es = dtype_size(p.dtype);
  std::vector<int64_t> in_stride(r, 1);
  for (size_t d = r; d-- > 1;) in_stride[d - 1] = in_stride[d] * p.in[d];
  const int64_t inner = r ? p.out[r - 1] : 1;
  const int64_t rows = inner ? numel(p.out) / inner : 0;
  const auto* src = static_cast<const uint8_t*>(x.raw());
  auto* dst = static_cast<uint8_t*>(y.raw());
  const int64_t* last = r ? p.axes[r - 1].index.data() : nullptr;
  const int64_t zero = 0;
  if (!last) last = &zero;
  const size_t row_bytes = static_cast<size_t>(inner) * es;
  parallel_for(rows, 64, threads, [&](int64_t b, int64_t e) {
    int64_t prev_off = -1;
    for (int64_t row = b; row < e; ++row) {
      int64_t off = 0, rem = row;
      for (size_t d = r - 1; d-- > 0;) {
        off += p.axes[d].index[static_cast<size_t>(rem % p.out[d])] * in_stride[d];
        rem /= p.out[d];
      }
      uint8_t* out = dst + static_cast<size_t>(row) * row_bytes;
      if (off == prev_off) {  // an upscaled row repeats the one before it
        std::memcpy(out, out - row_bytes, row_bytes);
        continue;
      }
      prev_off = off;
      const uint8_t* in = src + static_cast<size_t>(off) * es;
      const bool sized = ops::visit_by_size(p.dtype, [&](auto tag) {
        using T = decltype(tag);
        gather_row(reinterpret_cast<const T*>(in), last, inner, reinterpret_cast<T*>(out));
      });
      if (!sized) {
        for (int64_t i = 0; i < inner; ++i) {
          std::memcpy(out + static_cast<size_t>(i) * es,
                      in + static_cast<size_t>(last[static_cast<size_t>(i)]) * es, es);
        }
      }
    }
  });
}

}  // namespace

namespace {

// Linear and cubic, plainly: each output element sums, over every combination of its axes'
// taps, the product of the weights times the input there (identity axes contribute one tap).
template <class T>
void run_filter(const ops::ResizePlan& p, const Tensor& x, Tensor& y, int threads) {
  const size_t r = p.in.size();
  const T* src = static_cast<const T*>(x.raw());
  T* dst = static_cast<T*>(y.raw());
  std::vector<int64_t> in_stride(r, 1);
  for (size_t d = r; d-- > 1;) in_stride[d - 1] = in_stride[d] * p.in[d];
  parallel_for(numel(p.out), 256, threads, [&](int64_t b, int64_t e) {
    std::vector<int64_t> o(r);
    std::vector<int> k(r);
    for (int64_t i = b; i < e; ++i) {
      int64_t rem = i;
      for (size_t d = r; d-- > 0;) {
        o[d] = rem % p.out[d];
        rem /= p.out[d];
      }
      double acc = 0;
      std::fill(k.begin(), k.end(), 0);
      while (true) {
        double w = 1;
        int64_t off = 0;
        for (size_t d = 0; d < r; ++d) {
          const ops::ResizeAxis& ax = p.axes[d];
          if (ax.identity) {
            off += o[d] * in_stride[d];
            continue;
          }
          const size_t t =
              static_cast<size_t>(o[d]) * static_cast<size_t>(ax.taps) + static_cast<size_t>(k[d]);
          w *= ax.weight[t];
          off += ax.index[t] * in_stride[d];
        }
        if (w != 0) acc += w * ops::as_double(src[off]);
        size_t d = r;  // next combination of taps over the non-identity axes
        while (d-- > 0) {
          if (p.axes[d].identity) continue;
          if (++k[d] < p.axes[d].taps) break;
          k[d] = 0;
        }
        if (d == static_cast<size_t>(-1)) break;
      }
      dst[i] = ops::round_resampled<T>(acc);
    }
  });
}

Expected<std::unique_ptr<Kernel>> make_resize(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::ResizePlan p, make_plan(ctx));
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  return make_kernel("reference", std::move(p),
                     [](const ops::ResizePlan& q, const KernelArgs& a, const ExecContext& exec) {
                       if (numel(q.out) == 0) return Status::ok();
                       const Tensor& x = *a.inputs[0];
                       Tensor& y = *a.outputs[0];
                       if (q.mode == ops::ResizeMode::kNearest) {
                         run_nearest(q, x, y, exec.num_threads);
                       } else {
                         ops::visit_all_numeric(q.dtype, [&](auto tag) {
                           using T = decltype(tag);
                           run_filter<T>(q, x, y, exec.num_threads);
                         });
                       }
                       if (q.extrapolate) {
                         ops::visit_all_numeric(q.dtype, [&](auto tag) {
                           using T = decltype(tag);
                           ops::fill_extrapolated(q, static_cast<T*>(y.raw()));
                         });
                       }
                       return Status::ok();
                     });
}

}  // namespace

namespace ops {

Expected<ResizePlan> resize_plan(const OpContext& ctx) {
  return make_plan(ctx);
}

Expected<ResizeGeometry> resize_geometry(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ResizePlan p, make_plan(ctx));
  if (p.mode == ResizeMode::kCubic) {
    return unsupported("cubic Resize (four taps per axis) on this backend");
  }
  if (p.extrapolate) return unsupported("tf_crop_and_resize's extrapolation on this backend");
  const size_t r = p.in.size();
  ResizeGeometry g;
  g.linear = p.mode == ResizeMode::kLinear;
  g.in = p.in;
  g.out = p.out;
  for (size_t d = 0; d < r; ++d) {
    const ResizeAxis& ax = p.axes[d];
    ResizeTaps t;
    if (g.linear && d + 2 < r) {
      if (!ax.identity) return unsupported("linear Resize of a leading dim on this backend");
      for (int64_t i = 0; i < ax.out; ++i) {
        t.i0.push_back(i);
        t.i1.push_back(i);
        t.w1.push_back(0.0f);
      }
    } else if (ax.taps == 1) {
      t.i0 = ax.index;
      t.i1 = ax.index;
      t.w1.assign(ax.index.size(), 0.0f);
    } else if (ax.taps == 2 && !p.antialias) {
      for (int64_t o = 0; o < ax.out; ++o) {
        const size_t k = 2 * static_cast<size_t>(o);
        t.i0.push_back(ax.index[k]);
        t.i1.push_back(ax.index[k + 1]);
        t.w1.push_back(ax.weight[k + 1]);
      }
    } else if (ax.out == 0 || ax.in == 0) {
      // an empty axis: no taps
    } else {
      return unsupported("antialiased linear Resize (", ax.taps, " taps) on this backend");
    }
    g.axes.push_back(std::move(t));
  }
  return g;
}

}  // namespace ops

TERN_REGISTRATION void register_op_resize(OpRegistry& r) {
  r.add({"Resize",
         1,
         4,
         1,
         1,
         infer_resize,
         make_resize,
         {1, 2, 3},
         attrs("antialias, axes, coordinate_transformation_mode, cubic_coeff_a, exclude_outside, "
               "extrapolation_value, keep_aspect_ratio_policy, mode, nearest_mode")});
}

}  // namespace tern
