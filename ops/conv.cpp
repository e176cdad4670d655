#include "ops/conv.h"

#include "core/parallel.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace ops {

Expected<ConvParams> parse_conv_window(const OpContext& ctx) {
  ConvParams p;
  p.x = ctx.inputs[0].shape;
  p.w = ctx.inputs[1].shape;
  if (p.w.size() != p.x.size()) {
    return invalid_argument("weight '", ctx.input_names[1], "' ", shape_str(p.w), " and input '",
                            ctx.input_names[0], "' ", shape_str(p.x), " must have the same rank");
  }
  TERN_ASSIGN_OR_RETURN(p.group, ctx.attrs().get_int("group", 1));
  if (p.group <= 0 || p.x.size() < 3) return invalid_model("group must be positive, rank >= 3");
  if (p.x[1] != p.w[1] * p.group || p.w[0] % p.group != 0) {
    return invalid_argument("input '", ctx.input_names[0], "' has ", p.x[1],
                            " channels but weight '", ctx.input_names[1], "' ", shape_str(p.w),
                            " with group ", p.group, " expects ", p.w[1] * p.group);
  }
  std::vector<int64_t> kernel(p.w.begin() + 2, p.w.end());
  TERN_ASSIGN_OR_RETURN(auto attr_kernel, ctx.attrs().get_ints("kernel_shape", kernel));
  if (attr_kernel != kernel) {
    return invalid_model("kernel_shape ", shape_str(attr_kernel), " does not match weight '",
                         ctx.input_names[1], "' ", shape_str(p.w));
  }
  TERN_ASSIGN_OR_RETURN(p.win, forward_window(ctx.attrs(), p.x, kernel, false));
  if (p.win.spatial > 3) return unsupported("Conv with ", p.win.spatial, " spatial dims");
  p.y = {p.x[0], p.w[0]};
  p.y.insert(p.y.end(), p.win.out.begin(), p.win.out.end());
  return p;
}

Expected<ConvParams> parse_conv(const OpContext& ctx, bool any_float) {
  TERN_RETURN_IF_ERROR(require_f32_or_half(ctx, 0, any_float));
  TERN_RETURN_IF_ERROR(require_same_dtype(ctx, 0, 1));
  TERN_ASSIGN_OR_RETURN(ConvParams p, parse_conv_window(ctx));
  p.has_bias = ctx.has_input(2);
  if (p.has_bias && ctx.inputs[2].shape != Shape{p.w[0]}) {
    return invalid_argument("bias '", ctx.input_names[2], "' must have shape [", p.w[0], "], got ",
                            shape_str(ctx.inputs[2].shape));
  }
  return p;
}

void conv_reference(const ConvParams& p, const float* x, const float* w, const float* b, float* y) {
  conv_reference_loops(
      p, [&](int64_t m) { return b ? static_cast<double>(b[m]) : 0.0; },
      [&](int64_t xi, int64_t wi) { return static_cast<double>(x[xi]) * w[wi]; },
      [&](int64_t at, double acc) { y[at] = static_cast<float>(acc); });
}

}  // namespace ops

namespace {

Status infer_conv(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::ConvParams p, ops::parse_conv(ctx, true));
  ctx.set_output(0, ctx.inputs[0].dtype, p.y);
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_conv_reference(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  TERN_ASSIGN_OR_RETURN(ops::ConvParams p, ops::parse_conv(ctx));
  return make_kernel("reference", std::move(p),
                     [](const ops::ConvParams& q, const KernelArgs& a, const ExecContext&) {
                       const float* b = q.has_bias ? a.inputs[2]->data<float>() : nullptr;
                       ops::conv_reference(q, a.inputs[0]->data<float>(),
                                           a.inputs[1]->data<float>(), b,
                                           a.outputs[0]->data<float>());
                       return Status::ok();
                     });
}

}  // namespace

TERN_REGISTRATION void register_op_conv(OpRegistry& r) {
  r.add({"Conv",
         2,
         3,
         1,
         1,
         infer_conv,
         make_conv_reference,
         {},
         attrs("auto_pad, dilations, group, kernel_shape, pads, strides")});
}

}  // namespace tern
