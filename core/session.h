// Session: a model compiled for an ordered list of backends. It compiles (every node checked for a
// schema and a backend, the optimizer's shape-free passes, attention patterns found), caches the
// plans the planner builds (core/plan/) per set of input shapes and plan-affecting flags, and runs
// them through the executor (core/exec/). Nothing else: the stages are modules of their own.
//
// Runs read the flags once, at their start: global values, overlaid with the session's overrides,
// then the run's. So tern_set_num_threads, tern_flag_set and friends take effect at the next run.
#pragma once

#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/exec/executor.h"
#include "core/flags.h"
#include "core/memory_budget.h"
#include "core/model.h"
#include "core/opt/attention_fusion.h"
#include "core/opt/optimizer.h"
#include "core/plan/plan.h"
#include "core/plan/planner.h"
#include "core/profiler.h"
#include "core/run_control.h"
#include "core/subgraph_sessions.h"
#include "core/thread_tuner.h"
#include "core/weight_store.h"

namespace tern {

struct SessionConfig {
  std::vector<Backend*> backends;  // preference order of the kernels runs use; must not be empty
  // Computes, when `backends` has no host backend, what is known while planning: constants
  // folded at creation and shape arithmetic (Shape, the small integer ops on shapes) computed
  // for each plan. A node computed so needs no kernel of `backends`; one that is not fails the
  // plan naming it. The C API gives the CPU backend.
  Backend* planning_host = nullptr;
  FlagOverrides overrides;        // this session's flag values (num_threads, ...)
  std::string profile_path;       // non-empty: record a trace of every run (see Profiler)
  uint64_t max_memory_bytes = 0;  // the session's memory limit (MemoryBudget); 0: none
  // The plans kept for reuse, least recently used first out, by Plan::footprint (the most recent
  // one is always kept).
  uint64_t plan_cache_bytes = kDefaultPlanCacheBytes;
  static constexpr uint64_t kDefaultPlanCacheBytes = uint64_t{4} << 20;
};

// What a session holds, for tern_session_memory_stat.
struct SessionMemory {
  size_t plans = 0;                // plans in the cache
  size_t plan_bytes = 0;           // their Plan::footprint
  size_t packed_weight_bytes = 0;  // packed layouts of the weights, once per session
  size_t arena_bytes = 0;          // run arenas held (in use and pooled)
  size_t full_plans = 0;           // plans built from scratch so far
  size_t template_plans = 0;       // plans made from a template (only shapes changed) so far
};

class Session {
 public:
  static Expected<std::unique_ptr<Session>> create(std::shared_ptr<const Model> model,
                                                   SessionConfig config);

  // inputs[i] is named input_names[i]: every input of the model, and any of its optional inputs
  // (Model::optional_inputs) to replace their initializers. outputs receives one tensor per
  // output name. run_flags
  // (may be null) overrides run-scoped flags for this run only. Inputs may be tensors on the
  // session's device (IO binding: device kernels read them where they are); outputs are host
  // tensors, or tensors on `output_device` when given (which must be host or the session's
  // device). The device's work is finished when run returns. `control` (may be null) may stop
  // the run early with kCancelled or kDeadlineExceeded (core/run_control.h); the session stays
  // usable.
  Status run(const std::vector<std::string>& input_names, const std::vector<const Tensor*>& inputs,
             const std::vector<std::string>& output_names, std::vector<Tensor>* outputs,
             const FlagOverrides* run_flags = nullptr, const Device* output_device = nullptr,
             const RunControl* control = nullptr);

  const Model& model() const { return *model_; }
  // The memory limit's account (null without a limit).
  const MemoryBudget* budget() const { return budget_.get(); }
  // The graph the session runs: the model's, after constant folding and the optimizer.
  const Graph& graph() const { return graph_; }
  const OptimizerReport& optimizer_report() const { return optimizer_report_; }
  // graph() with the weights the kernels of every plan built so far hold in layouts of their own
  // attached to their constants (Value::packed), for saving a model that starts without
  // optimizing or packing again. Returns the number of packed layouts it carries.
  size_t optimized_graph(Graph* out) const;
  // The flag values a run would use now.
  FlagValues flags(const FlagOverrides* run_flags = nullptr) const;
  // The plan for these input shapes under these flags (built if needed); for tests and profiling.
  Expected<std::shared_ptr<const Plan>> plan_for(const std::vector<Shape>& input_shapes,
                                                 const FlagValues& flags);
  Expected<std::shared_ptr<const Plan>> plan_for(const std::vector<Shape>& input_shapes) {
    return plan_for(input_shapes, flags());
  }
  size_t folded_constant_count() const { return optimizer_report_.constants_folded; }
  // The profiler when profiling was asked for, else null.
  Profiler* profiler() const { return profiler_.get(); }
  // The plan built or used most recently (null before any).
  std::shared_ptr<const Plan> last_plan() const {
    std::lock_guard<std::mutex> lock(plans_mu_);
    return last_plan_;
  }
  size_t attention_pattern_count() const { return patterns_.size(); }
  // Subgraphs compiled so far for control-flow nodes (each a nested session, made once).
  size_t subgraph_count() const { return subgraphs_->size(); }
  // Model constants uploaded to a device so far (each once per session, shared by every plan).
  size_t device_constant_count() const { return weights_->device_constant_count(); }
  SessionMemory memory() const;
  const ThreadTuner& thread_tuner() const { return tuner_; }

  // Runs with `ordered` in Model::inputs() order, every graph output wanted (host tensors), under
  // `flags` as given: the run of a subgraph's nested session (core/subgraph_sessions.h).
  Status run_resolved(std::vector<const Tensor*> ordered, const FlagValues& flags,
                      std::vector<Tensor>* outputs, const RunControl* control);

 private:
  friend class SubgraphSessions;
  Session() = default;
  static Expected<std::unique_ptr<Session>> create_charged(
      std::shared_ptr<const Model> model, SessionConfig config,
      std::shared_ptr<Profiler> profiler = nullptr);
  // The session for runs that feed these optional inputs (sorted names): compiled on first use
  // from the model with their initializers turned into inputs, sharing this one's profiler and
  // memory limit.
  Expected<Session*> variant_for(const std::vector<std::string>& fed);
  Status run_charged(const std::vector<std::string>& input_names,
                     const std::vector<const Tensor*>& inputs,
                     const std::vector<std::string>& output_names, std::vector<Tensor>* outputs,
                     const FlagOverrides* run_flags, const Device& output_device,
                     const RunControl* control);
  // Schemas and backends for every node of graph_ and of its subgraphs; recomputes order_.
  Status check_ops();
  Status check_subgraph_ops(const Graph& g) const;
  Status check_inputs(const std::vector<std::string>& names, const std::vector<const Tensor*>& ins,
                      std::vector<const Tensor*>* ordered) const;

  std::shared_ptr<const Model> model_;
  SessionConfig config_;
  std::vector<Backend*> planning_backends_;  // config_.backends, and planning_host if needed
  std::vector<size_t> order_;                // graph_'s nodes, topological
  Graph graph_;  // the model's graph after folding and the optimizer's passes
  OptimizerReport optimizer_report_;
  std::vector<AttentionMatch> patterns_;
  std::unique_ptr<WeightStore> weights_ = std::make_unique<WeightStore>();
  // Nested sessions of the subgraphs control-flow kernels run (If, Loop, Scan).
  std::unique_ptr<SubgraphSessions> subgraphs_ = std::make_unique<SubgraphSessions>(this);
  std::unique_ptr<Planner> planner_;
  std::unique_ptr<Executor> executor_;

  // Thread counts per input shapes ("cpu.adaptive_threads"), for sessions that run on the CPU only.
  ThreadTuner tuner_;
  bool cpu_only_ = true;

  std::shared_ptr<Profiler> profiler_;
  std::shared_ptr<MemoryBudget> budget_;  // charged while create and run are on the stack

  // The plan cache: most recently used first; the map finds an entry by its key (input shapes,
  // then the plan-affecting flags).
  struct CachedPlan {
    std::vector<Shape> key;
    std::shared_ptr<const Plan> plan;
    size_t bytes = 0;
  };
  mutable std::mutex plans_mu_;
  std::shared_ptr<const Plan> last_plan_;
  std::list<CachedPlan> lru_;
  std::map<std::vector<Shape>, std::list<CachedPlan>::iterator> plans_;
  size_t plan_bytes_ = 0;

  mutable std::mutex variants_mu_;
  std::map<std::vector<std::string>, std::unique_ptr<Session>> variants_;
};

}  // namespace tern
