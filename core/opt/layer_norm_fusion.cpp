// LayerNormalization's opset-13 decomposition over the last axis becomes one LayerNormalization.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/opt/graph_util.h"
#include "core/opt/optimizer.h"

namespace tern {

Status fuse_layer_norm(Graph& g, OptimizerReport* report) {
  if (!op_built(OptOp::kLayerNormalization)) return Status::ok();  // a selective build without it
  PatternView pv{g};
  // ReduceMean over the last axis only, keeping it (opset < 18: axes is an attribute).
  auto last_axis_mean = [&](const Node* n) {
    if (!n || n->inputs.size() != 1) return false;
    auto axes = n->attrs.get_ints("axes", {});
    auto keep = n->attrs.get_int("keepdims", 1);
    return axes && keep && *keep == 1 && *axes == std::vector<int64_t>{-1};
  };
  // A constant float32 vector (or [1, ..., n]) to scale or shift the normalised rows with.
  auto row_vector = [&](int v) {
    const Tensor* t = constant_of(g, v);
    if (!t || t->dtype() != DType::kFloat32 || t->rank() == 0) return false;
    return t->numel() == t->shape().back();
  };
  for (size_t a = 0; a < g.nodes.size(); ++a) {
    Node& add_b = g.nodes[a];
    // add(mul(div(sub(x, mean(x)), sqrt(add(mean(pow(sub, 2)), eps))), scale), bias)
    if (pv.removed[a] || add_b.op_type != "Add" || !add_b.domain.empty() ||
        add_b.inputs.size() != 2)
      continue;
    for (int side = 0; side < 2; ++side) {
      const int mul_out = add_b.inputs[static_cast<size_t>(side)];
      const int bias = add_b.inputs[static_cast<size_t>(1 - side)];
      Node* mul = pv.node_at(mul_out, "Mul");
      if (!mul || !row_vector(bias) || !pv.only(mul_out, &add_b) || mul->inputs.size() != 2)
        continue;
      const int scale_side = row_vector(mul->inputs[1]) ? 1 : row_vector(mul->inputs[0]) ? 0 : -1;
      if (scale_side < 0) continue;
      const int div_out = mul->inputs[static_cast<size_t>(1 - scale_side)];
      const int scale = mul->inputs[static_cast<size_t>(scale_side)];
      Node* div = pv.node_at(div_out, "Div");
      if (!div || !pv.only(div_out, mul) || div->inputs.size() != 2) continue;
      const int sub_out = div->inputs[0];
      Node* sub = pv.node_at(sub_out, "Sub");
      Node* sqrt = pv.node_at(div->inputs[1], "Sqrt");
      if (!sub || !sqrt || !pv.only(div->inputs[1], div) || sub->inputs.size() != 2) continue;
      const int x = sub->inputs[0];
      Node* mean = pv.node_at(sub->inputs[1], "ReduceMean");
      if (!last_axis_mean(mean) || mean->inputs[0] != x || !pv.only(sub->inputs[1], sub)) continue;
      Node* add_eps = pv.node_at(sqrt->inputs[0], "Add");
      if (!add_eps || !pv.only(sqrt->inputs[0], sqrt) || add_eps->inputs.size() != 2) continue;
      const int eps_side = scalar_of(g, add_eps->inputs[1])   ? 1
                           : scalar_of(g, add_eps->inputs[0]) ? 0
                                                              : -1;
      if (eps_side < 0) continue;
      const float eps = *scalar_of(g, add_eps->inputs[static_cast<size_t>(eps_side)]);
      const int var_out = add_eps->inputs[static_cast<size_t>(1 - eps_side)];
      Node* var = pv.node_at(var_out, "ReduceMean");
      if (!last_axis_mean(var) || !pv.only(var_out, add_eps)) continue;
      Node* pow = pv.node_at(var->inputs[0], "Pow");
      if (!pow || !pv.only(var->inputs[0], var) || pow->inputs.size() != 2 ||
          pow->inputs[0] != sub_out || scalar_of(g, pow->inputs[1]) != 2.0f) {
        continue;
      }
      // sub's output feeds exactly the Pow and the Div.
      const auto readers = pv.consumers[static_cast<size_t>(sub_out)];
      if (pv.is_output[static_cast<size_t>(sub_out)] || readers.size() != 2) continue;
      const Tensor& sc = *constant_of(g, scale);
      const Tensor& bi = *constant_of(g, bias);
      if (sc.numel() != bi.numel()) continue;
      for (Node* n : {mul, div, sub, sqrt, mean, add_eps, var, pow})
        pv.removed[pv.index_of(n)] = true;
      add_b.op_type = "LayerNormalization";
      add_b.inputs = {x, scale, bias};
      add_b.attrs = Attributes();
      Attribute axis, epsilon;
      axis.kind = Attribute::Kind::kInt;
      axis.i = -1;
      epsilon.kind = Attribute::Kind::kFloat;
      epsilon.f = eps;
      add_b.attrs.set("axis", axis);
      add_b.attrs.set("epsilon", epsilon);
      ++report->layer_norms_fused;
      break;
    }
  }
  erase_nodes(g, pv.removed);
  return Status::ok();
}

}  // namespace tern
