// The executor (DESIGN §1, the last stage): runs a finished Plan. Steps run in order on the
// calling thread (device stretches captured once and replayed under cuda.graphs), or, for plans
// with independent branches, on inter-op threads as their inputs become ready. A dynamic plan
// (shapes that depend on computed values) is computed node by node with shape inference on the
// actual values. It never plans: whatever runs a plan (a session, or a subgraph's caller) gives it
// one.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/exec/arena_pool.h"
#include "core/model.h"
#include "core/plan/plan.h"
#include "core/profiler.h"

namespace tern {

// Whether a run with these thread counts executes independent steps of the plan at the same
// time (inter-op) rather than one after another.
bool runs_concurrently(const Plan& plan, int threads, int interop);

class Executor {
 public:
  // `graph`, `order` and `inputs` describe what dynamic plans compute; `backends` are the
  // session's (the plan's steps use some of them); `profiler` may be null.
  Executor(const Graph& graph, const std::vector<size_t>& order, const std::vector<IOInfo>& inputs,
           const std::vector<Backend*>& backends, Profiler* profiler)
      : graph_(graph), order_(order), inputs_(inputs), backends_(backends), profiler_(profiler) {}

  // Runs `plan` on `inputs` (by model input; host tensors, or tensors on the plan's device) and
  // returns the values `wanted` (graph value ids) as tensors on `output_device` (host or the
  // plan's device). The device's work is finished when it returns. `control` (may be null) is
  // checked before every step (before every captured segment, which replays whole) and every
  // node of a dynamic plan; kernels get it in ExecContext.
  Status run(const Plan& plan, std::vector<const Tensor*> inputs, const std::vector<int>& wanted,
             const FlagValues& flags, const Device& output_device, std::vector<Tensor>* outputs,
             const RunControl* control = nullptr) const;

  // Bytes of run arenas held (in use and kept for the next runs), host and devices together.
  size_t arena_bytes() const;
  // What kernels prepared during dynamic runs get (OpContext::weights, ::subgraphs).
  void set_services(WeightCache* weights, SubgraphCompiler* subgraphs) {
    weights_ = weights;
    subgraphs_ = subgraphs;
  }
  // The profile category (and name) of a run's event: "run", or "subgraph" for the runs of a
  // subgraph inside a control-flow step.
  void set_run_category(std::string c) { run_category_ = std::move(c); }

 private:
  Status run_static(const Plan& plan, const std::vector<const Tensor*>& inputs,
                    const std::vector<int>& wanted, const FlagValues& flags,
                    const Device& output_device, std::vector<Tensor>* outputs,
                    const RunControl* control) const;
  Status run_dynamic(const Plan& plan, const std::vector<const Tensor*>& inputs,
                     const std::vector<int>& wanted, const FlagValues& flags,
                     std::vector<Tensor>* outputs, const RunControl* control) const;
  // Dynamic runs' kernels, prepared once per node and input signature (core/exec/dynamic.cpp).
  struct DynamicKernel {
    std::shared_ptr<const Kernel> kernel;
    Backend* backend = nullptr;
  };
  Expected<std::shared_ptr<const DynamicKernel>> dynamic_kernel(size_t n,
                                                                const OpContext& ctx) const;
  void record_dynamic(const OpContext& ctx, const DynamicKernel& dk,
                      const std::vector<Tensor>& outs, Profiler::Clock::time_point t0,
                      const FlagValues& flags) const;
  static constexpr size_t kMaxDynamicKernels = 4096;
  Status execute_sequential(const Plan& plan, std::vector<Tensor>& tensors, uint8_t* base,
                            uint8_t* device_base, const ExecContext& exec, bool capture) const;
  // cpu_affinity: the run's "cpu.affinity" list id; pool threads are pinned to it while they
  // work for the run.
  Status execute_concurrent(const Plan& plan, std::vector<Tensor>& tensors, uint8_t* base,
                            int interop, const ExecContext& exec, int64_t cpu_affinity) const;
  Status run_step(const Plan& plan, const PlanStep& step, std::vector<Tensor>& tensors,
                  uint8_t* base, uint8_t* device_base, int layout, const ExecContext& exec) const;
  void record_step(const PlanStep& step, const KernelArgs& args, Profiler::Clock::time_point t0,
                   const ExecContext& exec) const;

  const Graph& graph_;
  const std::vector<size_t>& order_;
  const std::vector<IOInfo>& inputs_;
  ArenaPool& device_arenas(Backend* device) const;

  const std::vector<Backend*>& backends_;
  Profiler* profiler_;
  WeightCache* weights_ = nullptr;
  SubgraphCompiler* subgraphs_ = nullptr;
  std::string run_category_ = "run";
  // Every plan's runs take their arenas from these.
  mutable ArenaPool host_arenas_;
  mutable std::mutex dynamic_mu_;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<const DynamicKernel>> dynamic_kernels_;
  mutable std::mutex pools_mu_;
  mutable std::map<Backend*, std::unique_ptr<ArenaPool>> device_arenas_;
};

}  // namespace tern
