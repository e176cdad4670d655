// What the stages know about each value while they plan or run a graph (PlannedValue), the
// OpContext of one node built from it (shape inference included), and running one node at once
// on a host backend (constant folding, shape math, dynamic execution). Used by the optimizer's
// shape-aware passes, the planner and the executor alike.
#pragma once

#include <string>
#include <vector>

#include "core/backend.h"
#include "core/graph.h"
#include "core/kernel.h"

namespace tern {

// Where a value's tensor comes from during a run.
struct PlannedValue {
  enum class Where { kNone, kConstant, kInput, kArena, kOutput } where = Where::kNone;
  DType dtype = DType::kUndefined;
  Shape shape;
  const Tensor* constant = nullptr;  // kConstant
  size_t input_index = 0;            // kInput: index into Model::inputs()
  int block = 0;       // kArena: channel block of the layout (TensorInfo::block); 0 is plain
  Device device = {};  // whose memory holds it: kArena values of a device live in its arena

  static PlannedValue of_constant(const Tensor* t) {
    PlannedValue v;
    v.set_constant(t);
    return v;
  }
  // These assign in place, keeping the shape's storage (plan graphs reused for other shapes).
  void reset() {
    where = Where::kNone;
    dtype = DType::kUndefined;
    shape.clear();
    constant = nullptr;
    input_index = 0;
    block = 0;
    device = {};
  }
  void set_constant(const Tensor* t) {
    reset();
    where = Where::kConstant;
    dtype = t->dtype();
    shape = t->shape();
    constant = t;
  }
};

// Fills `ctx` for `node` from `values` (by value id) and runs the op's shape inference: input
// types, shapes and known data; output types and shapes, and output values computable from shapes
// alone. `graph` gives the value names, the opset and the model's packed weight layouts; `where`
// names the node in messages. An input in the schema's value_inputs whose data is not known sets
// ctx->needs_values and returns UNSUPPORTED (the graph then runs node by node).
Status make_node_context(const Graph& graph, const Node& node, const std::string& where,
                         const std::vector<PlannedValue>& values, OpContext* ctx);

// Whether ctx's outputs, at their inferred shapes (all dims known), take at most `cap` bytes
// together.
bool outputs_fit(const OpContext& ctx, int64_t cap);

// Runs ctx's node now, on the first host backend in `backends` with a kernel for it, under
// `flags` (the kernel is made under their thread count too); `outputs` receives fresh host tensors
// (an omitted optional output stays undefined).
Status evaluate_node(const OpContext& ctx, const std::vector<Backend*>& backends,
                     const FlagValues& flags, std::vector<Tensor>* outputs);

// The kernel evaluate_node would run: the first host backend's that prepares one; *backend
// receives that backend.
Expected<std::unique_ptr<Kernel>> prepare_on_host(const OpContext& ctx,
                                                  const std::vector<Backend*>& backends,
                                                  Backend** backend);
// Runs a kernel prepared for ctx (by `backend`, a host backend) now: fresh host outputs (made by
// the kernel where the outputs are known only when it runs, or are sequences or optionals),
// scratch allocated here. `control` (may be null): the run's, for kernels that run subgraphs.
Status run_prepared(const OpContext& ctx, const Kernel& kernel, Backend* backend,
                    const FlagValues& flags, std::vector<Tensor>* outputs,
                    const RunControl* control = nullptr);

}  // namespace tern
