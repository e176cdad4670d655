// GridSample: attributes, shape inference and the reference kernel (any spatial rank, every float
// type; each output element on its own: every tap of every dim read through the padding mode,
// weights and sums in double). The CPU backend's kernel (backends/cpu/kernels/grid_sample.cpp)
// computes a point's taps once for all channels.
#include "ops/grid_sample.h"

#include <array>
#include <vector>

#include "ops/common/op_utils.h"

namespace tern::ops {

Expected<GridSampleParams> parse_grid_sample(const OpContext& ctx) {
  GridSampleParams p;
  const Attributes& at = ctx.attrs();
  // Opset 20 renamed bilinear and bicubic to linear and cubic (the N-d names); both are taken.
  TERN_ASSIGN_OR_RETURN(std::string mode,
                        at.get_string("mode", ctx.opset >= 20 ? "linear" : "bilinear"));
  if (mode == "linear" || mode == "bilinear") {
    p.mode = GridMode::kLinear;
  } else if (mode == "nearest") {
    p.mode = GridMode::kNearest;
  } else if (mode == "cubic" || mode == "bicubic") {
    p.mode = GridMode::kCubic;
  } else {
    return invalid_model("mode '", mode, "' is not linear, nearest or cubic");
  }
  TERN_ASSIGN_OR_RETURN(std::string padding, at.get_string("padding_mode", "zeros"));
  if (padding == "zeros") {
    p.padding = GridPadding::kZeros;
  } else if (padding == "border") {
    p.padding = GridPadding::kBorder;
  } else if (padding == "reflection") {
    p.padding = GridPadding::kReflection;
  } else {
    return invalid_model("padding_mode '", padding, "' is not zeros, border or reflection");
  }
  TERN_ASSIGN_OR_RETURN(int64_t align, at.get_int("align_corners", 0));
  p.align_corners = align != 0;

  const Shape& x = ctx.inputs[0].shape;
  const Shape& grid = ctx.inputs[1].shape;
  const auto spatial = static_cast<int64_t>(x.size()) - 2;
  if (spatial < 1 || grid.size() != x.size() || grid[0] != x[0] || grid.back() != spatial) {
    return invalid_argument(
        "X must be [N, C, spatial...] and grid [N, out spatial..., r] of X's rank, with r "
        "the number of spatial dims; got X ",
        shape_str(x), ", grid ", shape_str(grid));
  }
  for (size_t d = 2; d < x.size(); ++d) {
    if (x[d] < 1)
      return invalid_argument("X's spatial dims must be at least 1; got ", shape_str(x));
  }
  if (!dtype_is_float(ctx.inputs[0].dtype)) return dtype_error(ctx, 0, "float types");
  if (!dtype_is_float(ctx.inputs[1].dtype)) return dtype_error(ctx, 1, "float types");
  p.batch = x[0];
  p.channels = x[1];
  p.in_dims.assign(x.begin() + 2, x.end());
  p.out_dims.assign(grid.begin() + 1, grid.end() - 1);
  return p;
}

namespace {

Status infer_grid_sample(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(GridSampleParams p, parse_grid_sample(ctx));
  Shape out = {p.batch, p.channels};
  out.insert(out.end(), p.out_dims.begin(), p.out_dims.end());
  ctx.set_output(0, ctx.inputs[0].dtype, out);
  return Status::ok();
}

// One dim's taps for source coordinate x: the first tap's index and each tap's weight.
int64_t reference_taps(double x, GridMode mode, double w[4]) {
  const double f = std::floor(x);
  switch (mode) {
    case GridMode::kNearest:
      w[0] = 1;
      return static_cast<int64_t>(x);
    case GridMode::kLinear:
      w[0] = f + 1 - x;
      w[1] = x - f;
      return static_cast<int64_t>(f);
    case GridMode::kCubic:
      grid_cubic_weights(x - f, w);
      return static_cast<int64_t>(f) - 1;
  }
  return 0;
}

Status run_reference(const GridSampleParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& X = *a.inputs[0];
  const Tensor& G = *a.inputs[1];
  Tensor& Y = *a.outputs[0];
  const size_t nd = p.in_dims.size();
  const int64_t plane = numel(p.in_dims), points = numel(p.out_dims);
  const int taps = grid_taps(p.mode);
  int64_t combos = 1;
  for (size_t d = 0; d < nd; ++d) combos *= taps;
  std::vector<int64_t> first(nd);
  std::vector<std::array<double, 4>> weight(nd);
  std::vector<double> out(static_cast<size_t>(Y.numel()));
  for (int64_t n = 0; n < p.batch; ++n) {
    for (int64_t pt = 0; pt < points; ++pt) {
      for (size_t d = 0; d < nd; ++d) {
        // grid lists the coordinates innermost dim first.
        const double g = G.float_at((n * points + pt) * static_cast<int64_t>(nd) +
                                    static_cast<int64_t>(nd - 1 - d));
        const double x = G.dtype() == DType::kFloat64
                             ? grid_source_coord<double>(g, p.in_dims[d], p)
                             : grid_source_coord<float>(static_cast<float>(g), p.in_dims[d], p);
        first[d] = reference_taps(x, p.mode, weight[d].data());
      }
      for (int64_t c = 0; c < p.channels; ++c) {
        const int64_t base = (n * p.channels + c) * plane;
        double acc = 0;
        for (int64_t k = 0; k < combos; ++k) {
          int64_t offset = 0;
          double w = 1;
          bool inside = true;
          for (size_t d = 0, rest = static_cast<size_t>(k); d < nd; ++d) {
            const size_t j = rest % static_cast<size_t>(taps);
            rest /= static_cast<size_t>(taps);
            bool in = true;
            const int64_t i =
                grid_tap_index(first[d] + static_cast<int64_t>(j), p.in_dims[d], p, &in);
            inside = inside && in;
            offset = offset * p.in_dims[d] + i;
            w *= weight[d][j];
          }
          if (inside) acc += w * X.float_at(base + offset);
        }
        out[static_cast<size_t>((n * p.channels + c) * points + pt)] = acc;
      }
    }
  }
  visit_any_float(Y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < out.size(); ++i) Y.data<T>()[i] = from_double<T>(out[i]);
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_grid_sample(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(require_plain_layout(ctx));
  TERN_ASSIGN_OR_RETURN(GridSampleParams p, parse_grid_sample(ctx));
  return make_kernel("reference", std::move(p), run_reference);
}

}  // namespace
}  // namespace tern::ops

namespace tern {

TERN_REGISTRATION void register_op_grid_sample(OpRegistry& r) {
  r.add({"GridSample",
         2,
         2,
         1,
         1,
         ops::infer_grid_sample,
         ops::make_grid_sample,
         {},
         attrs("align_corners, mode, padding_mode")});
}

}  // namespace tern
