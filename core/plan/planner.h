// The planner (DESIGN §1: partition onto backends -> memory plan -> executable plan): for one set
// of input shapes under one set of flags it runs the stages in order, each in a file of its own:
//   shapes.cpp      shape inference; shape math computed now
//   (core/opt)      the shape-aware optimizer passes: attention and residual fusion
//   layout.cpp      channel-blocked layouts for convolution chains, by the backend's rules
//   partition.cpp   a kernel per node from the backends in order, reorders and device copies
//   schedule.cpp    the step graph's width and work estimates
//   memory.cpp      buffer lifetimes, in-place sharing, arena layouts
// and returns the Plan the executor runs.
#pragma once

#include <memory>
#include <vector>

#include "core/model.h"
#include "core/opt/attention_fusion.h"
#include "core/plan/plan.h"
#include "core/weight_store.h"

namespace tern {

// What a session gives the planner, fixed for the session's life.
struct PlannerContext {
  const Graph* graph = nullptr;  // the session's optimized graph
  const std::vector<size_t>* order = nullptr;
  const std::vector<IOInfo>* inputs = nullptr;  // the model's inputs
  std::vector<Backend*> backends;               // preference order
  const std::vector<AttentionMatch>* attention = nullptr;
  WeightStore* weights = nullptr;
};

Expected<std::shared_ptr<const Plan>> build_plan(const PlannerContext& pc,
                                                 const std::vector<Shape>& shapes,
                                                 const std::vector<DType>& dtypes,
                                                 const FlagValues& flags);

}  // namespace tern
