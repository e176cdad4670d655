// ConvInteger (opset 10): Conv of (x - x_zero_point) by (w - w_zero_point) in exact integer
// arithmetic, int32 output. x and w are int8 or uint8 (each its own); x's zero point is one
// value, w's one value or one per output channel.
// QLinearConv (opset 10): the same sums plus an int32 bias B, requantised:
// y = saturate(round_half_even(acc * x_scale * w_scale[m] / y_scale) + y_zero_point), y of
// y_zero_point's type (int8 / uint8); w_scale one value or one per output channel. The optimizer
// also makes QLinearConvs of QDQ convolutions (core/opt/qdq_fusion.cpp), and FusedQLinearConv, an
// internal op: QLinearConv with an "activation" (Relu) applied before the rounding.
// Reference kernels: the geometry and loop nest are Conv's (ops/conv.h), the sums int64; the CPU
// backend runs oneDNN's int8 convolution where it can (backends/cpu/onednn/onednn_qconv.cpp), and
// Tern's int8 GEMM (backends/cpu/kernels/qlinear_conv.cpp, ConvInteger's too).
#include <cmath>

#include "ops/common/op_utils.h"
#include "ops/conv.h"
#include "ops/conv_integer.h"

namespace tern {
namespace {

bool int8_type(DType d) {
  return d == DType::kInt8 || d == DType::kUInt8;
}

// Input `i` of ctx, when present, must be one value, or (per_channel) one value or [m] (a
// scale or zero point); `same_as`: the input whose type it must have (-1: float32).
Status check_quant_param(const OpContext& ctx, size_t i, int same_as, int64_t per_channel) {
  if (!ctx.has_input(i)) return Status::ok();
  if (same_as >= 0) {
    TERN_RETURN_IF_ERROR(ops::require_same_dtype(ctx, i, static_cast<size_t>(same_as)));
  } else if (ctx.inputs[i].dtype != DType::kFloat32) {
    return ops::dtype_error(ctx, i, "float32");
  }
  const Shape& z = ctx.inputs[i].shape;
  const int64_t n = numel(z);
  if (z.size() > 1 || (n != 1 && (per_channel == 0 || n != per_channel))) {
    return invalid_argument("input ", i, " '", ctx.input_names[i], "' must be one value",
                            per_channel ? str_cat(" or [", per_channel, "]") : std::string(),
                            ", got ", shape_str(z));
  }
  return Status::ok();
}

}  // namespace

namespace ops {

Expected<QConvParams> parse_qconv(const OpContext& ctx) {
  QConvParams p;
  p.linear = ctx.node->op_type == "QLinearConv" || ctx.node->op_type == "FusedQLinearConv";
  // Input positions: ConvInteger (x, w, x_zero, w_zero); QLinearConv (x, x_scale, x_zero, w,
  // w_scale, w_zero, y_scale, y_zero, B).
  const size_t xi = 0, wi = p.linear ? 3 : 1;
  p.x_type = ctx.inputs[xi].dtype;
  p.w_type = ctx.inputs[wi].dtype;
  if (!int8_type(p.x_type)) return ops::dtype_error(ctx, xi, "int8 or uint8");
  if (!int8_type(p.w_type)) return ops::dtype_error(ctx, wi, "int8 or uint8");
  if (p.linear) {
    // parse_conv_window reads x and w at 0 and 1: give it a context of those two.
    OpContext two = ctx;
    two.inputs = {ctx.inputs[0], ctx.inputs[3]};
    two.input_names = {ctx.input_names[0], ctx.input_names[3]};
    TERN_ASSIGN_OR_RETURN(p.conv, ops::parse_conv_window(two));
  } else {
    TERN_ASSIGN_OR_RETURN(p.conv, ops::parse_conv_window(ctx));
  }
  const int64_t m = p.conv.w[0];
  if (m == 0) {
    return invalid_argument("weight '", ctx.input_names[wi], "' ", shape_str(p.conv.w),
                            " has no output channels");
  }
  if (p.linear) {
    TERN_RETURN_IF_ERROR(check_quant_param(ctx, 1, -1, 0));  // x_scale
    TERN_RETURN_IF_ERROR(check_quant_param(ctx, 2, 0, 0));   // x_zero_point
    TERN_RETURN_IF_ERROR(check_quant_param(ctx, 4, -1, m));  // w_scale
    TERN_RETURN_IF_ERROR(check_quant_param(ctx, 5, 3, m));   // w_zero_point
    TERN_RETURN_IF_ERROR(check_quant_param(ctx, 6, -1, 0));  // y_scale
    if (!ctx.has_input(7) || !int8_type(ctx.inputs[7].dtype)) {
      return ops::dtype_error(ctx, 7, "int8 or uint8 (y_zero_point gives y's type)");
    }
    TERN_RETURN_IF_ERROR(check_quant_param(ctx, 7, 7, 0));  // y_zero_point
    for (size_t i : {size_t{1}, size_t{2}, size_t{4}, size_t{6}}) {
      if (!ctx.has_input(i)) {
        return invalid_model(ctx.where, ": QLinearConv needs input ", i,
                             " (a scale or zero point)");
      }
    }
    if (ctx.has_input(8)) {
      if (ctx.inputs[8].dtype != DType::kInt32) return ops::dtype_error(ctx, 8, "int32");
      if (ctx.inputs[8].shape != Shape{m}) {
        return invalid_argument("bias '", ctx.input_names[8], "' must be [", m, "], got ",
                                shape_str(ctx.inputs[8].shape));
      }
    }
    p.y_type = ctx.inputs[7].dtype;
    std::string act;
    if (ctx.node->op_type == "FusedQLinearConv") {
      TERN_ASSIGN_OR_RETURN(act, ctx.attrs().get_string("activation", ""));
    }
    if (act == "Relu") {
      p.relu = true;
    } else if (!act.empty()) {
      return invalid_model(ctx.where, ": QLinearConv: unknown activation '", act, "'");
    }
  } else {
    TERN_RETURN_IF_ERROR(check_quant_param(ctx, 2, 0, 0));
    TERN_RETURN_IF_ERROR(check_quant_param(ctx, 3, 1, m));
    p.y_type = DType::kInt32;
  }
  return p;
}

}  // namespace ops

namespace {

using ops::QConvParams;

Status infer_qconv(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(QConvParams p, ops::parse_qconv(ctx));
  ctx.set_output(0, p.y_type, p.conv.y);
  return Status::ok();
}

// The elements of an int8 or uint8 tensor as int64.
std::vector<int64_t> widened(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.int_at(i);
  return v;
}

// The value of one-element-or-per-channel tensor t for channel m (0 when t is absent).
double channel_value(const Tensor* t, int64_t m) {
  if (!t) return 0;
  return t->numel() == 1 ? t->float_at(0) : t->float_at(m);
}

Status run_qconv(const QConvParams& p, const KernelArgs& a, const ExecContext&) {
  auto in = [&](size_t i) { return i < a.inputs.size() ? a.inputs[i] : nullptr; };
  const size_t wi = p.linear ? 3 : 1;
  const std::vector<int64_t> x = widened(*a.inputs[0]), w = widened(*a.inputs[wi]);
  const Tensor* xz = in(2);
  const Tensor* wz = in(p.linear ? 5 : 3);
  const int64_t x_zero = xz ? xz->int_at(0) : 0;
  const int64_t cg_taps = numel(p.conv.w) / p.conv.w[0];  // weights per output channel
  const Tensor* bias = p.linear ? in(8) : nullptr;
  Tensor& y = *a.outputs[0];
  int64_t lo = 0, hi = 0;
  if (p.linear) {
    lo = p.y_type == DType::kInt8 ? -128 : 0;
    hi = p.y_type == DType::kInt8 ? 127 : 255;
  }
  const int64_t spatial = numel(Shape(p.conv.y.begin() + 2, p.conv.y.end()));
  ops::conv_reference_loops(
      p.conv, [&](int64_t m) { return bias ? bias->int_at(m) : int64_t{0}; },
      [&](int64_t xi, int64_t wi2) {
        const int64_t m = wi2 / cg_taps;
        return (x[static_cast<size_t>(xi)] - x_zero) *
               (w[static_cast<size_t>(wi2)] - static_cast<int64_t>(channel_value(wz, m)));
      },
      [&](int64_t at, int64_t acc) {
        if (!p.linear) {
          y.data<int32_t>()[at] = static_cast<int32_t>(acc);
          return;
        }
        const int64_t m = (at / spatial) % p.conv.y[1];
        double v = static_cast<double>(acc) * a.inputs[1]->float_at(0) * channel_value(in(4), m) /
                   a.inputs[6]->float_at(0);
        if (p.relu) v = std::max(v, 0.0);
        const double q = std::nearbyint(v) + static_cast<double>(a.inputs[7]->int_at(0));
        const auto r =
            static_cast<int64_t>(std::clamp(q, static_cast<double>(lo), static_cast<double>(hi)));
        if (p.y_type == DType::kInt8) {
          y.data<int8_t>()[at] = static_cast<int8_t>(r);
        } else {
          y.data<uint8_t>()[at] = static_cast<uint8_t>(r);
        }
      });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_qconv(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  TERN_ASSIGN_OR_RETURN(QConvParams p, ops::parse_qconv(ctx));
  return make_kernel("reference", std::move(p), run_qconv);
}

}  // namespace

TERN_REGISTRATION void register_op_conv_integer(OpRegistry& r) {
  const char* window = "auto_pad, dilations, group, kernel_shape, pads, strides";
  r.add({"ConvInteger", 2, 4, 1, 1, infer_qconv, make_qconv, {}, attrs(window)});
  r.add({"QLinearConv", 8, 9, 1, 1, infer_qconv, make_qconv, {}, attrs(window)});
  // Tern's own, made by QDQ fusion: QLinearConv with an "activation" (Relu) before rounding.
  r.add({"FusedQLinearConv",
         8,
         9,
         1,
         1,
         infer_qconv,
         make_qconv,
         {},
         attrs("activation, auto_pad, dilations, group, kernel_shape, pads, strides")});
}

}  // namespace tern
