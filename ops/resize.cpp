// Resize (opset 10-19): nearest (all rounding modes) on any rank, linear and cubic (any
// cubic_coeff_a, exclude_outside) on the last two dims; coordinate modes half_pixel,
// pytorch_half_pixel, align_corners, asymmetric and tf_half_pixel_for_nearest.
// tf_crop_and_resize, antialias and 'axes' are declined by name.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "ops/resize.h"

#include "core/parallel.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

enum class Coord { kHalfPixel, kPytorchHalfPixel, kAlignCorners, kAsymmetric, kTfHalfPixelNearest };
enum class Nearest { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

struct ResizeParams {
  bool linear = false;
  bool cubic = false;  // with linear = true: the last two dims are resampled, four taps each
  float cubic_a = -0.75f;
  bool exclude_outside = false;
  Coord coord = Coord::kHalfPixel;
  Nearest nearest = Nearest::kRoundPreferFloor;
  Shape in, out;
  std::vector<double> scales;
  DType dtype;
};

Expected<ResizeParams> parse_resize(const OpContext& ctx) {
  ResizeParams p;
  p.in = ctx.inputs[0].shape;
  p.dtype = ctx.inputs[0].dtype;
  const size_t r = p.in.size();
  TERN_ASSIGN_OR_RETURN(std::string mode, ctx.attrs().get_string("mode", "nearest"));
  std::string coord_default = ctx.opset >= 11 ? "half_pixel" : "asymmetric";
  TERN_ASSIGN_OR_RETURN(std::string coord,
                        ctx.attrs().get_string("coordinate_transformation_mode", coord_default));
  TERN_ASSIGN_OR_RETURN(std::string nearest,
                        ctx.attrs().get_string("nearest_mode", "round_prefer_floor"));
  TERN_ASSIGN_OR_RETURN(auto axes, ctx.attrs().get_ints("axes"));
  TERN_ASSIGN_OR_RETURN(std::string keep_ratio,
                        ctx.attrs().get_string("keep_aspect_ratio_policy", "stretch"));
  if (!axes.empty()) return unsupported("Resize with the 'axes' attribute");
  if (keep_ratio != "stretch") return unsupported("keep_aspect_ratio_policy '", keep_ratio, "'");
  TERN_ASSIGN_OR_RETURN(int64_t antialias, ctx.attrs().get_int("antialias", 0));
  if (antialias != 0) return unsupported("Resize with antialias");
  if (mode == "linear" || mode == "bilinear") {
    p.linear = true;
  } else if (mode == "cubic" || mode == "bicubic") {
    p.linear = p.cubic = true;
    TERN_ASSIGN_OR_RETURN(p.cubic_a, ctx.attrs().get_float("cubic_coeff_a", -0.75f));
    TERN_ASSIGN_OR_RETURN(int64_t exclude, ctx.attrs().get_int("exclude_outside", 0));
    p.exclude_outside = exclude != 0;
  } else if (mode != "nearest") {
    return unsupported("Resize mode '", mode, "' (supported: nearest, linear, cubic)");
  }
  if (coord == "half_pixel")
    p.coord = Coord::kHalfPixel;
  else if (coord == "pytorch_half_pixel")
    p.coord = Coord::kPytorchHalfPixel;
  else if (coord == "align_corners")
    p.coord = Coord::kAlignCorners;
  else if (coord == "asymmetric")
    p.coord = Coord::kAsymmetric;
  else if (coord == "tf_half_pixel_for_nearest")
    p.coord = Coord::kTfHalfPixelNearest;
  else
    return unsupported("coordinate_transformation_mode '", coord, "'");
  if (nearest == "round_prefer_floor")
    p.nearest = Nearest::kRoundPreferFloor;
  else if (nearest == "round_prefer_ceil")
    p.nearest = Nearest::kRoundPreferCeil;
  else if (nearest == "floor")
    p.nearest = Nearest::kFloor;
  else if (nearest == "ceil")
    p.nearest = Nearest::kCeil;
  else
    return invalid_model("nearest_mode '", nearest, "' is not valid");

  // Opset 10: (X, scales). Opset 11+: (X, roi, scales, sizes).
  const size_t scales_at = ctx.opset >= 11 ? 2 : 1, sizes_at = 3;
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  if (ctx.has_input(scales_at) && ctx.inputs[scales_at].value &&
      ctx.inputs[scales_at].value->numel() > 0) {
    const Tensor& t = *ctx.inputs[scales_at].value;
    for (int64_t i = 0; i < t.numel(); ++i) scales.push_back(t.float_at(i));
  }
  if (ctx.has_input(sizes_at) && ctx.inputs[sizes_at].value &&
      ctx.inputs[sizes_at].value->numel() > 0) {
    sizes = ops::read_ints(*ctx.inputs[sizes_at].value);
  }
  if (scales.empty() == sizes.empty()) {
    return invalid_model("exactly one of 'scales' and 'sizes' must be given");
  }
  p.out.resize(r);
  p.scales.resize(r);
  if (!scales.empty()) {
    if (scales.size() != r)
      return invalid_model("scales has ", scales.size(), " entries for rank ", r);
    for (size_t i = 0; i < r; ++i) {
      if (!(scales[i] > 0)) return invalid_model("scales must be positive");
      p.scales[i] = scales[i];
      p.out[i] = static_cast<int64_t>(std::floor(static_cast<double>(p.in[i]) * scales[i]));
    }
  } else {
    if (sizes.size() != r)
      return invalid_model("sizes has ", sizes.size(), " entries for rank ", r);
    for (size_t i = 0; i < r; ++i) {
      if (sizes[i] < 0) return invalid_model("sizes must be >= 0");
      p.out[i] = sizes[i];
      p.scales[i] = p.in[i] ? static_cast<double>(sizes[i]) / static_cast<double>(p.in[i]) : 1.0;
    }
  }
  if (p.linear) {
    for (size_t i = 0; i + 2 < r; ++i) {
      if (p.out[i] != p.in[i]) {
        return unsupported(p.cubic ? "cubic" : "linear",
                           " Resize of a dim other than the last two");
      }
    }
    if (p.dtype != DType::kFloat32) {
      return ops::dtype_error(ctx, 0, p.cubic ? "float32 (cubic)" : "float32 (linear)");
    }
  } else if (p.dtype == DType::kString) {
    return ops::dtype_error(ctx, 0, "non-string types");
  }
  return p;
}

double source_coord(const ResizeParams& p, size_t d, int64_t x) {
  const double s = p.scales[d];
  const double xo = static_cast<double>(x);
  switch (p.coord) {
    case Coord::kHalfPixel:
      return (xo + 0.5) / s - 0.5;
    case Coord::kPytorchHalfPixel:
      return p.out[d] > 1 ? (xo + 0.5) / s - 0.5 : 0.0;
    case Coord::kAlignCorners: {
      // The resized length is in * scale before rounding down (the output size), as ONNX's
      // reference computes it: 4 -> 3 by scale 0.8 maps output 2 to input 2 * 3 / 2.2.
      const double resized = static_cast<double>(p.in[d]) * s;
      return p.out[d] == 1 || resized <= 1 ? 0.0
                                           : xo * static_cast<double>(p.in[d] - 1) / (resized - 1);
    }
    case Coord::kAsymmetric:
      return xo / s;
    case Coord::kTfHalfPixelNearest:
      return (xo + 0.5) / s;
  }
  return 0;
}

int64_t nearest_index(const ResizeParams& p, size_t d, int64_t x) {
  const double c = source_coord(p, d, x);
  double r;
  switch (p.nearest) {
    case Nearest::kRoundPreferFloor:
      r = c == std::floor(c) + 0.5 ? std::floor(c) : std::round(c);
      break;
    case Nearest::kRoundPreferCeil:
      r = std::round(c);
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
  return std::clamp<int64_t>(static_cast<int64_t>(r), 0, p.in[d] - 1);
}

Status infer_resize(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ResizeParams p, parse_resize(ctx));
  ctx.set_output(0, ctx.inputs[0].dtype, p.out);
  return Status::ok();
}

template <class T>
void gather_row(const T* src, const int64_t* index, int64_t n, T* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = src[index[i]];
}

void run_nearest(const ResizeParams& p, const Tensor& x, Tensor& y, int threads) {
  const size_t r = p.in.size(), es = dtype_size(p.dtype);
  std::vector<std::vector<int64_t>> index(r);
  for (size_t d = 0; d < r; ++d) {
    for (int64_t i = 0; i < p.out[d]; ++i) index[d].push_back(nearest_index(p, d, i));
  }
  std::vector<int64_t> in_stride(r, 1);
  for (size_t d = r; d-- > 1;) in_stride[d - 1] = in_stride[d] * p.in[d];
  const int64_t inner = r ? p.out[r - 1] : 1;
  const int64_t rows = inner ? numel(p.out) / inner : 0;
  const auto* src = static_cast<const uint8_t*>(x.raw());
  auto* dst = static_cast<uint8_t*>(y.raw());
  const int64_t* last = index[r - 1].data();
  const size_t row_bytes = static_cast<size_t>(inner) * es;
  parallel_for(rows, 64, threads, [&](int64_t b, int64_t e) {
    int64_t prev_off = -1;
    for (int64_t row = b; row < e; ++row) {
      int64_t off = 0, rem = row;
      for (size_t d = r - 1; d-- > 0;) {
        off += index[d][static_cast<size_t>(rem % p.out[d])] * in_stride[d];
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

struct LinearTap {
  int64_t i0, i1;
  float w1;
};

std::vector<LinearTap> linear_taps(const ResizeParams& p, size_t d) {
  std::vector<LinearTap> taps;
  for (int64_t i = 0; i < p.out[d]; ++i) {
    double c = std::clamp(source_coord(p, d, i), 0.0, static_cast<double>(p.in[d] - 1));
    int64_t i0 = static_cast<int64_t>(std::floor(c));
    int64_t i1 = std::min(i0 + 1, p.in[d] - 1);
    taps.push_back({i0, i1, static_cast<float>(c - static_cast<double>(i0))});
  }
  return taps;
}

// The last two dims resampled (linear and cubic): the planes of IH x IW (a rank-1 input is one
// row) become OH x OW.
struct Planes {
  bool two_d;
  size_t dh, dw;
  int64_t IH, IW, OH, OW, planes;
};

Planes planes_of(const ResizeParams& p) {
  const size_t r = p.in.size();
  Planes q{r >= 2, r >= 2 ? r - 2 : 0, r - 1, 1, p.in[r - 1], 1, p.out[r - 1], 0};
  if (q.two_d) q.IH = p.in[q.dh], q.OH = p.out[q.dh];
  q.planes = numel(p.in) / (q.IH * q.IW);
  return q;
}

void run_linear(const ResizeParams& p, const Tensor& x, Tensor& y, int threads) {
  const Planes q = planes_of(p);
  auto th = q.two_d ? linear_taps(p, q.dh) : std::vector<LinearTap>{{0, 0, 0.f}};
  auto tw = linear_taps(p, q.dw);
  const float* src = x.data<float>();
  float* dst = y.data<float>();
  parallel_for(q.planes, 1, threads, [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      const float* xp = src + pl * q.IH * q.IW;
      float* yp = dst + pl * q.OH * q.OW;
      for (int64_t oh = 0; oh < q.OH; ++oh) {
        const LinearTap& h = th[static_cast<size_t>(oh)];
        const float* r0 = xp + h.i0 * q.IW;
        const float* r1 = xp + h.i1 * q.IW;
        for (int64_t ow = 0; ow < q.OW; ++ow) {
          const LinearTap& w = tw[static_cast<size_t>(ow)];
          const float top = r0[w.i0] + (r0[w.i1] - r0[w.i0]) * w.w1;
          const float bot = r1[w.i0] + (r1[w.i1] - r1[w.i0]) * w.w1;
          yp[oh * q.OW + ow] = top + (bot - top) * h.w1;
        }
      }
    }
  });
}

// Cubic: four taps per output coordinate (the ONNX convolution kernel with coefficient A); taps
// past the edge read the edge, or, with exclude_outside, weigh nothing (the rest renormalised).
struct CubicTap {
  int64_t i[4];
  float w[4];
};

std::vector<CubicTap> cubic_taps(const ResizeParams& p, size_t d) {
  const double A = p.cubic_a;
  std::vector<CubicTap> taps;
  for (int64_t o = 0; o < p.out[d]; ++o) {
    const double c = source_coord(p, d, o);
    const double f = std::floor(c), t = c - f;
    const double s[4] = {t + 1, t, 1 - t, 2 - t};  // distances to taps floor-1 .. floor+2
    CubicTap tap{};
    double sum = 0;
    for (int k = 0; k < 4; ++k) {
      const double x = s[k];
      double w =
          x <= 1 ? ((A + 2) * x - (A + 3)) * x * x + 1 : ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
      const int64_t src = static_cast<int64_t>(f) - 1 + k;
      if (p.exclude_outside && (src < 0 || src >= p.in[d])) w = 0;
      tap.i[k] = std::clamp<int64_t>(src, 0, p.in[d] - 1);
      tap.w[k] = static_cast<float>(w);
      sum += w;
    }
    if (p.exclude_outside && sum != 0) {
      for (float& w : tap.w) w = static_cast<float>(w / sum);
    }
    taps.push_back(tap);
  }
  return taps;
}

// Separable: each plane's rows are resampled along W into a scratch of IH x OW, then each output
// row is four scratch rows weighed.
void run_cubic(const ResizeParams& p, const Tensor& x, Tensor& y, int threads) {
  const Planes q = planes_of(p);
  const auto th =
      q.two_d ? cubic_taps(p, q.dh) : std::vector<CubicTap>{{{0, 0, 0, 0}, {0, 1, 0, 0}}};
  const auto tw = cubic_taps(p, q.dw);
  const float* src = x.data<float>();
  float* dst = y.data<float>();
  parallel_for(q.planes, 1, threads, [&](int64_t b, int64_t e) {
    std::vector<float> rows(static_cast<size_t>(q.IH * q.OW));
    for (int64_t pl = b; pl < e; ++pl) {
      const float* xp = src + pl * q.IH * q.IW;
      for (int64_t ih = 0; ih < q.IH; ++ih) {
        const float* in = xp + ih * q.IW;
        float* out = rows.data() + ih * q.OW;
        for (int64_t ow = 0; ow < q.OW; ++ow) {
          const CubicTap& t = tw[static_cast<size_t>(ow)];
          out[ow] =
              t.w[0] * in[t.i[0]] + t.w[1] * in[t.i[1]] + t.w[2] * in[t.i[2]] + t.w[3] * in[t.i[3]];
        }
      }
      float* yp = dst + pl * q.OH * q.OW;
      for (int64_t oh = 0; oh < q.OH; ++oh) {
        const CubicTap& t = th[static_cast<size_t>(oh)];
        const float* r0 = rows.data() + t.i[0] * q.OW;
        const float* r1 = rows.data() + t.i[1] * q.OW;
        const float* r2 = rows.data() + t.i[2] * q.OW;
        const float* r3 = rows.data() + t.i[3] * q.OW;
        float* out = yp + oh * q.OW;
        for (int64_t ow = 0; ow < q.OW; ++ow) {
          out[ow] = t.w[0] * r0[ow] + t.w[1] * r1[ow] + t.w[2] * r2[ow] + t.w[3] * r3[ow];
        }
      }
    }
  });
}

Expected<std::unique_ptr<Kernel>> make_resize(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ResizeParams p, parse_resize(ctx));
  return make_kernel("reference", std::move(p),
                     [](const ResizeParams& q, const KernelArgs& a, const ExecContext& exec) {
                       if (numel(q.out) == 0) return Status::ok();
                       if (q.cubic) {
                         run_cubic(q, *a.inputs[0], *a.outputs[0], exec.num_threads);
                       } else if (q.linear) {
                         run_linear(q, *a.inputs[0], *a.outputs[0], exec.num_threads);
                       } else {
                         run_nearest(q, *a.inputs[0], *a.outputs[0], exec.num_threads);
                       }
                       return Status::ok();
                     });
}

}  // namespace

namespace ops {

Expected<ResizeGeometry> resize_geometry(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ResizeParams p, parse_resize(ctx));
  if (p.cubic) return unsupported("cubic Resize (four taps per axis) on this backend");
  ResizeGeometry g;
  g.linear = p.linear;
  g.in = p.in;
  g.out = p.out;
  const size_t r = p.in.size();
  for (size_t d = 0; d < r; ++d) {
    ResizeTaps t;
    const bool linear_dim = p.linear && d + 2 >= r;
    if (linear_dim) {
      for (const LinearTap& lt : linear_taps(p, d)) {
        t.i0.push_back(lt.i0);
        t.i1.push_back(lt.i1);
        t.w1.push_back(lt.w1);
      }
    } else if (p.linear) {  // linear mode leaves the leading dims as they are
      for (int64_t i = 0; i < p.out[d]; ++i) {
        t.i0.push_back(i);
        t.i1.push_back(i);
        t.w1.push_back(0.0f);
      }
    } else {
      for (int64_t i = 0; i < p.out[d]; ++i) {
        const int64_t k = nearest_index(p, d, i);
        t.i0.push_back(k);
        t.i1.push_back(k);
        t.w1.push_back(0.0f);
      }
    }
    g.axes.push_back(std::move(t));
  }
  return g;
}

}  // namespace ops

void register_op_resize(OpRegistry& r) {
  r.add({"Resize",
         1,
         4,
         1,
         1,
         infer_resize,
         make_resize,
         {1, 2, 3},
         attrs({"antialias", "axes", "coordinate_transformation_mode", "cubic_coeff_a",
                "exclude_outside", "keep_aspect_ratio_policy", "mode", "nearest_mode"},
               {{"extrapolation_value", "read only by tf_crop_and_resize, which is declined"}})});
}

}  // namespace tern
