// Session: a model compiled for an ordered list of backends. Creation checks every node has a
// schema and a backend, folds constant subgraphs and finds fusable attention subgraphs. Each
// distinct set of input shapes (and of the flags that decide kernel choice) gets an execution plan
// (shape inference, fusion, kernel choice per node, arena layouts), built once and cached; a run
// then only computes.
//
// Runs read the flags once, at their start: global values, overlaid with the session's overrides,
// then the run's. So tern_set_num_threads, tern_flag_set and friends take effect at the next run.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/attention_fusion.h"
#include "core/backend.h"
#include "core/flags.h"
#include "core/graph_optimizer.h"
#include "core/memory_budget.h"
#include "core/model.h"
#include "core/op_registry.h"
#include "core/profiler.h"

namespace tern {

struct SessionConfig {
  std::vector<Backend*> backends;  // preference order; must not be empty
  FlagOverrides overrides;         // this session's flag values (num_threads, ...)
  std::string profile_path;        // non-empty: record a trace of every run (see Profiler)
  uint64_t max_memory_bytes = 0;   // the session's memory limit (MemoryBudget); 0: none
};

struct PlanStep {
  size_t node = 0;    // graph node (for a fused step, the node whose output it writes; for an
                      // inserted reorder, the node that needed it)
  const Node* op_node = nullptr;  // what the kernel computes: the graph's node, a fused or an
                                  // inserted one (never null in a built plan)
  std::string label;  // "node 'x' (Conv)" or "fused Attention of nodes ..."
  Backend* backend = nullptr;
  std::unique_ptr<Kernel> kernel;
  std::vector<int> inputs, outputs;  // value ids (-1: omitted)
  std::vector<int> preds, succs;     // steps this one waits for / that wait for it
  bool transfer = false;             // a copy between host and device memory (core/transfer.h)
};

// Where a value's tensor comes from during a run.
struct PlannedValue {
  enum class Where { kNone, kConstant, kInput, kArena, kOutput } where = Where::kNone;
  DType dtype = DType::kUndefined;
  Shape shape;
  const Tensor* constant = nullptr;  // kConstant
  size_t input_index = 0;            // kInput: index into Model::inputs()
  int block = 0;  // kArena: channel block of the layout (TensorInfo::block); 0 is plain
  Device device = {};  // whose memory holds it: kArena values of a device live in its arena
};

// One placement of the arena buffers. The sequential layout reuses memory along the step order;
// the concurrent one only where every schedule the inter-op threads may take allows it.
struct ArenaLayout {
  std::vector<size_t> value_offset;      // by value id (kArena values)
  std::vector<size_t> workspace_offset;  // by step
  size_t bytes = 0;
  size_t naive_bytes = 0;
};

class Plan {
 public:
  std::vector<PlannedValue> values;
  std::vector<PlanStep> steps;
  std::vector<std::unique_ptr<Tensor>> known;  // values computed while planning (shape math)
  std::vector<std::unique_ptr<Node>> fused_nodes;
  size_t fused_attention = 0;  // attention subgraphs run as one kernel
  size_t fused_residuals = 0;  // Add (+ activation) folded into the convolution before it
  size_t reorders = 0;         // layout conversions to plain inserted at blocked-layout edges
  size_t in_place = 0;         // steps whose output shares its input's memory (Kernel::inplace_input)
  int width = 1;               // most steps that can run at once (widest level of the step DAG)
  double total_cost = 0;       // estimated single-core work of all steps, ns
  double critical_cost = 0;    // the same along the longest dependency chain
  ArenaLayout layouts[2];      // [0] sequential, [1] concurrent (only when width > 1)
  size_t arena_bytes = 0;      // sequential layout
  size_t packed_weight_bytes = 0;  // weight copies the kernels made (Kernel::packed_bytes)
  size_t naive_bytes = 0;
  // Device steps: the one device backend this plan runs kernels on (null: host only), its arena
  // (sequential layout), the values computed while planning that its kernels read (uploaded for
  // this plan; the model's constants are the session's, Session::device_constant), and the
  // copies inserted.
  Backend* device_backend = nullptr;
  ArenaLayout device_layout;
  std::vector<std::unique_ptr<Tensor>> device_constants;
  size_t transfers = 0;
  size_t device_steps = 0;
  // By model input: whether a host kernel reads it (a caller's device tensor is then staged to
  // host memory first; otherwise the copy step passes it on: IO binding).
  std::vector<bool> input_read_on_host;
  // Output shapes depend on input values (Reshape to a shape fed at run time, NonZero, If...) or
  // values are strings: every run infers and computes node by node instead (no steps, no arena).
  bool dynamic = false;
  std::string dynamic_reason;

  // Arenas are pooled so concurrent runs each get their own and a steady run allocates none.
  std::shared_ptr<void> acquire_arena(int layout) const;
  void release_arena(int layout, std::shared_ptr<void> arena) const;
  // The same for the device arena (allocated through device_backend).
  Expected<std::shared_ptr<void>> acquire_device_arena() const;
  void release_device_arena(std::shared_ptr<void> arena) const;
  // Captured device segments (cuda.graphs): by first step of the segment and the addresses its
  // kernels read and write, the backend's replayable capture.
  std::shared_ptr<void> find_capture(size_t first_step, const std::vector<void*>& key) const;
  void store_capture(size_t first_step, std::vector<void*> key, std::shared_ptr<void> c) const;
  // A segment whose capture failed is run eagerly from then on.
  bool capture_failed(size_t first_step) const;
  void mark_capture_failed(size_t first_step) const;
  // Whether a run of this plan has completed without capturing (captures start after one).
  bool ran_eagerly() const { return ran_eagerly_.load(std::memory_order_acquire); }
  void set_ran_eagerly() const { ran_eagerly_.store(true, std::memory_order_release); }

 private:
  mutable std::mutex mu_;
  mutable std::vector<std::shared_ptr<void>> free_arenas_[2];
  mutable std::vector<std::shared_ptr<void>> free_device_arenas_;
  mutable std::map<std::pair<size_t, std::vector<void*>>, std::shared_ptr<void>> captures_;
  mutable std::set<size_t> failed_captures_;
  mutable std::atomic<bool> ran_eagerly_{false};
};

// Whether a run with these thread counts executes independent steps of the plan at the same
// time (inter-op) rather than one after another.
bool runs_concurrently(const Plan& plan, int threads, int interop);

class Session {
 public:
  static Expected<std::unique_ptr<Session>> create(std::shared_ptr<const Model> model,
                                                   SessionConfig config);

  // inputs[i] is named input_names[i]; outputs receives one tensor per output name. run_flags
  // (may be null) overrides run-scoped flags for this run only. Inputs may be tensors on the
  // session's device (IO binding: device kernels read them where they are); outputs are host
  // tensors, or tensors on `output_device` when given (which must be host or the session's
  // device). The device's work is finished when run returns.
  Status run(const std::vector<std::string>& input_names, const std::vector<const Tensor*>& inputs,
             const std::vector<std::string>& output_names, std::vector<Tensor>* outputs,
             const FlagOverrides* run_flags = nullptr, const Device* output_device = nullptr);

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
  size_t folded_constant_count() const { return folded_count_; }
  // The profiler when profiling was asked for, else null.
  Profiler* profiler() const { return profiler_.get(); }
  // The plan built or used most recently (null before any).
  std::shared_ptr<const Plan> last_plan() const {
    std::lock_guard<std::mutex> lock(plans_mu_);
    return last_plan_;
  }
  size_t attention_pattern_count() const { return patterns_.size(); }
  // Model constants uploaded to a device so far (each once per session, shared by every plan).
  size_t device_constant_count() const {
    std::lock_guard<std::mutex> lock(device_constants_mu_);
    return device_constants_.size();
  }

 private:
  Session() = default;
  static Expected<std::unique_ptr<Session>> create_charged(std::shared_ptr<const Model> model,
                                                           SessionConfig config);
  Status run_charged(const std::vector<std::string>& input_names,
                     const std::vector<const Tensor*>& inputs,
                     const std::vector<std::string>& output_names, std::vector<Tensor>* outputs,
                     const FlagOverrides* run_flags, const Device& output_device);
  // The session's backend whose memory is `d` (null: none).
  Backend* backend_for(const Device& d) const;
  // `t` in `to`'s memory: itself when already there, else a copy.
  Expected<Tensor> moved_to(const Tensor& t, const Device& to) const;
  // The model constant `host` in `dev`'s memory: uploaded the first time a plan of this session
  // needs it there, then shared by every plan (one device copy per session, not per plan).
  Expected<const Tensor*> device_constant(const Tensor& host, Backend* dev) const;
  // Schemas and backends for every node of graph_; recomputes order_.
  Status check_ops();
  // Computes nodes whose inputs are all constant and stores their outputs as constants.
  Status fold_constants();
  Status check_inputs(const std::vector<std::string>& names, const std::vector<const Tensor*>& ins,
                      std::vector<const Tensor*>* ordered) const;
  Expected<std::shared_ptr<const Plan>> build_plan(const std::vector<Shape>& shapes,
                                                   const std::vector<DType>& dtypes,
                                                   const FlagValues& flags) const;
  // Shape inference for one node from the current value infos; fills ctx.
  Status make_context(const Node& node, const std::string& where,
                      const std::vector<PlannedValue>& values, OpContext* ctx) const;
  Status make_context(size_t node, const std::vector<PlannedValue>& values, OpContext* ctx) const;
  // Runs a node whose inputs are all known, on the first backend that has a kernel.
  Status evaluate_now(const OpContext& ctx, std::vector<Tensor>* outputs,
                      const FlagValues* flags = nullptr) const;
  // A run of a dynamic plan: shape inference and a kernel per node, on the actual values.
  Status run_dynamic(const std::vector<const Tensor*>& ordered, const std::vector<int>& wanted,
                     const FlagValues& flags, std::vector<Tensor>* outputs) const;
  // The fused Attention step for a match, or nothing when shapes/dtypes/kernels do not fit.
  bool try_fuse(const AttentionMatch& m, const std::vector<PlannedValue>& values,
                const FlagValues& flags, Plan* plan, PlanStep* step) const;
  // Plan-time fusions that need shapes: Add(Conv(..), Z) of equal shapes into FusedConv with a
  // residual, and the activation after it. Fused nodes replace ctxs[anchor]; the rest is removed.
  void fuse_residual_adds(std::vector<PlannedValue>& values,
                          std::vector<std::unique_ptr<OpContext>>& ctxs, std::vector<bool>& removed,
                          const FlagValues& flags, Plan* plan) const;
  // Chooses channel-blocked layouts for convolution chains (see session_layout.cpp).
  void plan_layouts(std::vector<PlannedValue>& values,
                    const std::vector<std::unique_ptr<OpContext>>& ctxs,
                    const std::vector<bool>& removed, const FlagValues& flags) const;
  // Whether a node's kernel is chosen with its blocked inputs as they are (convolutions, ops whose
  // output the planner blocked, global pooling); other nodes get plain copies of them.
  static bool reads_blocked(const Node& node, int output_block);
  // Picks the kernel for a context from the backends in order.
  Status choose_kernel(const OpContext& ctx, PlanStep* step) const;
  Status execute_sequential(const Plan& plan, std::vector<Tensor>& tensors, uint8_t* base,
                            uint8_t* device_base, int threads, bool deterministic,
                            bool capture) const;
  Status execute_concurrent(const Plan& plan, std::vector<Tensor>& tensors, uint8_t* base,
                            int threads, int interop, bool deterministic) const;
  void record_step(const PlanStep& step, const KernelArgs& args, Profiler::Clock::time_point t0,
                   const ExecContext& exec) const;
  Status run_step(const Plan& plan, const PlanStep& step, std::vector<Tensor>& tensors,
                  uint8_t* base, uint8_t* device_base, int layout, const ExecContext& exec) const;

  std::shared_ptr<const Model> model_;
  SessionConfig config_;
  std::vector<size_t> order_;                    // node indices, topological
  std::vector<const OpSchema*> schemas_;         // per node
  Graph graph_;  // the model's graph after folding and the optimizer's passes
  OptimizerReport optimizer_report_;
  size_t folded_count_ = 0;
  std::vector<AttentionMatch> patterns_;

  std::unique_ptr<Profiler> profiler_;
  std::shared_ptr<MemoryBudget> budget_;  // charged while create and run are on the stack

  mutable std::mutex device_constants_mu_;
  mutable std::map<std::tuple<const Tensor*, int, int>, std::unique_ptr<Tensor>> device_constants_;

  mutable std::mutex plans_mu_;
  std::shared_ptr<const Plan> last_plan_;
  std::map<std::vector<Shape>, std::shared_ptr<const Plan>> plans_;
};

}  // namespace tern
