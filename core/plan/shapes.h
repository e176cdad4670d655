// The planner's first stage: shape inference over the whole graph for one set of input shapes.
// Every value gets its dtype and shape and every node its context; shape math (Shape -> Gather ->
// Concat -> Reshape, any node whose inputs are all known) is computed now and its outputs become
// constants of the plan.
//
// A ShapeMemo keeps what the last inference computed per node: the next one, for other input
// shapes of the same graph (a decode step one token longer, a sentence of another length),
// recomputes only the nodes whose inputs changed; computed values equal to the last ones keep
// their tensor, so their readers see no change either.
#pragma once

#include <string>
#include <vector>

#include "core/model.h"
#include "core/plan_graph.h"

namespace tern {

struct ShapeInputs {
  const Graph* graph = nullptr;
  const std::vector<size_t>* order = nullptr;
  const std::vector<IOInfo>* inputs = nullptr;  // the model's inputs
  std::vector<Shape> shapes;                    // by model input
  std::vector<DType> dtypes;                    // by model input
  std::vector<Backend*> backends;               // host ones compute shape math
  const FlagValues* flags = nullptr;
  WeightCache* weights = nullptr;
  SubgraphCompiler* subgraphs = nullptr;
  // Graph::describe_node of every node, made once (null: made here when needed).
  const std::vector<std::string>* labels = nullptr;
  // By node, from the plan being refitted (a template's): whether it computed the node while
  // planning. A node whose inputs are all known follows it where it can: one that ran as a step
  // stays a step whatever the size of its outputs, so one template serves every length instead of
  // one for short sequences (a small positional embedding computed while planning) and one for
  // long ones. Inference stops at the first node that cannot follow it (*planned false, reason
  // empty): that template does not fit these shapes.
  const std::vector<bool>* computed_hint = nullptr;
};

// What shape inference and kernel preparation read of some values, flattened into one key: per
// value its dtype, layout block, known data (by its tensor, which stays the same while the data
// does) and shape; -1 for an omitted one. Appended to *key.
void append_value_key(const std::vector<int>& ids, const std::vector<PlannedValue>& values,
                      std::vector<int64_t>* key);

class ShapeMemo {
 public:
  struct Entry {
    bool valid = false;
    bool computed = false;                             // shape math: outputs are constants
    std::vector<int64_t> in;                           // append_value_key of the inputs
    std::vector<PlannedValue> out;                     // by output
    std::vector<std::shared_ptr<const Tensor>> known;  // by output, when computed
  };
  std::vector<Entry> nodes;
};

// Fills `pg` (values, ctxs, computed, known, removed). Sets *planned to false, with a reason, when
// the graph cannot be planned for shapes alone: an output shape depends on computed data (a
// Reshape to a shape fed at run time, NonZero), or a node computes strings (which never live in
// arenas). With a memo, nodes whose inputs are unchanged take their last outputs; with `lazy` as
// well, such a node that runs as a step gets no context (pg->ctxs[n] stays null).
Status infer_plan_shapes(const ShapeInputs& in, PlanGraph* pg, bool* planned,
                         std::string* dynamic_reason, ShapeMemo* memo = nullptr, bool lazy = false);

}  // namespace tern
