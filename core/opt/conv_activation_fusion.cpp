// A convolution's element-wise tail (activations, scalar Mul/Add) joins FusedConv's epilogue;
// a constant affine step right after the convolution folds into its weights instead.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/opt/fused_activation.h"
#include "core/opt/graph_util.h"
#include "core/opt/optimizer.h"

namespace tern {

namespace {

bool is_conv_float(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16;
}

// conv(x) * s + b with constant float32 weights (and bias): the same convolution with weights
// W * s and bias B * s + b. Returns false when the weights are not constant.
Expected<bool> fold_affine_into_conv(Graph& g, Node& conv, const FusedActivation& act) {
  // Handles, not pointers into g.values: add_constant below may move them.
  std::optional<Tensor> w_handle, bias_handle;
  if (const Tensor* t = constant_of(g, conv.inputs[1])) w_handle = *t;
  const bool has_bias = conv.inputs.size() > 2 && conv.inputs[2] >= 0;
  if (const Tensor* t = has_bias ? constant_of(g, conv.inputs[2]) : nullptr) bias_handle = *t;
  const Tensor* w = w_handle ? &*w_handle : nullptr;
  const Tensor* bias = bias_handle ? &*bias_handle : nullptr;
  if (!w || w->dtype() != DType::kFloat32 || w->rank() < 3 || (has_bias && !bias)) return false;
  const int64_t m = w->shape()[0];
  if (bias && (bias->dtype() != DType::kFloat32 || bias->numel() != m)) return false;
  const float scale = act.params[0], shift = act.params[1];
  const std::string base =
      conv.name.empty() ? g.values[static_cast<size_t>(conv.outputs[0])].name : conv.name;
  if (scale != 1.0f) {
    TERN_ASSIGN_OR_RETURN(Tensor nw, Tensor::allocate(DType::kFloat32, w->shape()));
    for (int64_t i = 0; i < w->numel(); ++i) nw.data<float>()[i] = w->data<float>()[i] * scale;
    conv.inputs[1] = add_constant(g, base + "/scaled_weight", std::move(nw));
  }
  if (scale != 1.0f || shift != 0.0f || !has_bias) {
    TERN_ASSIGN_OR_RETURN(Tensor nb, Tensor::allocate(DType::kFloat32, {m}));
    for (int64_t o = 0; o < m; ++o) {
      nb.data<float>()[o] = (bias ? bias->data<float>()[o] * scale : 0.0f) + shift;
    }
    conv.inputs.resize(3, -1);
    conv.inputs[2] = add_constant(g, base + "/shifted_bias", std::move(nb));
  }
  return true;
}

}  // namespace

Status fuse_conv_activation(Graph& g, OptimizerReport* report) {
  if (!op_built(OptOp::kFusedConv)) return Status::ok();  // a selective build without it
  PatternView v{g};
  for (size_t a = 0; a < g.nodes.size(); ++a) {
    const Node& act_node = g.nodes[a];
    auto act = activation_of(g, act_node);
    if (!act || act_node.inputs.empty()) continue;
    const int x = act_node.inputs[static_cast<size_t>(act->input)];
    const int c = v.producers[static_cast<size_t>(x)];
    if (c < 0 || v.removed[static_cast<size_t>(c)]) continue;
    Node& conv = g.nodes[static_cast<size_t>(c)];
    const bool plain_conv = conv.op_type == "Conv" && conv.domain.empty();
    const bool fused_conv = conv.op_type == "FusedConv" && conv.inputs.size() <= 3;
    if ((!plain_conv && !fused_conv) || conv.inputs.size() < 2 || conv.outputs[0] != x ||
        !v.only(x, &act_node)) {
      continue;
    }
    // A constant operand of higher rank than the convolution's output would broadcast it.
    const Tensor* w = constant_of(g, conv.inputs[1]);
    if (act->operand_rank > (w ? w->rank() : size_t{1})) continue;
    // FusedConv computes in float32 (float16/bfloat16 nodes accumulate in float32 and round the
    // fused result once): constant float weights or a float-typed output say the type.
    const DType typed = g.values[static_cast<size_t>(x)].type.dtype;
    if (!is_conv_float(w ? w->dtype() : typed)) continue;
    bool folded = false;
    if (act->kind == "Affine" && !has_epilogue(conv)) {
      // Straight after the convolution an affine step costs nothing: it goes into the weights.
      TERN_ASSIGN_OR_RETURN(folded, fold_affine_into_conv(g, conv, *act));
    }
    if (!folded) {
      conv.op_type = "FusedConv";
      append_fused_activation(conv, *act);
    }
    v.absorb(conv, a);
    ++report->activations_fused;
  }
  erase_nodes(g, v.removed);
  return Status::ok();
}

}  // namespace tern
