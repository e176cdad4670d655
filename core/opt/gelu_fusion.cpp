// GELU's erf decomposition, x * (erf(x / sqrt 2) + 1) * 0.5, becomes one Gelu node.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/opt/graph_util.h"
#include "core/opt/optimizer.h"

namespace tern {

Status fuse_gelu(Graph& g, OptimizerReport* report) {
  if (!op_built(OptOp::kGelu)) return Status::ok();  // a selective build without it
  PatternView pv{g};
  auto near = [&](int v, float want) {
    auto x = scalar_of(g, v);
    return x && std::abs(*x - want) <= scalar_tolerance(g, v) * std::abs(want);
  };
  for (size_t t = 0; t < g.nodes.size(); ++t) {
    Node& top = g.nodes[t];
    // mul(mul(x, add(erf(div(x, sqrt 2)), 1)), 0.5), Mul operands in either order
    if (pv.removed[t] || top.op_type != "Mul" || !top.domain.empty() || top.inputs.size() != 2)
      continue;
    const int half_side = near(top.inputs[1], 0.5f) ? 1 : near(top.inputs[0], 0.5f) ? 0 : -1;
    if (half_side < 0) continue;
    const int inner_out = top.inputs[static_cast<size_t>(1 - half_side)];
    Node* inner = pv.node_at(inner_out, "Mul");
    if (!inner || !pv.only(inner_out, &top) || inner->inputs.size() != 2) continue;
    for (int side = 0; side < 2; ++side) {
      const int x = inner->inputs[static_cast<size_t>(side)];
      const int add_out = inner->inputs[static_cast<size_t>(1 - side)];
      Node* add = pv.node_at(add_out, "Add");
      if (!add || !pv.only(add_out, inner) || add->inputs.size() != 2) continue;
      const int one_side = near(add->inputs[1], 1.0f) ? 1 : near(add->inputs[0], 1.0f) ? 0 : -1;
      if (one_side < 0) continue;
      const int erf_out = add->inputs[static_cast<size_t>(1 - one_side)];
      Node* erf = pv.node_at(erf_out, "Erf");
      if (!erf || !pv.only(erf_out, add)) continue;
      Node* div = pv.node_at(erf->inputs[0], "Div");
      if (!div || !pv.only(erf->inputs[0], erf) || div->inputs.size() != 2 || div->inputs[0] != x ||
          !near(div->inputs[1], 1.41421356f)) {
        continue;
      }
      for (Node* n : {inner, add, erf, div}) pv.removed[pv.index_of(n)] = true;
      top.op_type = "Gelu";
      top.inputs = {x};
      top.attrs = Attributes();
      ++report->gelus_fused;
      break;
    }
  }
  erase_nodes(g, pv.removed);
  return Status::ok();
}

}  // namespace tern
