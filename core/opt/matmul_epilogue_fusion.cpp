// MatMul by constant weights + per-column bias (+ Relu or Gelu) becomes one FusedMatMul.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/opt/graph_util.h"
#include "core/opt/optimizer.h"

namespace tern {

Status fuse_matmul_epilogue(Graph& g, OptimizerReport* report) {
  if (!op_built(OptOp::kFusedMatMul)) return Status::ok();  // a selective build without it
  PatternView pv{g};
  for (size_t a = 0; a < g.nodes.size(); ++a) {
    Node& add = g.nodes[a];
    if (pv.removed[a] || add.op_type != "Add" || !add.domain.empty() || add.inputs.size() != 2)
      continue;
    for (int side = 0; side < 2; ++side) {
      const int mm_out = add.inputs[static_cast<size_t>(side)];
      const int bias = add.inputs[static_cast<size_t>(1 - side)];
      Node* mm = pv.node_at(mm_out, "MatMul");
      if (!mm || !pv.only(mm_out, &add)) continue;
      const Tensor* w = constant_of(g, mm->inputs[1]);
      const Tensor* b = constant_of(g, bias);
      // float32, or float16/bfloat16 (the bias added to the float32 accumulator, one rounding).
      const bool float_type =
          w && (w->dtype() == DType::kFloat32 || w->dtype() == DType::kFloat16 ||
                w->dtype() == DType::kBFloat16);
      if (!float_type || !b || w->rank() != 2 || b->dtype() != w->dtype() || b->rank() == 0 ||
          b->shape().back() != w->shape()[1] || b->numel() != w->shape()[1]) {
        continue;
      }
      pv.removed[pv.index_of(mm)] = true;
      add.op_type = "FusedMatMul";
      add.inputs = {mm->inputs[0], mm->inputs[1], bias};
      add.attrs = Attributes();
      ++report->matmuls_fused;
      break;
    }
  }
  erase_nodes(g, pv.removed);
  // A Relu or Gelu that alone reads a FusedMatMul's output runs inside it.
  PatternView again{g};
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    Node& act = g.nodes[n];
    if ((act.op_type != "Relu" && act.op_type != "Gelu") || !act.domain.empty()) continue;
    if (act.op_type == "Gelu") {
      auto approximate = act.attrs.get_string("approximate", "none");
      if (!approximate || *approximate != "none") continue;
    }
    Node* mm = again.node_at(act.inputs[0], "FusedMatMul");
    if (!mm || !again.only(act.inputs[0], &act) || mm->attrs.find("activation")) continue;
    Attribute kind;
    kind.kind = Attribute::Kind::kString;
    kind.s = act.op_type;
    mm->attrs.set("activation", kind);
    mm->outputs = act.outputs;
    again.removed[n] = true;
  }
  erase_nodes(g, again.removed);
  return Status::ok();
}

}  // namespace tern
