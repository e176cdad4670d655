// Loop (opsets 1 to 23): runs its body while the iteration count M and the condition allow,
// carrying N values from one iteration to the next and stacking K per-iteration scan outputs.
// The body is compiled once per session and planned per input shapes, so an iteration costs the
// body's kernels plus a small constant. Output shapes are known while planning when the carried
// values keep their shapes and, for scan outputs, when the trip count is: M is a constant and the
// condition cannot turn false (the body passes it through or makes it true).
#include <limits>

#include "ops/common/control_flow.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

struct LoopParams {
  ops::SubgraphSlot body;
  std::shared_ptr<const SubgraphRunner> run;
  size_t carried = 0, scans = 0;
  std::vector<DType> scan_dtypes;  // for scan outputs of a loop that ran no iteration
  std::vector<Shape> scan_shapes;
};

Status check_counts(const OpContext& ctx, const ops::SubgraphSlot& slot, size_t* carried,
                    size_t* scans) {
  const size_t formal = formal_inputs(*ctx.node);
  if (formal < 2) return invalid_model("a Loop takes M, cond and the carried values");
  *carried = formal - 2;
  if (slot.formal != 2 + *carried) {
    return invalid_model("the body takes ", slot.formal, " inputs; the node passes ", *carried,
                         " carried values, so the body must take ", 2 + *carried,
                         " (iteration number, condition, carried values)");
  }
  const size_t body_outs = slot.graph->outputs.size();
  if (body_outs < 1 + *carried) {
    return invalid_model("the body gives ", body_outs, " outputs, fewer than the condition and ",
                         *carried, " carried values");
  }
  *scans = body_outs - 1 - *carried;
  if (ctx.outputs.size() != *carried + *scans) {
    return invalid_model("the node has ", ctx.outputs.size(), " outputs; its body carries ",
                         *carried, " values and gives ", *scans, " scan outputs");
  }
  if (ctx.has_input(0) && ctx.inputs[0].dtype != DType::kInt64) {
    return ops::dtype_error(ctx, 0, "int64");
  }
  if (ctx.has_input(1) && ctx.inputs[1].dtype != DType::kBool)
    return ops::dtype_error(ctx, 1, "bool");
  return Status::ok();
}

std::vector<TensorInfo> body_formal(const OpContext& ctx, size_t carried) {
  std::vector<TensorInfo> f{ops::scalar_info(DType::kInt64), ops::scalar_info(DType::kBool)};
  for (size_t j = 0; j < carried; ++j) f.push_back(ctx.inputs[2 + j]);
  return f;
}

// The trip count when it is known while planning: M a constant and a condition that stays true.
std::optional<int64_t> known_trip_count(const OpContext& ctx, const Graph& body) {
  if (!ctx.has_input(0) || !ctx.inputs[0].value) return std::nullopt;
  if (ctx.has_input(1) && (!ctx.inputs[1].value || ctx.inputs[1].value->int_at(0) == 0)) {
    // A false start runs no iteration; an unknown one may.
    if (!ctx.inputs[1].value) return std::nullopt;
    return 0;
  }
  if (!ops::body_keeps_condition(body)) return std::nullopt;
  return std::max<int64_t>(0, ctx.inputs[0].value->int_at(0));
}

Status infer_loop(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::SubgraphSlot slot, ops::subgraph_slot(ctx, "body"));
  size_t carried = 0, scans = 0;
  TERN_RETURN_IF_ERROR(check_counts(ctx, slot, &carried, &scans));
  const Graph& body = *slot.graph;
  std::vector<TensorInfo> formal = body_formal(ctx, carried);
  std::vector<TensorInfo> outs;
  bool known = false;
  if (ctx.subgraphs) {
    TERN_ASSIGN_OR_RETURN(
        auto runner, ops::compile_subgraph(ctx, slot, ops::subgraph_inputs(ctx, slot, formal)));
    // Carried values may change shape in the first iterations (a state that grows once): a few
    // rounds of inference find shapes that stay, or leave them to the run.
    for (int round = 0; round < 3; ++round) {
      TERN_RETURN_IF_ERROR(runner->infer(ops::subgraph_inputs(ctx, slot, formal), &outs, &known)
                               .with_prefix("in the body"));
      if (!known) break;
      bool stable = true;
      for (size_t j = 0; j < carried; ++j) {
        const TensorInfo& o = outs[1 + j];
        if (o.dtype != formal[2 + j].dtype) {
          return invalid_model("carried value ", j, " enters the body as ",
                               dtype_name(formal[2 + j].dtype), " and leaves it as ",
                               dtype_name(o.dtype));
        }
        if (o.shape != formal[2 + j].shape) {
          stable = false;
          formal[2 + j].shape = o.shape;
        }
      }
      if (stable) break;
      known = false;
    }
  } else {
    for (int id : body.outputs) {
      TensorInfo t;
      t.present = true;
      t.dtype = body.values[static_cast<size_t>(id)].type.dtype;
      outs.push_back(t);
    }
  }
  const std::optional<int64_t> trips = known_trip_count(ctx, body);
  // Carried outputs keep the initial values' shapes when no iteration may run with others.
  for (size_t j = 0; j < carried; ++j) {
    ctx.set_output(j, ctx.inputs[2 + j].dtype, known ? outs[1 + j].shape : ctx.inputs[2 + j].shape);
  }
  for (size_t k = 0; k < scans; ++k) {
    const TensorInfo& o = outs[1 + carried + k];
    known = known && o.dtype != DType::kUndefined;  // else the body's run tells
    Shape s = o.shape;
    s.insert(s.begin(), trips ? *trips : 0);
    ctx.set_output(carried + k, o.dtype, s);
  }
  ctx.outputs_from_run = !known || (scans > 0 && !trips);
  return Status::ok();
}

Status run_loop(const LoopParams& p, const KernelArgs& a, const ExecContext& exec) {
  int64_t max_trips = a.inputs[0] ? a.inputs[0]->int_at(0) : std::numeric_limits<int64_t>::max();
  bool cond = a.inputs[1] ? a.inputs[1]->int_at(0) != 0 : true;
  std::vector<Tensor> state(p.carried);
  for (size_t j = 0; j < p.carried; ++j) state[j] = *a.inputs[2 + j];  // read only, never written
  std::vector<std::vector<Tensor>> scans(p.scans);
  TERN_ASSIGN_OR_RETURN(Tensor iter, Tensor::allocate(DType::kInt64, {}));
  TERN_ASSIGN_OR_RETURN(Tensor cond_in, Tensor::allocate(DType::kBool, {}));
  std::vector<const Tensor*> formal(2 + p.carried);
  formal[0] = &iter;
  formal[1] = &cond_in;
  std::vector<Tensor> outs;
  for (int64_t i = 0; i < max_trips && cond; ++i) {
    *iter.data<int64_t>() = i;
    *cond_in.data<bool>() = cond;
    for (size_t j = 0; j < p.carried; ++j) formal[2 + j] = &state[j];
    // Between iterations a cancelled or late run stops (the body's steps check too).
    TERN_RETURN_IF_ERROR(check_run(exec.control, "a Loop iteration"));
    TERN_RETURN_IF_ERROR(p.run->run(ops::call_inputs(a, p.body, formal), &outs, exec.control)
                             .with_prefix(str_cat("iteration ", i)));
    if (outs[0].numel() != 1) {
      return invalid_argument("iteration ", i, ": the body's condition has shape ",
                              shape_str(outs[0].shape()), ", not one value");
    }
    cond = outs[0].int_at(0) != 0;
    for (size_t j = 0; j < p.carried; ++j) state[j] = std::move(outs[1 + j]);
    for (size_t k = 0; k < p.scans; ++k) {
      Tensor* out = a.outputs[p.carried + k];
      if (out && out->defined()) {  // planned [M, ...]: written in place, no copy kept
        TERN_RETURN_IF_ERROR(ops::place_part(outs[1 + p.carried + k], i, out->shape()[0], 0, false,
                                             out, str_cat("scan output ", k)));
      } else {
        scans[k].push_back(std::move(outs[1 + p.carried + k]));
      }
    }
  }
  for (size_t j = 0; j < p.carried; ++j) {
    Tensor out = std::move(state[j]);
    if (out.raw() == a.inputs[2 + j]->raw() && !a.outputs[j]->defined()) {
      TERN_ASSIGN_OR_RETURN(out, out.clone());  // no iteration: a copy of the initial value
    }
    TERN_RETURN_IF_ERROR(
        ops::set_output(std::move(out), a.outputs[j], str_cat("carried value ", j)));
  }
  for (size_t k = 0; k < p.scans; ++k) {
    Tensor* out = a.outputs[p.carried + k];
    if (!out || (out->defined() && scans[k].empty())) continue;  // written in place
    TERN_RETURN_IF_ERROR(ops::stack_axis(scans[k], 0, false, p.scan_dtypes[k], p.scan_shapes[k],
                                         out, str_cat("scan output ", k)));
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_loop(const OpContext& ctx) {
  LoopParams p;
  TERN_ASSIGN_OR_RETURN(p.body, ops::subgraph_slot(ctx, "body"));
  TERN_RETURN_IF_ERROR(check_counts(ctx, p.body, &p.carried, &p.scans));
  TERN_ASSIGN_OR_RETURN(
      p.run, ops::compile_subgraph(ctx, p.body,
                                   ops::subgraph_inputs(ctx, p.body, body_formal(ctx, p.carried))));
  for (size_t k = 0; k < p.scans; ++k) {
    const TensorInfo& o = ctx.outputs[p.carried + k];
    p.scan_dtypes.push_back(o.dtype);
    p.scan_shapes.push_back(o.shape.empty() ? Shape{} : Shape(o.shape.begin() + 1, o.shape.end()));
  }
  return make_kernel("subgraph", std::move(p), run_loop);
}

}  // namespace

void register_op_loop(OpRegistry& r) {
  // min_inputs 0: M and cond may both be omitted (check_counts requires their places).
  r.add({"Loop", 0, 1 << 20, 1, 1 << 20, infer_loop, make_loop, {}, attrs("body")});
}

}  // namespace tern
