// An inference BatchNormalization's Relu joins it as a FusedBatchNormalization, whose CPU kernel
// applies it as it writes (ops/batch_norm.cpp), one pass over the tensor instead of two. The
// normalisations that get here are those no convolution could take: after a Concat (DenseNet), a
// pooling or an addition.
#include <algorithm>

#include "core/opt/fused_activation.h"
#include "core/opt/graph_util.h"
#include "core/opt/optimizer.h"

namespace tern {

Status fuse_batch_norm_activation(Graph& g, OptimizerReport* report) {
  if (!op_built(OptOp::kFusedBatchNormalization)) return Status::ok();  // a selective build
  PatternView v{g};
  for (size_t a = 0; a < g.nodes.size(); ++a) {
    const std::optional<FusedActivation> act = activation_of(g, g.nodes[a]);
    if (!act || act->kind != "Relu" || g.nodes[a].inputs.empty()) continue;
    const int x = g.nodes[a].inputs[0];
    Node* bn = v.node_at(x, "BatchNormalization");
    if (!bn || bn->outputs[0] != x || !v.only(x, &g.nodes[a])) continue;
    // Inference only, one output: training mode's statistics outputs stay as they are.
    auto training = bn->attrs.get_int("training_mode", 0);
    const bool more =
        std::any_of(bn->outputs.begin() + 1, bn->outputs.end(), [](int o) { return o >= 0; });
    if (!training || *training != 0 || more) continue;
    bn->op_type = "FusedBatchNormalization";
    append_fused_activation(*bn, *act);
    bn->outputs.resize(1);
    v.absorb(*bn, a);
    ++report->activations_fused;
  }
  erase_nodes(g, v.removed);
  return Status::ok();
}

}  // namespace tern
