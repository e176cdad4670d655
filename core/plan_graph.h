// One plan's view of the session's graph, from shape inference to kernel choice: every value's
// state for the plan's input shapes, each node's shape-inferred context, and the rewrites the
// optimizer's shape-aware passes made (core/opt/optimizer.h). The planner (core/plan/) fills it
// and turns it into an executable Plan.
#pragma once

#include <memory>
#include <vector>

#include "core/node_context.h"

namespace tern {

// A rewrite a shape-aware pass made, kept so that a plan for other shapes can check it still
// holds instead of searching again (core/plan/plan_template.h).
struct FusionRecord {
  enum class Kind { kAttention, kResidual } kind = Kind::kAttention;
  size_t anchor = 0;           // the node whose place the fused node takes
  const Node* node = nullptr;  // the fused node (owned by PlanGraph::nodes, later the template)
  size_t match = 0;            // kAttention: index into the session's attention matches
  // kResidual: the convolution, the Add, which of its inputs the convolution's output is, and the
  // element-wise nodes folded after the sum (the last one is the anchor).
  size_t conv = 0, add = 0;
  int side = 0;
  std::vector<size_t> chain;
};

struct PlanGraph {
  const Graph* graph = nullptr;
  const std::vector<size_t>* order = nullptr;  // the graph's nodes in dependency order
  const FlagValues* flags = nullptr;           // what the plan is built under
  WeightCache* weights = nullptr;              // the session's packed weights, for every context
  SubgraphCompiler* subgraphs = nullptr;       // the session's subgraphs, for every context
  // By value id; the planner appends values of its own (plain twins, device copies).
  std::vector<PlannedValue> values;
  // By node: its context when it runs as a step; null for a node computed while planning (shape
  // math, whose outputs are in `known`), and for a step whose inputs are what the previous plan
  // of the same template saw (its kernel is cached; the context is made only if needed). A fused
  // node's context replaces its anchor's (the node whose place in the order it takes).
  std::vector<std::unique_ptr<OpContext>> ctxs;
  // By node: its context from an earlier inference of this plan graph, made again if needed.
  std::vector<std::unique_ptr<OpContext>> spare_ctxs;
  // By node: computed while planning (its outputs are constants of the plan).
  std::vector<bool> computed;
  // By node: replaced by a fused node (not its anchor) and not run.
  std::vector<bool> removed;
  std::vector<std::unique_ptr<Node>> nodes;          // nodes the passes made (fused ones)
  std::vector<std::shared_ptr<const Tensor>> known;  // values computed while planning
  std::vector<FusionRecord> fusions;
  // By value the planner appended (index - graph values): the value it is a copy of (a plain
  // twin of a blocked value, or a value's twin in the other memory).
  std::vector<int> twin_of;
  // By node (empty: none): run on plain data whatever its layout role says, because its kernel
  // declined the blocked layout in an earlier attempt at this plan (core/plan/layout.h).
  std::vector<bool> plain_only;
  // Set by the partition stage when a node's kernels decline it with blocked data in its
  // context: the node a new attempt should plan on plain data (-1: none).
  int64_t declined_blocked = -1;
  bool is_plain_only(size_t n) const { return n < plain_only.size() && plain_only[n]; }
  size_t fused_attention = 0;  // attention subgraphs made one Attention node
  size_t fused_residuals = 0;  // Add (+ activation) folded into a convolution

  const PlannedValue& value(int id) const { return values[static_cast<size_t>(id)]; }
  PlannedValue& value(int id) { return values[static_cast<size_t>(id)]; }
};

}  // namespace tern
