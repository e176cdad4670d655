// The static prefix of a dynamic plan. A graph whose shapes depend on values computed at run time
// (a detector's NonMaxSuppression, a TopK by a computed k) runs node by node, but most of its
// nodes usually do not depend on such values: a detector's backbone and heads. Those nodes form
// a graph of their own, compiled once per session like a subgraph (core/subgraph.h) and planned
// statically per input shapes (arena, fused kernels, blocked layouts); a dynamic run runs it
// first and then the remaining nodes one by one.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/plan/shapes.h"
#include "core/subgraph.h"

namespace tern {

struct StaticPrefix {
  std::shared_ptr<const Graph> graph;  // the static nodes, as a graph of their own
  std::shared_ptr<const SubgraphRunner> runner;
  std::vector<bool> node_static;  // by node of the session's graph: computed by the prefix
  std::vector<size_t> inputs;     // by prefix input: the model input it is
  std::vector<int> outputs;       // by prefix output: the session graph's value it gives
};

// The static prefixes of one session, by set of static nodes (so that every plan with the same
// set shares one compiled prefix).
class StaticPrefixes {
 public:
  // The prefix for these input shapes; null when it would hold too little to be worth running
  // as a plan of its own (or the session compiles no subgraphs).
  Expected<std::shared_ptr<const StaticPrefix>> find_or_make(const ShapeInputs& in,
                                                             SubgraphCompiler* compiler);

 private:
  std::mutex mu_;
  std::map<std::vector<bool>, std::shared_ptr<const StaticPrefix>> made_;
};

// By node: whether its shapes are known for these input shapes without data computed at run time
// (its inputs too come from such nodes), and it computes tensors (no strings, sequences or
// optionals).
Expected<std::vector<bool>> static_nodes(const ShapeInputs& in);

}  // namespace tern
