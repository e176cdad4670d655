// Session: a model compiled for an ordered list of backends. Creation checks every node has a
// schema and a backend, and folds constant subgraphs. Each distinct set of input shapes gets an
// execution plan (shape inference, kernel choice per node, arena layout), built once and cached;
// a run then only computes.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/model.h"
#include "core/op_registry.h"

namespace tern {

struct SessionConfig {
  std::vector<Backend*> backends;  // preference order; must not be empty
  int num_threads = 1;             // intra-op threads given to kernels
};

struct PlanStep {
  size_t node = 0;
  Backend* backend = nullptr;
  std::unique_ptr<Kernel> kernel;
  std::vector<int> inputs, outputs;  // value ids (-1: omitted)
};

// Where a value's tensor comes from during a run.
struct PlannedValue {
  enum class Where { kNone, kConstant, kInput, kArena, kOutput } where = Where::kNone;
  DType dtype = DType::kUndefined;
  Shape shape;
  const Tensor* constant = nullptr;  // kConstant
  size_t input_index = 0;            // kInput: index into Model::inputs()
  size_t offset = 0;                 // kArena
};

class Plan {
 public:
  std::vector<PlannedValue> values;
  std::vector<PlanStep> steps;
  std::vector<std::unique_ptr<Tensor>> known;  // values computed while planning (shape math)
  size_t arena_bytes = 0;
  size_t naive_bytes = 0;

  // Arenas are pooled so concurrent runs each get their own and a steady run allocates none.
  std::shared_ptr<void> acquire_arena() const;
  void release_arena(std::shared_ptr<void> arena) const;

 private:
  mutable std::mutex mu_;
  mutable std::vector<std::shared_ptr<void>> free_arenas_;
};

class Session {
 public:
  static Expected<std::unique_ptr<Session>> create(std::shared_ptr<const Model> model,
                                                   SessionConfig config);

  // inputs[i] is named input_names[i]; outputs receives one tensor per output name.
  Status run(const std::vector<std::string>& input_names, const std::vector<const Tensor*>& inputs,
             const std::vector<std::string>& output_names, std::vector<Tensor>* outputs);

  const Model& model() const { return *model_; }
  // The plan for these input shapes (built if needed); for tests and profiling.
  Expected<std::shared_ptr<const Plan>> plan_for(const std::vector<Shape>& input_shapes);
  size_t folded_constant_count() const { return folded_count_; }

 private:
  Session() = default;
  Status fold_constants();
  Status check_inputs(const std::vector<std::string>& names, const std::vector<const Tensor*>& ins,
                      std::vector<const Tensor*>* ordered) const;
  Expected<std::shared_ptr<const Plan>> build_plan(const std::vector<Shape>& shapes,
                                                   const std::vector<DType>& dtypes) const;
  // Shape inference for one node from the current value infos; fills ctx.
  Status make_context(size_t node, const std::vector<PlannedValue>& values, OpContext* ctx) const;
  // Runs a node whose inputs are all known, on the first backend that has a kernel.
  Status evaluate_now(const OpContext& ctx, std::vector<Tensor>* outputs) const;

  std::shared_ptr<const Model> model_;
  SessionConfig config_;
  std::vector<size_t> order_;                    // node indices, topological
  std::vector<const OpSchema*> schemas_;         // per node
  std::vector<std::unique_ptr<Tensor>> folded_;  // constants made by folding, by value id
  std::vector<bool> node_folded_;
  size_t folded_count_ = 0;

  std::mutex plans_mu_;
  std::map<std::vector<Shape>, std::shared_ptr<const Plan>> plans_;
};

}  // namespace tern
