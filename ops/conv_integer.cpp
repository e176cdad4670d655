// ConvInteger (opset 10): Conv of (x - x_zero_point) by (w - w_zero_point) in exact integer
// arithmetic, int32 output. x and w are int8 or uint8 (each its own); x's zero point is one
// value, w's one value or one per output channel. Reference only: the geometry and loop nest are
// Conv's (ops/conv.h), the sums int64.
#include "ops/common/op_utils.h"
#include "ops/conv.h"

namespace tern {
namespace {

struct ConvIntegerParams {
  ops::ConvParams conv;
  DType x_type, w_type;
};

bool int8_type(DType d) {
  return d == DType::kInt8 || d == DType::kUInt8;
}

Expected<ConvIntegerParams> parse_conv_integer(const OpContext& ctx) {
  ConvIntegerParams p;
  p.x_type = ctx.inputs[0].dtype;
  p.w_type = ctx.inputs[1].dtype;
  if (!int8_type(p.x_type)) return ops::dtype_error(ctx, 0, "int8 or uint8");
  if (!int8_type(p.w_type)) return ops::dtype_error(ctx, 1, "int8 or uint8");
  TERN_ASSIGN_OR_RETURN(p.conv, ops::parse_conv_window(ctx));
  if (p.conv.w[0] == 0) {
    return invalid_argument("weight '", ctx.input_names[1], "' ", shape_str(p.conv.w),
                            " has no output channels");
  }
  if (ctx.has_input(2)) {
    TERN_RETURN_IF_ERROR(ops::require_same_dtype(ctx, 2, 0));
    if (numel(ctx.inputs[2].shape) != 1 || ctx.inputs[2].shape.size() > 1) {
      return invalid_argument("x_zero_point '", ctx.input_names[2], "' must be one value, got ",
                              shape_str(ctx.inputs[2].shape));
    }
  }
  if (ctx.has_input(3)) {
    TERN_RETURN_IF_ERROR(ops::require_same_dtype(ctx, 3, 1));
    const Shape& z = ctx.inputs[3].shape;
    if (z.size() > 1 || (numel(z) != 1 && numel(z) != p.conv.w[0])) {
      return invalid_argument("w_zero_point '", ctx.input_names[3], "' must be one value or [",
                              p.conv.w[0], "], got ", shape_str(z));
    }
  }
  return p;
}

Status infer_conv_integer(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ConvIntegerParams p, parse_conv_integer(ctx));
  ctx.set_output(0, DType::kInt32, p.conv.y);
  return Status::ok();
}

// The elements of an int8 or uint8 tensor as int64.
std::vector<int64_t> widened(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.int_at(i);
  return v;
}

Status run_conv_integer(const ConvIntegerParams& p, const KernelArgs& a, const ExecContext&) {
  const std::vector<int64_t> x = widened(*a.inputs[0]), w = widened(*a.inputs[1]);
  const Tensor* xz = a.inputs.size() > 2 ? a.inputs[2] : nullptr;
  const Tensor* wz = a.inputs.size() > 3 ? a.inputs[3] : nullptr;
  const int64_t x_zero = xz ? xz->int_at(0) : 0;
  const std::vector<int64_t> w_zero = wz ? widened(*wz) : std::vector<int64_t>{0};
  const int64_t cg_taps = numel(p.conv.w) / p.conv.w[0];  // weights per output channel
  int32_t* y = a.outputs[0]->data<int32_t>();
  ops::conv_reference_loops(
      p.conv, [](int64_t) { return int64_t{0}; },
      [&](int64_t xi, int64_t wi) {
        const int64_t m = wi / cg_taps;
        const int64_t wzv = w_zero.size() == 1 ? w_zero[0] : w_zero[static_cast<size_t>(m)];
        return (x[static_cast<size_t>(xi)] - x_zero) * (w[static_cast<size_t>(wi)] - wzv);
      },
      [&](int64_t at, int64_t acc) { y[at] = static_cast<int32_t>(acc); });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_conv_integer(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  TERN_ASSIGN_OR_RETURN(ConvIntegerParams p, parse_conv_integer(ctx));
  return make_kernel("reference", std::move(p), run_conv_integer);
}

}  // namespace

void register_op_conv_integer(OpRegistry& r) {
  r.add({"ConvInteger",
         2,
         4,
         1,
         1,
         infer_conv_integer,
         make_conv_integer,
         {},
         attrs({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"})});
}

}  // namespace tern
