// The executable plan (DESIGN §1, the planner's output and the executor's input): for one set of
// input shapes under one set of plan-affecting flags, every value's place (constant, input, arena
// offset, output), the steps in order with their kernels, and the arena layouts. Immutable once
// built, except for the run-time pools and captures it keeps for the executor.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/node_context.h"

namespace tern {

struct PlanStep {
  size_t node = 0;  // graph node (for a fused step, its anchor; for an inserted reorder or copy,
                    // the node that needed it)
  const Node* op_node = nullptr;  // what the kernel computes: the graph's node, a fused or an
                                  // inserted one (never null in a built plan)
  std::string label;              // "node 'x' (Conv)" or "fused Attention of nodes ..."
  Backend* backend = nullptr;
  std::shared_ptr<const Kernel> kernel;
  std::vector<int> inputs, outputs;  // value ids (-1: omitted)
  std::vector<int> preds, succs;     // steps this one waits for / that wait for it
  bool transfer = false;             // a copy between host and device memory (core/transfer.h)
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
  std::vector<std::shared_ptr<const Tensor>> known;  // values computed while planning (shape math)
  // What owns the nodes the steps compute that the graph lacks (fused ones, reorders, copies):
  // the plan template every plan made with its decisions shares (core/plan/plan_template.h).
  std::shared_ptr<const void> nodes_owner;
  size_t fused_attention = 0;  // attention subgraphs run as one kernel
  size_t fused_residuals = 0;  // Add (+ activation) folded into the convolution before it
  size_t reorders = 0;         // layout conversions to plain inserted at blocked-layout edges
  size_t in_place = 0;       // steps whose output shares its input's memory (Kernel::inplace_input)
  int width = 1;             // most steps that can run at once (widest level of the step DAG)
  double total_cost = 0;     // estimated single-core work of all steps, ns
  double critical_cost = 0;  // the same along the longest dependency chain
  std::vector<double> step_cost;  // by step, the estimate behind total_cost
  // The executor's choice (runs_concurrently) for the latest (threads, interop) asked:
  // (threads << 32 | interop) << 1 | concurrent, -1 before any.
  mutable std::atomic<int64_t> concurrent_memo{-1};
  ArenaLayout layouts[2];          // [0] sequential, [1] concurrent (only when width > 1)
  size_t arena_bytes = 0;          // sequential layout
  size_t packed_weight_bytes = 0;  // weight copies the kernels made (Kernel::packed_bytes)
  size_t naive_bytes = 0;
  // Device steps: the one device backend this plan runs kernels on (null: host only), its arena
  // (sequential layout), the values computed while planning that its kernels read (uploaded for
  // this plan; the model's constants are the session's, WeightStore::device_constant), and the
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
  // A dynamic plan's nodes that plan statically, run first as a plan of their own (null: none).
  std::shared_ptr<const struct StaticPrefix> prefix;

  // Memory the plan holds beyond the model and the session (values, steps, values computed while
  // planning, device copies of them): what the session's plan cache counts.
  size_t footprint() const;
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
  mutable std::map<std::pair<size_t, std::vector<void*>>, std::shared_ptr<void>> captures_;
  mutable std::set<size_t> failed_captures_;
  mutable std::atomic<bool> ran_eagerly_{false};
};

}  // namespace tern
