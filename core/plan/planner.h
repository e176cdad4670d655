// The planner (DESIGN §1: partition onto backends -> memory plan -> executable plan): for one set
// of input shapes under one set of flags it runs the stages in order, each in a file of its own:
//   shapes.cpp      shape inference; shape math computed now
//   (core/opt)      the shape-aware optimizer passes: attention and residual fusion
//   layout.cpp      channel-blocked layouts for convolution chains, by the backend's rules
//   partition.cpp   a kernel per node from the backends in order, reorders and device copies
//   schedule.cpp    the step graph's width and work estimates
//   memory.cpp      buffer lifetimes, in-place sharing, arena layouts
// and returns the Plan the executor runs. A full plan's decisions are kept as a template
// (plan_template.h) for its shape class (the same plan-affecting flags, input dtypes and ranks):
// a plan for other shapes of the class re-runs shape inference, the kernels whose inputs changed
// and the memory plan only, and a full plan is made only where a decision does not hold.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/model.h"
#include "core/opt/attention_fusion.h"
#include "core/plan/plan.h"
#include "core/plan/shapes.h"
#include "core/weight_store.h"

namespace tern {

class StaticPrefixes;

// What a session gives the planner, fixed for the session's life.
struct PlannerContext {
  const Graph* graph = nullptr;  // the session's optimized graph
  const std::vector<size_t>* order = nullptr;
  const std::vector<IOInfo>* inputs = nullptr;  // the model's inputs
  std::vector<Backend*> backends;               // preference order of the kernels
  std::vector<Backend*> planning_backends;      // shape arithmetic (SessionConfig::planning_host)
  const std::vector<AttentionMatch>* attention = nullptr;
  WeightStore* weights = nullptr;
  SubgraphCompiler* subgraphs = nullptr;  // the session's, for control-flow kernels
  // The session's static prefixes of dynamic plans (core/plan/static_prefix.h).
  std::shared_ptr<StaticPrefixes> prefixes;
  std::vector<std::string> labels;        // Graph::describe_node of every node

  // What shape inference needs of this context for one set of input shapes.
  ShapeInputs shape_inputs(const std::vector<Shape>& shapes, const std::vector<DType>& dtypes,
                           const FlagValues& flags) const;
};

class PlanTemplate;

// A full plan, built from scratch; *keep (may be null) receives its decisions as a template.
Expected<std::shared_ptr<const Plan>> build_plan(const PlannerContext& pc,
                                                 const std::vector<Shape>& shapes,
                                                 const std::vector<DType>& dtypes,
                                                 const FlagValues& flags,
                                                 std::shared_ptr<PlanTemplate>* keep = nullptr);

// The planner of one session: plans from its templates where they fit, from scratch otherwise.
class Planner {
 public:
  explicit Planner(PlannerContext pc) : pc_(std::move(pc)) {}
  // `flag_key` is Flags::plan_key of `flags` for the session's backends.
  Expected<std::shared_ptr<const Plan>> plan(const std::vector<Shape>& shapes,
                                             const std::vector<DType>& dtypes,
                                             const FlagValues& flags,
                                             const std::vector<int64_t>& flag_key);
  // Full plans built and plans made from a template so far.
  size_t full_plans() const;
  size_t template_plans() const;

 private:
  // Templates kept per shape class, newest first.
  static constexpr size_t kTemplatesPerClass = 4;
  PlannerContext pc_;
  mutable std::mutex mu_;
  std::map<std::vector<int64_t>, std::vector<std::shared_ptr<PlanTemplate>>> templates_;
  size_t full_plans_ = 0, template_plans_ = 0;
};

}  // namespace tern
