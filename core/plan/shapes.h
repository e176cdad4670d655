// The planner's first stage: shape inference over the whole graph for one set of input shapes.
// Every value gets its dtype and shape and every node its context; shape math (Shape -> Gather ->
// Concat -> Reshape, any node whose inputs are all known) is computed now and its outputs become
// constants of the plan.
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
};

// Fills `pg` (values, ctxs, known, removed). Returns false in *dynamic with a reason when the
// graph cannot be planned for shapes alone: an output shape depends on computed data (a Reshape
// to a shape fed at run time, NonZero), or a node computes strings (which never live in arenas).
Status infer_plan_shapes(const ShapeInputs& in, PlanGraph* pg, bool* planned,
                         std::string* dynamic_reason);

}  // namespace tern
