// x * clip(x + 3, 0, 6) / 6 (and HardSigmoid(x) * x) becomes one HardSwish node.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/opt/fused_activation.h"
#include "core/opt/graph_util.h"
#include "core/opt/optimizer.h"

namespace tern {

Status fuse_hardswish(Graph& g, OptimizerReport* report) {
  if (!op_built(OptOp::kHardSwish)) return Status::ok();  // a selective build without it
  PatternView pv{g};
  for (size_t d = 0; d < g.nodes.size(); ++d) {
    Node& div = g.nodes[d];
    // div(mul(x, clip(add(x, 3), 0, 6)), 6)
    if (div.op_type != "Div" || !div.domain.empty() || div.inputs.size() != 2) continue;
    if (scalar_of(g, div.inputs[1]) != 6.0f) continue;
    Node* mul = pv.node_at(div.inputs[0], "Mul");
    if (!mul || !pv.only(div.inputs[0], &div)) continue;
    for (int side = 0; side < 2; ++side) {
      const int x = mul->inputs[static_cast<size_t>(side)];
      const int c = mul->inputs[static_cast<size_t>(1 - side)];
      Node* clip = pv.node_at(c, "Clip");
      if (!clip || !pv.only(c, mul)) continue;
      auto act = activation_of(g, *clip);
      if (!act || act->params[0] != 0.0f || act->params[1] != 6.0f) continue;
      Node* add = pv.node_at(clip->inputs[0], "Add");
      if (!add || !pv.only(clip->inputs[0], clip)) continue;
      const bool x_first = add->inputs[0] == x && scalar_of(g, add->inputs[1]) == 3.0f;
      const bool x_second = add->inputs[1] == x && scalar_of(g, add->inputs[0]) == 3.0f;
      if (!x_first && !x_second) continue;
      pv.removed[pv.index_of(mul)] = pv.removed[pv.index_of(clip)] = pv.removed[pv.index_of(add)] =
          true;
      div.op_type = "HardSwish";
      div.inputs = {x};
      div.attrs = Attributes();
      ++report->hardswish_fused;
      break;
    }
  }
  erase_nodes(g, pv.removed);
  return Status::ok();
}

}  // namespace tern
