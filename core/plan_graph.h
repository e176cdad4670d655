// One plan's view of the session's graph, from shape inference to kernel choice: every value's
// state for the plan's input shapes, each node's shape-inferred context, and the rewrites the
// optimizer's shape-aware passes made (core/opt/optimizer.h). The planner (core/plan/) fills it
// and turns it into an executable Plan.
#pragma once

#include <memory>
#include <vector>

#include "core/node_context.h"

namespace tern {

struct PlanGraph {
  const Graph* graph = nullptr;
  const std::vector<size_t>* order = nullptr;  // the graph's nodes in dependency order
  const FlagValues* flags = nullptr;           // what the plan is built under
  // By value id; the planner appends values of its own (plain twins, device copies).
  std::vector<PlannedValue> values;
  // By node: its context when it runs as a step; null for a node computed while planning (shape
  // math, whose outputs are in `known`). A fused node's context replaces its anchor's (the node
  // whose place in the order it takes).
  std::vector<std::unique_ptr<OpContext>> ctxs;
  // By node: replaced by a fused node (not its anchor) and not run.
  std::vector<bool> removed;
  std::vector<std::unique_ptr<Node>> nodes;    // nodes the passes made (fused ones)
  std::vector<std::unique_ptr<Tensor>> known;  // values computed while planning
  size_t fused_attention = 0;                  // attention subgraphs made one Attention node
  size_t fused_residuals = 0;                  // Add (+ activation) folded into a convolution

  const PlannedValue& value(int id) const { return values[static_cast<size_t>(id)]; }
  PlannedValue& value(int id) { return values[static_cast<size_t>(id)]; }
};

}  // namespace tern
