// What If, Loop and Scan share: where a subgraph's captured values sit among the node's inputs,
// compiling a subgraph through the session (OpContext::subgraphs), handing a subgraph's results
// to the node's outputs, and slicing and stacking tensors along an axis.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/subgraph.h"

namespace tern::ops {

// One subgraph attribute of a node and the node inputs its captured values come from.
struct SubgraphSlot {
  const Graph* graph = nullptr;
  size_t first_captured = 0;  // index of its first captured value among the node's inputs
  size_t formal = 0;          // its formal inputs (Graph::inputs before the captured ones)
};

// The node's subgraph attribute `name`, with where its captured values start (captured values
// follow the formal inputs, subgraph by subgraph in attribute-name order: core/graph.h).
Expected<SubgraphSlot> subgraph_slot(const OpContext& ctx, const std::string& name);

// The flags a subgraph runs under: the plan's (ctx.flags), or the global values.
FlagValues subgraph_flags(const OpContext& ctx);

// The TensorInfos of the subgraph's inputs: `formal` (types only: values that change between
// iterations are never compiled in), then the captured values as the node sees them (a known
// value, a constant of the graph around it, is compiled in).
std::vector<TensorInfo> subgraph_inputs(const OpContext& ctx, const SubgraphSlot& slot,
                                        std::vector<TensorInfo> formal);

// Compiles the subgraph through the session; UNSUPPORTED outside a session.
Expected<std::shared_ptr<const SubgraphRunner>> compile_subgraph(
    const OpContext& ctx, const SubgraphSlot& slot, const std::vector<TensorInfo>& inputs);

// The subgraph inputs of one call: `formal`, then the node's captured inputs of the slot.
std::vector<const Tensor*> call_inputs(const KernelArgs& a, const SubgraphSlot& slot,
                                       std::vector<const Tensor*> formal);

// Hands a result to a node output: copied into a planned output (its shape must match), or
// becomes the output when the kernel allocates its outputs (OpContext::outputs_from_run).
Status set_output(Tensor&& result, Tensor* out, const std::string& what);

// A TensorInfo of a scalar type (a Loop's iteration number or condition).
TensorInfo scalar_info(DType dtype);

// `t` with index `i` of axis `axis` taken out (rank one less): a view when the axis is the outer
// one, otherwise a copy.
Expected<Tensor> slice_axis(const Tensor& t, int64_t axis, int64_t i);

// Copies `part` into slot t of `out`, the stack of T parts along its axis `axis` (slot T - 1 - t
// when `reverse`): a scan output written in place as each iteration makes it. `out` must have the
// part's dtype and shape with T inserted at `axis`.
Status place_part(const Tensor& part, int64_t t, int64_t T, int64_t axis, bool reverse, Tensor* out,
                  const std::string& what);

// The tensors, all of one dtype and shape, stacked along a new axis `axis` of the result (rank
// one more); `reverse` stacks them last to first. `elem_shape`/`dtype` give the result's shape
// and dtype when `parts` is empty.
Status stack_axis(const std::vector<Tensor>& parts, int64_t axis, bool reverse, DType dtype,
                  const Shape& elem_shape, Tensor* out, const std::string& what);

// Whether a Loop body's condition output is always true: a constant true, or the body's own
// condition input passed through (Identity chains included) while the loop starts true.
bool body_keeps_condition(const Graph& body);

}  // namespace tern::ops
