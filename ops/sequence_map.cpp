// SequenceMap (opset 17): runs its body once per element of the input sequence; each additional
// input is passed whole when it is a tensor and element by element when it is a sequence (of the
// same length). Each body output becomes a sequence. The body is compiled once per session
// (core/subgraph.h).
#include "ops/common/control_flow.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

struct MapParams {
  ops::SubgraphSlot body;
  std::shared_ptr<const SubgraphRunner> run;
  std::vector<DType> out_elems;  // the body outputs' declared dtypes (for an empty sequence)
};

Status infer_sequence_map(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::SubgraphSlot slot, ops::subgraph_slot(ctx, "body"));
  const size_t formal = formal_inputs(*ctx.node);
  if (slot.formal != formal) {
    return invalid_model("the body takes ", slot.formal, " inputs, the node gives ", formal);
  }
  if (slot.graph->outputs.size() != ctx.outputs.size()) {
    return invalid_model("the body gives ", slot.graph->outputs.size(), " outputs, the node has ",
                         ctx.outputs.size());
  }
  if (ctx.inputs[0].dtype != DType::kSequence) return ops::dtype_error(ctx, 0, "sequence");
  for (size_t i = 0; i < formal; ++i) {
    if (ctx.inputs[i].dtype == DType::kSequence && !ctx.inputs[i].value) {
      ctx.needs_values = true;
      return unsupported("input '", ctx.input_names[i], "' is a sequence computed at run time");
    }
  }
  for (size_t o = 0; o < ctx.outputs.size(); ++o) ctx.set_output(o, DType::kSequence, {});
  ctx.outputs_from_run = true;
  return Status::ok();
}

Status run_sequence_map(const MapParams& p, const KernelArgs& a, const ExecContext& exec) {
  const SequenceData* s = a.inputs[0]->as_sequence();
  const size_t n = s->items.size();
  const size_t formal = p.body.formal;
  for (size_t i = 1; i < formal; ++i) {
    const SequenceData* extra = a.inputs[i]->as_sequence();
    if (extra && extra->items.size() != n) {
      return invalid_argument("additional input ", i - 1, " is a sequence of ", extra->items.size(),
                              ", the input sequence has ", n);
    }
  }
  std::vector<std::vector<Tensor>> outs(a.outputs.size());
  std::vector<const Tensor*> call(formal);
  std::vector<Tensor> result;
  for (size_t k = 0; k < n; ++k) {
    call[0] = &s->items[k];
    for (size_t i = 1; i < formal; ++i) {
      const SequenceData* extra = a.inputs[i]->as_sequence();
      call[i] = extra ? &extra->items[k] : a.inputs[i];
    }
    TERN_RETURN_IF_ERROR(check_run(exec.control, "a SequenceMap element"));
    TERN_RETURN_IF_ERROR(p.run->run(ops::call_inputs(a, p.body, call), &result, exec.control)
                             .with_prefix(str_cat("element ", k)));
    for (size_t o = 0; o < outs.size(); ++o) outs[o].push_back(std::move(result[o]));
  }
  for (size_t o = 0; o < outs.size(); ++o) {
    const DType elem = outs[o].empty() ? p.out_elems[o] : outs[o][0].dtype();
    if (a.outputs[o]) *a.outputs[o] = Tensor::sequence(elem, std::move(outs[o]));
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_sequence_map(const OpContext& ctx) {
  MapParams p;
  TERN_ASSIGN_OR_RETURN(p.body, ops::subgraph_slot(ctx, "body"));
  std::vector<TensorInfo> formal;
  for (size_t i = 0; i < p.body.formal; ++i) {
    const TensorInfo& in = ctx.inputs[i];
    const SequenceData* s = in.value ? in.value->as_sequence() : nullptr;
    if (in.dtype == DType::kSequence && !s) return unsupported("the sequences are not known");
    formal.push_back(ops::scalar_info(s ? s->elem : in.dtype));
  }
  TERN_ASSIGN_OR_RETURN(
      p.run, ops::compile_subgraph(ctx, p.body, ops::subgraph_inputs(ctx, p.body, formal)));
  for (int id : p.body.graph->outputs) {
    p.out_elems.push_back(p.body.graph->values[static_cast<size_t>(id)].type.dtype);
  }
  return make_kernel("subgraph", std::move(p), run_sequence_map);
}

}  // namespace

TERN_REGISTRATION void register_op_sequence_map(OpRegistry& r) {
  r.add({"SequenceMap",
         1,
         1 << 20,
         1,
         1 << 20,
         infer_sequence_map,
         make_sequence_map,
         {},
         attrs("body")});
}

}  // namespace tern
