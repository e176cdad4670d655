// If (opsets 1 to 23): runs then_branch or else_branch by a boolean condition. Each branch is
// compiled once per session (core/subgraph.h) and planned per input shapes; the outputs' shapes
// are known while planning when both branches agree on them (or the condition is a constant),
// otherwise the node's outputs are known only when it runs.
#include "ops/common/control_flow.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

struct IfParams {
  ops::SubgraphSlot then_slot, else_slot;
  std::shared_ptr<const SubgraphRunner> then_run, else_run;
};

Status check_condition(const OpContext& ctx) {
  const TensorInfo& c = ctx.inputs[0];
  if (c.dtype != DType::kBool) return ops::dtype_error(ctx, 0, "bool");
  int64_t n = 1;
  for (int64_t d : c.shape) n *= d;
  if (n != 1) {
    return invalid_argument("the condition '", ctx.input_names[0],
                            "' must hold one value, it has shape ", shape_str(c.shape));
  }
  return Status::ok();
}

// The branch's outputs for the node's inputs; *known is false when their shapes depend on data.
Status branch_outputs(const OpContext& ctx, const ops::SubgraphSlot& slot,
                      std::vector<TensorInfo>* outs, bool* known) {
  const std::vector<TensorInfo> ins = ops::subgraph_inputs(ctx, slot, {});
  if (slot.formal != 0) {
    return invalid_model("an If branch takes no inputs of its own, it declares ", slot.formal);
  }
  if (slot.graph->outputs.size() != ctx.outputs.size()) {
    return invalid_model("the node has ", ctx.outputs.size(), " outputs, a branch gives ",
                         slot.graph->outputs.size());
  }
  if (!ctx.subgraphs) {
    // Outside a session: the dtypes the branch declares, shapes when it runs.
    *known = false;
    outs->clear();
    for (int id : slot.graph->outputs) {
      TensorInfo t;
      t.present = true;
      t.dtype = slot.graph->values[static_cast<size_t>(id)].type.dtype;
      outs->push_back(t);
    }
    return Status::ok();
  }
  TERN_ASSIGN_OR_RETURN(auto runner, ops::compile_subgraph(ctx, slot, ins));
  return runner->infer(ins, outs, known);
}

Status infer_if(OpContext& ctx) {
  TERN_RETURN_IF_ERROR(check_condition(ctx));
  TERN_ASSIGN_OR_RETURN(ops::SubgraphSlot then_slot, ops::subgraph_slot(ctx, "then_branch"));
  TERN_ASSIGN_OR_RETURN(ops::SubgraphSlot else_slot, ops::subgraph_slot(ctx, "else_branch"));
  // A condition known while planning: only that branch counts.
  const Tensor* cond = ctx.inputs[0].value;
  std::vector<const ops::SubgraphSlot*> taken;
  if (!cond || cond->int_at(0) != 0) taken.push_back(&then_slot);
  if (!cond || cond->int_at(0) == 0) taken.push_back(&else_slot);
  std::vector<std::vector<TensorInfo>> outs(taken.size());
  bool known = true;
  for (size_t b = 0; b < taken.size(); ++b) {
    bool k = false;
    const char* name = taken[b] == &then_slot ? "then_branch" : "else_branch";
    TERN_RETURN_IF_ERROR(
        branch_outputs(ctx, *taken[b], &outs[b], &k).with_prefix(str_cat("in ", name)));
    known = known && k;
  }
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    const TensorInfo& first = outs[0][i];
    for (size_t b = 1; b < outs.size(); ++b) {
      const TensorInfo& other = outs[b][i];
      if (first.dtype != other.dtype && first.dtype != DType::kUndefined &&
          other.dtype != DType::kUndefined) {
        return invalid_model("output ", i, " is ", dtype_name(first.dtype), " in then_branch and ",
                             dtype_name(other.dtype), " in else_branch");
      }
      known = known && first.shape == other.shape;
    }
    DType dtype = first.dtype;
    for (const auto& o : outs) dtype = dtype == DType::kUndefined ? o[i].dtype : dtype;
    known = known && dtype != DType::kUndefined;  // else the branch's run tells
    ctx.set_output(i, dtype, first.shape);
  }
  ctx.outputs_from_run = !known;
  return Status::ok();
}

Status run_if(const IfParams& p, const KernelArgs& a, const ExecContext& exec) {
  const bool take_then = a.inputs[0]->int_at(0) != 0;
  const ops::SubgraphSlot& slot = take_then ? p.then_slot : p.else_slot;
  const SubgraphRunner& runner = take_then ? *p.then_run : *p.else_run;
  std::vector<Tensor> outs;
  TERN_RETURN_IF_ERROR(runner.run(ops::call_inputs(a, slot, {}), &outs, exec.control)
                           .with_prefix(take_then ? "then_branch" : "else_branch"));
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    TERN_RETURN_IF_ERROR(ops::set_output(std::move(outs[i]), a.outputs[i],
                                         str_cat("output ", i, " of the branch taken")));
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_if(const OpContext& ctx) {
  IfParams p;
  TERN_ASSIGN_OR_RETURN(p.then_slot, ops::subgraph_slot(ctx, "then_branch"));
  TERN_ASSIGN_OR_RETURN(p.else_slot, ops::subgraph_slot(ctx, "else_branch"));
  TERN_ASSIGN_OR_RETURN(
      p.then_run,
      ops::compile_subgraph(ctx, p.then_slot, ops::subgraph_inputs(ctx, p.then_slot, {})));
  TERN_ASSIGN_OR_RETURN(
      p.else_run,
      ops::compile_subgraph(ctx, p.else_slot, ops::subgraph_inputs(ctx, p.else_slot, {})));
  return make_kernel("subgraph", std::move(p), run_if);
}

}  // namespace

TERN_REGISTRATION void register_op_if(OpRegistry& r) {
  r.add({"If", 1, 1, 1, 1 << 20, infer_if, make_if, {}, attrs("else_branch, then_branch")});
}

}  // namespace tern
