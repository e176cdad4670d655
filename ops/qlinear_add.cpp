// QLinearAdd (Tern's own op, made by QDQ fusion, core/opt/qdq_fusion.cpp): the QDQ addition
//   QuantizeLinear(DequantizeLinear(A) + DequantizeLinear(B) [-> Relu], C_scale, C_zero_point)
// as one node, with inputs (A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale,
// C_zero_point) as ONNX Runtime's contrib op of that name orders them. A is uint8/int8; B is
// uint8/int8, or float32 with no scale and zero point (a constant bias added as it is). Scales and
// zero points are per tensor. Numpy broadcasting. The arithmetic is the unfused graph's, in the
// same precision: each operand dequantised to float32, the float32 sum (Relu with "activation"),
// divided by C_scale in float32, rounded half to even, the zero point added, saturated; so the
// fused node equals the three (or four) nodes bit for bit.
#include <cmath>

#include "ops/common/op_utils.h"

namespace tern {
namespace {

bool int8_type(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8;
}

Status check_scalar(const OpContext& ctx, size_t i, bool zero_point) {
  if (!ctx.has_input(i)) return Status::ok();
  const TensorInfo& t = ctx.inputs[i];
  if (numel(t.shape) != 1) {
    return invalid_model(ctx.where, ": input ", i, " ('", ctx.input_names[i],
                         "') must hold one value, not ", shape_str(t.shape));
  }
  if (!zero_point && t.dtype != DType::kFloat32) return ops::dtype_error(ctx, i, "float32");
  return Status::ok();
}

Status infer_qadd(OpContext& ctx) {
  if (!int8_type(ctx.inputs[0].dtype)) return ops::dtype_error(ctx, 0, "uint8 or int8");
  const DType bt = ctx.inputs[3].dtype;
  const bool b_float = bt == DType::kFloat32;
  if (!int8_type(bt) && !b_float) return ops::dtype_error(ctx, 3, "uint8, int8 or float32");
  if (b_float && (ctx.has_input(4) || ctx.has_input(5))) {
    return invalid_model(ctx.where, ": a float32 B takes no scale or zero point");
  }
  if (!ctx.has_input(1)) return invalid_model(ctx.where, ": A_scale is missing");
  if (!b_float && !ctx.has_input(4)) return invalid_model(ctx.where, ": B_scale is missing");
  if (!ctx.has_input(6) || !ctx.has_input(7)) {
    return invalid_model(ctx.where, ": C_scale and C_zero_point are required");
  }
  for (size_t i : {1, 4, 6}) TERN_RETURN_IF_ERROR(check_scalar(ctx, i, false));
  for (size_t i : {2, 5, 7}) TERN_RETURN_IF_ERROR(check_scalar(ctx, i, true));
  // A zero point is of its operand's type.
  for (size_t z : {2, 5}) {
    if (ctx.has_input(z) && ctx.inputs[z].dtype != ctx.inputs[z - 2].dtype) {
      return invalid_model(ctx.where, ": zero point ", z, " is ", dtype_name(ctx.inputs[z].dtype),
                           ", its operand ", dtype_name(ctx.inputs[z - 2].dtype));
    }
  }
  const DType out = ctx.inputs[7].dtype;
  if (!int8_type(out)) return ops::dtype_error(ctx, 7, "uint8 or int8");
  std::string act;
  TERN_ASSIGN_OR_RETURN(act, ctx.attrs().get_string("activation", ""));
  if (!act.empty() && act != "Relu") {
    return unsupported(ctx.where, ": activation '", act, "' (only Relu)");
  }
  auto shape = ops::broadcast_shapes(ctx.inputs[0].shape, ctx.inputs[3].shape);
  if (!shape) {
    return invalid_argument("inputs '", ctx.input_names[0], "' and '", ctx.input_names[3],
                            "': ", shape.status().message());
  }
  ctx.set_output(0, out, *shape);
  return Status::ok();
}

struct QAddParams {
  ops::BroadcastRows rows;
  bool relu = false;
};

float scalar(const Tensor* t) {
  return t ? static_cast<float>(t->float_at(0)) : 0.0f;
}

float operand(const Tensor& x, int64_t i, float scale, float zero) {
  if (x.dtype() == DType::kFloat32) return x.data<float>()[i];
  return (static_cast<float>(x.int_at(i)) - zero) * scale;
}

Status run_qadd(const QAddParams& p, const KernelArgs& a, const ExecContext&) {
  auto in = [&](size_t i) { return i < a.inputs.size() ? a.inputs[i] : nullptr; };
  const Tensor &x = *a.inputs[0], &y = *a.inputs[3];
  const float xs = scalar(in(1)), xz = scalar(in(2)), ys = scalar(in(4)), yz = scalar(in(5));
  const float cs = scalar(in(6)), cz = scalar(in(7));
  Tensor& c = *a.outputs[0];
  const bool u8 = c.dtype() == DType::kUInt8;
  const double lo = u8 ? 0 : -128, hi = u8 ? 255 : 127;
  int64_t off[2];
  int64_t o = 0;
  for (int64_t r = 0; r < p.rows.rows; ++r) {
    p.rows.row_offsets(r, off);
    const int64_t sx = p.rows.in_strides[0].back(), sy = p.rows.in_strides[1].back();
    for (int64_t i = 0; i < p.rows.inner; ++i, ++o) {
      float v = operand(x, off[0] + i * sx, xs, xz) + operand(y, off[1] + i * sy, ys, yz);
      if (p.relu && v < 0) v = 0;
      const float q = v / cs;
      // NaN saturates to the lowest value, as QuantizeLinear's reference does.
      const double qz = std::nearbyint(static_cast<double>(q)) + cz;
      const double sat = std::isnan(q) ? lo : std::min(hi, std::max(lo, qz));
      if (u8) {
        c.data<uint8_t>()[o] = static_cast<uint8_t>(sat);
      } else {
        c.data<int8_t>()[o] = static_cast<int8_t>(sat);
      }
    }
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_qadd(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  QAddParams p;
  p.rows = ops::plan_broadcast(ctx.outputs[0].shape, {ctx.inputs[0].shape, ctx.inputs[3].shape});
  std::string act;
  TERN_ASSIGN_OR_RETURN(act, ctx.attrs().get_string("activation", ""));
  p.relu = act == "Relu";
  return make_kernel("reference", std::move(p), run_qadd);
}

}  // namespace

TERN_REGISTRATION void register_op_qlinear_add(OpRegistry& r) {
  r.add({"QLinearAdd", 4, 8, 1, 1, infer_qadd, make_qadd, {}, attrs("activation")});
}

}  // namespace tern
