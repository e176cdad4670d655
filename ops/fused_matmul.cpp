#include "ops/fused_matmul.h"

#include <algorithm>
#include <cmath>

#include "core/op_registry.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace ops {

Expected<FusedMatMulParams> parse_fused_matmul(const OpContext& ctx, bool any_float) {
  FusedMatMulParams p;
  const DType t = ctx.inputs[0].dtype;
  if (!(t == DType::kFloat32 || (any_float && (t == DType::kFloat16 || t == DType::kBFloat16)))) {
    return dtype_error(ctx, 0, any_float ? "float32, float16, bfloat16" : "float32");
  }
  if (ctx.inputs[1].shape.size() != 2) {
    return invalid_model(ctx.where, ": FusedMatMul weights must be 2-D, got ",
                         shape_str(ctx.inputs[1].shape));
  }
  TERN_ASSIGN_OR_RETURN(p.mm, parse_matmul(ctx));
  p.has_bias = ctx.has_input(2);
  if (p.has_bias) {
    const Shape& b = ctx.inputs[2].shape;
    const bool leading_ones =
        std::all_of(b.begin(), b.empty() ? b.end() : b.end() - 1, [](int64_t d) { return d == 1; });
    if (ctx.inputs[2].dtype != t || b.empty() || b.back() != p.mm.N || !leading_ones) {
      return invalid_model(ctx.where, ": FusedMatMul bias must be ", dtype_name(t), " [", p.mm.N,
                           "], got ", dtype_name(ctx.inputs[2].dtype), shape_str(b));
    }
  }
  const Attribute* act = ctx.attrs().find("activation");
  if (act && act->kind != Attribute::Kind::kString) {
    return invalid_model(ctx.where, ": FusedMatMul activation must be a string");
  }
  if (act && act->s == "Relu") {
    p.act = MatMulAct::kRelu;
  } else if (act && act->s == "Gelu") {
    p.act = MatMulAct::kGelu;
  } else if (act && !act->s.empty()) {
    return invalid_model(ctx.where, ": FusedMatMul: unknown activation '", act->s, "'");
  }
  return p;
}

void apply_bias_activation(const FusedMatMulParams& p, const float* bias, float* y, int64_t rows) {
  const int64_t n = p.mm.N;
  for (int64_t r = 0; r < rows; ++r) {
    float* yr = y + r * n;
    for (int64_t j = 0; j < n; ++j) {
      float v = yr[j] + (bias ? bias[j] : 0.0f);
      if (p.act == MatMulAct::kRelu) {
        v = v > 0.0f ? v : 0.0f;
      } else if (p.act == MatMulAct::kGelu) {
        v = static_cast<float>(0.5 * v * (1.0 + std::erf(v * 0.70710678118654752)));
      }
      yr[j] = v;
    }
  }
}

}  // namespace ops

namespace {

Status infer_fused_matmul(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::FusedMatMulParams p, ops::parse_fused_matmul(ctx, true));
  ctx.set_output(0, ctx.inputs[0].dtype, p.mm.out);
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_fused_matmul_reference(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::FusedMatMulParams p, ops::parse_fused_matmul(ctx));
  return make_kernel("reference", std::move(p),
                     [](const ops::FusedMatMulParams& q, const KernelArgs& a, const ExecContext&) {
                       float* y = a.outputs[0]->data<float>();
                       ops::matmul_reference(q.mm, a.inputs[0]->data<float>(),
                                             a.inputs[1]->data<float>(), y);
                       const float* bias = q.has_bias ? a.inputs[2]->data<float>() : nullptr;
                       const int64_t rows = q.mm.N ? a.outputs[0]->numel() / q.mm.N : 0;
                       ops::apply_bias_activation(q, bias, y, rows);
                       return Status::ok();
                     });
}

}  // namespace

TERN_REGISTRATION void register_op_fused_matmul(OpRegistry& r) {
  r.add({"FusedMatMul",
         2,
         3,
         1,
         1,
         infer_fused_matmul,
         make_fused_matmul_reference,
         {},
         attrs("activation")});
}

}  // namespace tern
