// Loop (opsets 1 to 23): runs its body while the iteration count M and the condition allow,
// carrying N values from one iteration to the next and stacking K per-iteration scan outputs.
// The body is compiled once per session and planned per input shapes, so an iteration costs the
// body's kernels plus a small constant. Output shapes are known while planning when the carried
// values keep their shapes and, for scan outputs, when the trip count is: M is a constant and the
// condition cannot turn false (the body passes it through or makes it true). A carried value the
// body only appends to (its output is Concat(carried, pieces) on axis 0, nothing else reading
// either) is kept by the Loop and grown in place: the body computes the pieces alone
// (appended_body), so the copying is linear in the iterations instead of quadratic, and the
// body's shapes stay the same from one iteration to the next.
#include <algorithm>
#include <cstring>
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
  int appended = 0;  // bit j: carried value j is grown by the Loop (appended_values)
};

// Appending in place is left out of the minimal (mobile) library for its size (~8 kB on
// aarch64): there the body carries such values as it carries any other.
#if !defined(TERN_MINIMAL)
// The carried values the body only appends to: its output for value j is a Concat on axis 0 of
// the carried input and further pieces, and neither the input nor the Concat's result is read
// by anything else in the body. (The Concat's axis is normalised by the initial value's rank:
// the carried value keeps it.) Tensors only: not strings, sequences or optionals.
int appended_values(const Graph& body, const OpContext& ctx, size_t carried) {
  std::vector<int> uses(body.values.size(), 0);
  for (const Node& n : body.nodes) {
    for (int id : n.inputs) {
      if (id >= 0) ++uses[static_cast<size_t>(id)];
    }
  }
  for (int id : body.outputs) ++uses[static_cast<size_t>(id)];
  int appended = 0;
  for (size_t j = 0; j < std::min<size_t>(carried, 30); ++j) {
    const TensorInfo& init = ctx.inputs[2 + j];
    const int in = body.inputs[2 + j], out = body.outputs[1 + j];
    if (init.shape.empty() || dtype_size(init.dtype) == 0 || dtype_is_composite(init.dtype) ||
        init.dtype == DType::kString || uses[static_cast<size_t>(in)] != 1 ||
        uses[static_cast<size_t>(out)] != 1) {
      continue;
    }
    for (const Node& n : body.nodes) {
      if (n.outputs.size() != 1 || n.outputs[0] != out) continue;
      auto axis = n.attrs.get_int("axis", 1);
      const bool concat = n.op_type == "Concat" && n.domain.empty() && n.inputs.size() >= 2 &&
                          n.inputs[0] == in && axis &&
                          (*axis == 0 || *axis == -static_cast<int64_t>(init.shape.size()));
      if (concat) appended |= 1 << j;
    }
  }
  return appended;
}

// The body computing only the pieces of its appended values (bit j of `appended`: carried value
// j): their Concats lose the carried input (a Concat of the pieces alone); the carried inputs,
// then read by nothing, stay formal.
Graph appended_body(const Graph& body, int appended) {
  Graph g = body;
  for (size_t j = 0; j < 30; ++j) {
    if (!(appended >> j & 1)) continue;
    for (Node& n : g.nodes) {
      if (n.outputs.size() == 1 && n.outputs[0] == g.outputs[1 + j])
        n.inputs.erase(n.inputs.begin());
    }
  }
  return g;
}

// Whether bit j of an appended-values mask is set (carried values from the 30th on never are).
bool appends(int mask, size_t j) {
  return j < 30 && (mask >> j & 1);
}

// Points `slot` at the body a Loop runs: the body with its appended values taken out (derived
// once per session), or the body itself. Returns the appended-values mask.
int appended_slot(const OpContext& ctx, ops::SubgraphSlot* slot, size_t carried) {
  if (!ctx.subgraphs) return 0;
  const int appended = appended_values(*slot->graph, ctx, carried);
  if (appended) slot->graph = &ctx.subgraphs->derived(*slot->graph, appended, appended_body);
  return appended;
}

// Appends `piece` to an appended carried value: its `rows` so far at the front of `buf`, whose
// row capacity doubles as it fills (the initial value is the first piece). The dtype and the
// trailing dims must be the initial value's.
Status append_rows(const Tensor& piece, const Tensor& init, Tensor* buf, int64_t* rows) {
  const Shape& s = piece.shape();
  const Shape& want = init.shape();
  if (piece.dtype() != init.dtype() || s.size() != want.size() ||
      !std::equal(s.begin() + 1, s.end(), want.begin() + 1)) {
    return invalid_argument("the body appends ", dtype_name(piece.dtype()), " ", shape_str(s),
                            " to the carried ", dtype_name(init.dtype()), " ", shape_str(want),
                            " (concatenation on axis 0)");
  }
  const size_t row_bytes =
      static_cast<size_t>(numel(Shape(want.begin() + 1, want.end()))) * dtype_size(init.dtype());
  const int64_t need = *rows + s[0];
  if (!buf->defined() || need > buf->shape()[0]) {
    Shape cap = want;
    cap[0] = std::max<int64_t>({need, 2 * *rows, 4});
    TERN_ASSIGN_OR_RETURN(Tensor bigger, Tensor::allocate_uninitialized(init.dtype(), cap));
    if (*rows) std::memcpy(bigger.raw(), buf->raw(), static_cast<size_t>(*rows) * row_bytes);
    *buf = std::move(bigger);
  }
  if (s[0]) {
    std::memcpy(static_cast<uint8_t*>(buf->raw()) + static_cast<size_t>(*rows) * row_bytes,
                piece.raw(), static_cast<size_t>(s[0]) * row_bytes);
  }
  *rows = need;
  return Status::ok();
}
#endif

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
#if !defined(TERN_MINIMAL)
  // The body the kernel runs (one nested session, not two): an appended value's output is its
  // new rows, so its shape is the run's to tell.
  const int appended = appended_slot(ctx, &slot, carried);
#endif
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
#if !defined(TERN_MINIMAL)
  if (appended) known = false;
#endif
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
#if !defined(TERN_MINIMAL)
  std::vector<int64_t> rows;  // an appended value's rows in state[j] (-1: none yet)
  if (p.appended) rows.assign(p.carried, -1);
#endif
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
#if !defined(TERN_MINIMAL)
    for (size_t j = 0; j < p.carried; ++j) {
      if (appends(p.appended, j)) formal[2 + j] = a.inputs[2 + j];  // read by nothing
    }
#endif
    // Between iterations a cancelled or late run stops (the body's steps check too).
    TERN_RETURN_IF_ERROR(check_run(exec.control, "a Loop iteration"));
    TERN_RETURN_IF_ERROR(p.run->run(ops::call_inputs(a, p.body, formal), &outs, exec.control)
                             .with_prefix(str_cat("iteration ", i)));
    if (outs[0].numel() != 1) {
      return invalid_argument("iteration ", i, ": the body's condition has shape ",
                              shape_str(outs[0].shape()), ", not one value");
    }
    cond = outs[0].int_at(0) != 0;
    for (size_t j = 0; j < p.carried; ++j) {
#if !defined(TERN_MINIMAL)
      if (appends(p.appended, j)) {
        const Tensor& init = *a.inputs[2 + j];
        if (rows[j] < 0) {
          state[j] = Tensor();
          rows[j] = 0;
          TERN_RETURN_IF_ERROR(append_rows(init, init, &state[j], &rows[j]));
        }
        TERN_RETURN_IF_ERROR(append_rows(outs[1 + j], init, &state[j], &rows[j])
                                 .with_prefix(str_cat("iteration ", i, ": carried value ", j)));
        continue;
      }
#endif
      state[j] = std::move(outs[1 + j]);
    }
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
    if (!a.outputs[j]) continue;  // an omitted output
    Tensor out = std::move(state[j]);
#if !defined(TERN_MINIMAL)
    if (appends(p.appended, j) && rows[j] >= 0) {  // the rows, in the buffer (spare capacity too)
      Shape shape = out.shape();
      shape[0] = rows[j];
      out = Tensor::wrap(out.dtype(), std::move(shape), out.raw(), std::make_shared<Tensor>(out));
    }
#endif
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
#if !defined(TERN_MINIMAL)
  p.appended = appended_slot(ctx, &p.body, p.carried);
#endif
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

TERN_REGISTRATION void register_op_loop(OpRegistry& r) {
  // min_inputs 0: M and cond may both be omitted (check_counts requires their places).
  r.add({"Loop", 0, 1 << 20, 1, 1 << 20, infer_loop, make_loop, {}, attrs("body")});
}

}  // namespace tern
