// GroupNorm as exporters before opset 18 write it, Reshape(x, [0, G, -1]) -> InstanceNormalization
// (scale and bias of G values) -> Reshape(., Shape(x)), becomes one GroupNormalization node with
// those per-group scale and bias (U-Net's, diffusion models' and FCOS heads' GroupNorm). The
// per-channel affine that follows (Mul, Add by [C, 1, 1] constants) stays: it runs on the same
// layout, and the normalisation no longer forces its input into a plain [N, G, L] copy.
#include "core/opt/graph_util.h"
#include "core/opt/optimizer.h"

namespace tern {

Status fuse_group_norm(Graph& g, OptimizerReport* report) {
  if (!op_built(OptOp::kGroupNormalization)) return Status::ok();  // a selective build without it
  PatternView pv{g};
  // An int64 constant [0, G, -1] with G > 0 (the batch copied, each group one row).
  auto group_split = [&](int v) -> int64_t {
    const Tensor* t = constant_of(g, v);
    if (!t || t->dtype() != DType::kInt64 || t->rank() != 1 || t->numel() != 3) return 0;
    const int64_t* s = t->data<int64_t>();
    return s[0] == 0 && s[1] > 0 && s[2] == -1 ? s[1] : 0;
  };
  auto copies_zero = [](const Node& reshape) {  // allowzero = 1 would make the 0 a zero dim
    auto allow = reshape.attrs.get_int("allowzero", 0);
    return allow && *allow == 0;
  };
  for (size_t r = 0; r < g.nodes.size(); ++r) {
    Node& back = g.nodes[r];
    if (pv.removed[r] || back.op_type != "Reshape" || !back.domain.empty() ||
        back.inputs.size() != 2 || !copies_zero(back)) {
      continue;
    }
    Node* norm = pv.node_at(back.inputs[0], "InstanceNormalization");
    Node* shape = pv.node_at(back.inputs[1], "Shape");
    if (!norm || !shape || norm->inputs.size() != 3 || !pv.only(back.inputs[0], &back) ||
        shape->inputs.size() != 1 || shape->attrs.has("start") || shape->attrs.has("end")) {
      continue;
    }
    Node* split = pv.node_at(norm->inputs[0], "Reshape");
    if (!split || split->inputs.size() != 2 || !copies_zero(*split) ||
        !pv.only(norm->inputs[0], norm)) {
      continue;
    }
    const int x = split->inputs[0];
    const int64_t groups = group_split(split->inputs[1]);
    if (groups == 0 || shape->inputs[0] != x) continue;
    const Tensor* scale = constant_of(g, norm->inputs[1]);
    const Tensor* bias = constant_of(g, norm->inputs[2]);
    if (!scale || !bias || scale->numel() != groups || bias->numel() != groups) continue;
    auto eps = norm->attrs.get_float("epsilon", 1e-5f);
    if (!eps) continue;
    const int scale_v = norm->inputs[1], bias_v = norm->inputs[2];
    pv.removed[pv.index_of(norm)] = true;
    pv.removed[pv.index_of(split)] = true;
    // The Shape node may have other readers; dead-node removal drops it when it has none.
    back.op_type = "GroupNormalization";
    back.inputs = {x, scale_v, bias_v};
    back.attrs = Attributes();
    back.attrs.set("epsilon", Attribute::of_float(*eps));
    back.attrs.set("num_groups", Attribute::of_int(groups));
    ++report->group_norms_fused;
  }
  erase_nodes(g, pv.removed);
  return Status::ok();
}

}  // namespace tern
