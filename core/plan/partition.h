// The planner's partition stage: each node of the plan graph gets the kernel of the first backend
// in the session's list that has one for its context (nodes a backend cannot run fall back to the
// next); a ReorderToPlain step goes before a consumer that needs plain data from a blocked value,
// and a copy step (or an upload, for constants) wherever a value produced in one memory is read by
// a kernel of another. The result is the plan's steps in order, with their dependencies.
#pragma once

#include <vector>

#include "core/plan/plan.h"
#include "core/plan_graph.h"
#include "core/weight_store.h"

namespace tern {

// Picks the kernel for ctx from `backends` in order; UNSUPPORTED lists every backend's reason.
Status choose_kernel(const OpContext& ctx, const std::vector<Backend*>& backends, PlanStep* step);

// Turns `pg` into plan->steps and plan->values (pg keeps its values, with the planner's own
// appended, and gains the reorder and copy nodes the steps compute: the plan's nodes_owner must
// keep pg.nodes alive). `weights` holds the session's device copies of model constants.
Status partition(PlanGraph& pg, const std::vector<Backend*>& backends, size_t model_inputs,
                 WeightStore* weights, Plan* plan);

}  // namespace tern
