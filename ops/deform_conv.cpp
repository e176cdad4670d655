// DeformConv: attributes, shape checks, shape inference and the reference kernel (each output
// element summed tap by tap in double, every sample interpolated on its own). The CPU backend's
// kernel (backends/cpu/kernels/deform_conv.cpp) samples into columns and multiplies by GEMM.
#include "ops/deform_conv.h"

#include <cmath>

#include "ops/common/op_utils.h"
#include "ops/common/window.h"

namespace tern::ops {

Expected<DeformConvParams> parse_deform_conv(const OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  const Shape& wt = ctx.inputs[1].shape;
  const Shape& off = ctx.inputs[2].shape;
  if (!dtype_is_float(ctx.inputs[0].dtype)) return dtype_error(ctx, 0, "float types");
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    if (ctx.has_input(i)) TERN_RETURN_IF_ERROR(require_same_dtype(ctx, 0, i));
  }
  if (x.size() < 3) {
    return invalid_argument("input '", ctx.input_names[0], "' must be [N, C, spatial...], got ",
                            shape_str(x));
  }
  if (x.size() != 4) return unsupported("DeformConv over ", x.size() - 2, " spatial dims (2 only)");
  DeformConvParams p;
  p.dtype = ctx.inputs[0].dtype;
  TERN_ASSIGN_OR_RETURN(p.group, ctx.attrs().get_int("group", 1));
  TERN_ASSIGN_OR_RETURN(p.offset_group, ctx.attrs().get_int("offset_group", 1));
  if (p.group <= 0 || p.offset_group <= 0 || p.group > std::max<int64_t>(x[1], 1) ||
      p.offset_group > std::max<int64_t>(x[1], 1)) {
    return invalid_model("group and offset_group must be positive and at most the channels");
  }
  if (wt.size() != 4 || x[1] != wt[1] * p.group || wt[0] % p.group != 0) {
    return invalid_argument("weight '", ctx.input_names[1], "' ", shape_str(wt), " with group ",
                            p.group, " does not fit input '", ctx.input_names[0], "' ",
                            shape_str(x));
  }
  if (x[1] % p.offset_group != 0) {
    return invalid_argument("input '", ctx.input_names[0], "' has ", x[1],
                            " channels, not a multiple of offset_group ", p.offset_group);
  }
  const std::vector<int64_t> kernel(wt.begin() + 2, wt.end());
  TERN_ASSIGN_OR_RETURN(auto attr_kernel, ctx.attrs().get_ints("kernel_shape", kernel));
  if (attr_kernel != kernel) {
    return invalid_model("kernel_shape ", shape_str(attr_kernel), " does not match weight '",
                         ctx.input_names[1], "' ", shape_str(wt));
  }
  TERN_ASSIGN_OR_RETURN(Window win, forward_window(ctx.attrs(), x, kernel, false));
  p.n = x[0], p.c = x[1], p.h = x[2], p.w = x[3];
  p.m = wt[0], p.kh = wt[2], p.kw = wt[3];
  p.oh = win.out[0], p.ow = win.out[1];
  p.stride_h = win.strides[0], p.stride_w = win.strides[1];
  p.pad_h = win.pads_begin[0], p.pad_w = win.pads_begin[1];
  p.dil_h = win.dilations[0], p.dil_w = win.dilations[1];
  const int64_t taps = p.offset_group * p.kh * p.kw;
  if (off != Shape{p.n, taps * 2, p.oh, p.ow}) {
    return invalid_argument("offset '", ctx.input_names[2], "' must be ",
                            shape_str(Shape{p.n, taps * 2, p.oh, p.ow}), ", got ", shape_str(off));
  }
  p.has_bias = ctx.has_input(3);
  if (p.has_bias && ctx.inputs[3].shape != Shape{p.m}) {
    return invalid_argument("bias '", ctx.input_names[3], "' must be [", p.m, "], got ",
                            shape_str(ctx.inputs[3].shape));
  }
  p.has_mask = ctx.has_input(4);
  if (p.has_mask && ctx.inputs[4].shape != Shape{p.n, taps, p.oh, p.ow}) {
    return invalid_argument("mask '", ctx.input_names[4], "' must be ",
                            shape_str(Shape{p.n, taps, p.oh, p.ow}), ", got ",
                            shape_str(ctx.inputs[4].shape));
  }
  return p;
}

namespace {

// Bilinear sample of plane (h x w) at (y, x), each neighbour outside the image counting 0
// (GridSample with align_corners and zero padding, as ONNX defines DeformConv).
double sample(const Tensor& t, int64_t base, int64_t h, int64_t w, double y, double x) {
  if (!(y > -1.0 && y < static_cast<double>(h) && x > -1.0 && x < static_cast<double>(w))) {
    return 0.0;  // no neighbour inside (also NaN offsets)
  }
  const double fy = std::floor(y), fx = std::floor(x);
  const auto y0 = static_cast<int64_t>(fy), x0 = static_cast<int64_t>(fx);
  const double ly = y - fy, lx = x - fx;
  double acc = 0.0;
  for (int64_t dy = 0; dy < 2; ++dy) {
    for (int64_t dx = 0; dx < 2; ++dx) {
      const int64_t yy = y0 + dy, xx = x0 + dx;
      if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
      const double wgt = (dy ? ly : 1.0 - ly) * (dx ? lx : 1.0 - lx);
      acc += wgt * t.float_at(base + yy * w + xx);
    }
  }
  return acc;
}

Status run_reference(const DeformConvParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& X = *a.inputs[0];
  const Tensor& W = *a.inputs[1];
  const Tensor& O = *a.inputs[2];
  const Tensor* B = p.has_bias ? a.inputs[3] : nullptr;
  const Tensor* M = p.has_mask ? a.inputs[4] : nullptr;
  Tensor& Y = *a.outputs[0];
  const int64_t cg = p.c / p.group, mg = p.m / p.group, c_per_og = p.c / p.offset_group;
  const int64_t taps = p.kh * p.kw, pixels = p.oh * p.ow;
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t m = 0; m < p.m; ++m) {
      const int64_t g = m / mg;
      for (int64_t oy = 0; oy < p.oh; ++oy) {
        for (int64_t ox = 0; ox < p.ow; ++ox) {
          const int64_t pix = oy * p.ow + ox;
          double acc = B ? B->float_at(m) : 0.0;
          for (int64_t ci = 0; ci < cg; ++ci) {
            const int64_t c = g * cg + ci, og = c / c_per_og;
            for (int64_t i = 0; i < p.kh; ++i) {
              for (int64_t j = 0; j < p.kw; ++j) {
                const int64_t tap = og * taps + i * p.kw + j;  // offset/mask channel
                const double dy =
                    O.float_at(((n * p.offset_group * taps + tap) * 2) * pixels + pix);
                const double dx =
                    O.float_at(((n * p.offset_group * taps + tap) * 2 + 1) * pixels + pix);
                const double y = static_cast<double>(oy * p.stride_h - p.pad_h + i * p.dil_h) + dy;
                const double x = static_cast<double>(ox * p.stride_w - p.pad_w + j * p.dil_w) + dx;
                double v = sample(X, (n * p.c + c) * p.h * p.w, p.h, p.w, y, x);
                if (M) v *= M->float_at((n * p.offset_group * taps + tap) * pixels + pix);
                acc += v * W.float_at(((m * cg + ci) * p.kh + i) * p.kw + j);
              }
            }
          }
          const int64_t at = (n * p.m + m) * pixels + pix;
          visit_any_float(Y.dtype(), [&](auto tag) {
            using T = decltype(tag);
            Y.data<T>()[at] = from_double<T>(acc);
          });
        }
      }
    }
  }
  return Status::ok();
}

Status infer_deform_conv(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(DeformConvParams p, parse_deform_conv(ctx));
  ctx.set_output(0, p.dtype, {p.n, p.m, p.oh, p.ow});
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_deform_conv(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(require_plain_layout(ctx));
  TERN_ASSIGN_OR_RETURN(DeformConvParams p, parse_deform_conv(ctx));
  return make_kernel("reference", p, run_reference);
}

}  // namespace
}  // namespace tern::ops

namespace tern {

TERN_REGISTRATION void register_op_deform_conv(OpRegistry& r) {
  r.add({"DeformConv",
         3,
         5,
         1,
         1,
         ops::infer_deform_conv,
         ops::make_deform_conv,
         {},
         attrs("dilations, group, kernel_shape, offset_group, pads, strides")});
}

}  // namespace tern
