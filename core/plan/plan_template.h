// A plan template: what a full plan decided that a plan for other input shapes of the same class
// can keep (which nodes are shape math and which run as steps, the fusions, the layouts, each
// step's backend, the reorders and copies), so that a new shape re-runs shape inference (only for
// the nodes whose inputs changed, ShapeMemo), checks the decisions still hold, prepares the kernels
// of the steps whose inputs changed (on the backend chosen before; kernels are cached per step and
// input shapes) and plans memory, nothing else. A decode step one token longer than the last, or
// a sentence of another length, costs that instead of a full plan.
//
// A template owns the nodes its plans compute that the graph lacks (fused nodes, reorders,
// copies); its plans keep it alive through Plan::nodes_owner.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "core/plan/plan.h"
#include "core/plan/planner.h"
#include "core/plan/shapes.h"

namespace tern {

class PlanTemplate : public std::enable_shared_from_this<PlanTemplate> {
 public:
  // The decisions of `plan`, just built from `pg` (the whole of partition's output) with `memo`
  // filled by its shape inference. Takes pg's nodes; sets plan->nodes_owner to the template.
  static std::shared_ptr<PlanTemplate> capture(PlanGraph& pg, ShapeMemo memo, Plan* plan);

  // A plan for these shapes with the template's decisions, or null when one of them does not hold
  // (a node that was shape math now runs, a fusion's shapes no longer fit, a kernel declines):
  // the caller then plans from scratch. Errors other than UNSUPPORTED from a kernel are returned.
  Expected<std::shared_ptr<const Plan>> instantiate(const PlannerContext& pc,
                                                    const std::vector<Shape>& shapes,
                                                    const std::vector<DType>& dtypes,
                                                    const FlagValues& flags) const;

 private:
  struct Step {
    PlanStep shape;   // the step without its kernel (a copy step keeps its kernel: it has no shape)
    int fusion = -1;  // index into fusions_ for a fused step
    // Kernels prepared for earlier input shapes, newest last.
    struct CachedKernel {
      uint64_t hash = 0;         // of key: most entries are told apart without reading the key
      std::vector<int64_t> key;  // the inputs' and outputs' keys (kernel_key)
      std::shared_ptr<const Kernel> kernel;
    };
    mutable std::vector<CachedKernel> kernels;
  };
  struct ValueDecision {
    PlannedValue::Where where = PlannedValue::Where::kNone;
    int block = 0;
    bool channels_last = false;  // block is the channel count (one block of all channels)
    Device device;
  };
  static constexpr size_t kKernelsPerStep = 8;

  bool refit_fusions(const PlannerContext& pc, PlanGraph& pg,
                     std::vector<std::unique_ptr<OpContext>>* fused) const;
  Status decide_values(const PlannerContext& pc, PlanGraph& pg, Plan* plan, bool* fits) const;
  Status instantiate_steps(PlanGraph& pg, std::vector<std::unique_ptr<OpContext>>& fused,
                           Plan* plan, bool* fits) const;

  size_t graph_values_ = 0;
  std::vector<bool> computed_;  // by graph node
  std::vector<FusionRecord> fusions_;
  std::vector<ValueDecision> values_;  // by plan value
  std::vector<int> twin_of_;           // by planner-made value (index - graph_values_)
  std::vector<Step> steps_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<bool> input_read_on_host_;
  Backend* device_backend_ = nullptr;
  size_t reorders_ = 0, transfers_ = 0, device_steps_ = 0, fused_attention_ = 0,
         fused_residuals_ = 0;

  mutable std::mutex mu_;  // instantiate() runs one at a time: it updates the memo and caches
  mutable ShapeMemo memo_;
  mutable PlanGraph scratch_;
};

}  // namespace tern
