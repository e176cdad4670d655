#include "ops/fused_conv.h"

#include <algorithm>
#include <cmath>

#include "core/op_registry.h"
#include "core/parallel.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace ops {

Expected<FusedConvParams> parse_fused_conv(const OpContext& ctx, bool any_float) {
  FusedConvParams p;
  TERN_ASSIGN_OR_RETURN(p.conv, parse_conv(ctx, any_float));
  TERN_ASSIGN_OR_RETURN(std::vector<std::string> acts, ctx.attrs().get_strings("activations", {}));
  TERN_ASSIGN_OR_RETURN(std::vector<float> params, ctx.attrs().get_floats("activation_params", {}));
  struct Known {
    const char* name;
    FusedAct act;
    size_t params;
  };
  static const Known known[] = {{"Relu", FusedAct::kRelu, 0},
                                {"LeakyRelu", FusedAct::kLeakyRelu, 1},
                                {"Clip", FusedAct::kClip, 2},
                                {"Sigmoid", FusedAct::kSigmoid, 0},
                                {"HardSigmoid", FusedAct::kHardSigmoid, 2},
                                {"HardSwish", FusedAct::kHardSwish, 0},
                                {"Tanh", FusedAct::kTanh, 0},
                                {"Affine", FusedAct::kAffine, 2},
                                {"Swish", FusedAct::kSwish, 1}};
  size_t used = 0;
  for (const std::string& act : acts) {
    const Known* k = std::find_if(std::begin(known), std::end(known),
                                  [&](const Known& e) { return act == e.name; });
    if (k == std::end(known)) return invalid_model("FusedConv: unknown activation '", act, "'");
    if (params.size() - used < k->params) {
      return invalid_model("FusedConv: activation ", act, " takes ", k->params,
                           " parameters, only ", params.size() - used, " left");
    }
    p.epilogue.push_back(FusedStep{
        k->act, std::vector<float>(params.begin() + used, params.begin() + used + k->params)});
    used += k->params;
  }
  if (used != params.size()) {
    return invalid_model("FusedConv: ", params.size(),
                         " activation parameters for activations "
                         "that take ",
                         used);
  }
  p.has_sum = ctx.has_input(3);
  if (p.has_sum &&
      (ctx.inputs[3].shape != p.conv.y || ctx.inputs[3].dtype != ctx.inputs[0].dtype)) {
    return invalid_argument("FusedConv: residual '", ctx.input_names[3], "' ",
                            dtype_name(ctx.inputs[3].dtype), shape_str(ctx.inputs[3].shape),
                            " must be ", dtype_name(ctx.inputs[0].dtype), shape_str(p.conv.y));
  }
  return p;
}

Expected<FusedConvParams> parse_conv_or_fused(const OpContext& ctx, bool any_float) {
  if (ctx.node->op_type == "FusedConv") return parse_fused_conv(ctx, any_float);
  FusedConvParams p;
  TERN_ASSIGN_OR_RETURN(p.conv, parse_conv(ctx, any_float));
  return p;
}

void apply_step(const FusedStep& st, float* y, int64_t n) {
  const std::vector<float>& q = st.params;
  switch (st.act) {
    case FusedAct::kRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
      return;
    case FusedAct::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] >= 0.0f ? y[i] : y[i] * q[0];
      return;
    case FusedAct::kClip:
      for (int64_t i = 0; i < n; ++i) y[i] = std::min(q[1], std::max(q[0], y[i]));
      return;
    case FusedAct::kSigmoid:
      for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + std::exp(-y[i]));
      return;
    case FusedAct::kHardSigmoid:
      for (int64_t i = 0; i < n; ++i) y[i] = std::min(1.0f, std::max(0.0f, q[0] * y[i] + q[1]));
      return;
    case FusedAct::kHardSwish:
      for (int64_t i = 0; i < n; ++i) {
        y[i] = y[i] * std::min(1.0f, std::max(0.0f, y[i] / 6.0f + 0.5f));
      }
      return;
    case FusedAct::kTanh:
      for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(y[i]);
      return;
    case FusedAct::kAffine:
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] * q[0] + q[1];
      return;
    case FusedAct::kSwish:
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] / (1.0f + std::exp(-q[0] * y[i]));
      return;
  }
}

void apply_epilogue(const std::vector<FusedStep>& epilogue, float* y, int64_t n) {
  for (const FusedStep& st : epilogue) apply_step(st, y, n);
}

}  // namespace ops

namespace {

Status infer_fused_conv(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::FusedConvParams p, ops::parse_fused_conv(ctx, true));
  ctx.set_output(0, ctx.inputs[0].dtype, p.conv.y);
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_fused_conv_reference(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  TERN_ASSIGN_OR_RETURN(ops::FusedConvParams p, ops::parse_fused_conv(ctx));
  return make_kernel("reference", std::move(p),
                     [](const ops::FusedConvParams& q, const KernelArgs& a, const ExecContext&) {
                       const float* b = q.conv.has_bias ? a.inputs[2]->data<float>() : nullptr;
                       float* y = a.outputs[0]->data<float>();
                       ops::conv_reference(q.conv, a.inputs[0]->data<float>(),
                                           a.inputs[1]->data<float>(), b, y);
                       const int64_t n = a.outputs[0]->numel();
                       if (q.has_sum) {
                         const float* z = a.inputs[3]->data<float>();
                         for (int64_t i = 0; i < n; ++i) y[i] += z[i];
                       }
                       ops::apply_epilogue(q.epilogue, y, n);
                       return Status::ok();
                     });
}

}  // namespace

TERN_REGISTRATION void register_op_fused_conv(OpRegistry& r) {
  r.add({"FusedConv",
         2,
         4,
         1,
         1,
         infer_fused_conv,
         make_fused_conv_reference,
         {},
         attrs("auto_pad, dilations, group, kernel_shape, pads, strides, activations, "
               "activation_params")});
}

}  // namespace tern
