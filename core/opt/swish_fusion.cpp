// x * Sigmoid(x) (SiLU, EfficientNet's and YOLO's activation; PyTorch exports it as the two ops)
// becomes one Swish node (alpha 1), which then joins a preceding convolution's epilogue.
#include "core/opt/graph_util.h"
#include "core/opt/optimizer.h"

namespace tern {

Status fuse_swish(Graph& g, OptimizerReport* report) {
  if (!op_built(OptOp::kSwish)) return Status::ok();  // a selective build without it
  PatternView pv{g};
  for (size_t m = 0; m < g.nodes.size(); ++m) {
    Node& mul = g.nodes[m];
    if (mul.op_type != "Mul" || !mul.domain.empty() || mul.inputs.size() != 2 ||
        mul.outputs.empty()) {
      continue;
    }
    for (int side = 0; side < 2; ++side) {
      const int x = mul.inputs[static_cast<size_t>(side)];
      const int s = mul.inputs[static_cast<size_t>(1 - side)];
      Node* sigmoid = pv.node_at(s, "Sigmoid");
      if (x < 0 || !sigmoid || sigmoid->inputs.size() != 1 || sigmoid->inputs[0] != x ||
          !pv.only(s, &mul)) {
        continue;
      }
      pv.removed[pv.index_of(sigmoid)] = true;
      mul.op_type = "Swish";
      mul.inputs = {x};
      mul.attrs = Attributes();
      mul.attrs.set("alpha", Attribute::of_float(1.0f));
      ++report->swish_fused;
      break;
    }
  }
  erase_nodes(g, pv.removed);
  return Status::ok();
}

}  // namespace tern
