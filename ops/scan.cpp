// Scan (opset 8, and 9 to 23): runs its body once per slice of the scan inputs along their scan
// axes, carrying N state values and stacking K scan outputs along their output axes; either
// direction for each input and output. Opset 8's form has a leading batch axis on every input and
// output and optional per-batch sequence lengths (scan outputs past a sequence's end are zeros).
// The body is compiled once per session; the trip count is the scan axis' size, so output shapes
// are known while planning whenever the states keep their shapes.
#include "ops/common/control_flow.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

struct ScanParams {
  ops::SubgraphSlot body;
  std::shared_ptr<const SubgraphRunner> run;
  bool batched = false;  // opset 8: batch axis 0, optional sequence_lens first
  size_t states = 0, scan_ins = 0, scan_outs = 0;
  std::vector<int64_t> in_axes, in_reverse, out_axes, out_reverse;
  std::vector<DType> out_dtypes;  // scan outputs, for a scan of length 0
  std::vector<Shape> out_elems;
};

// Attributes and counts of both forms. The axes are normalised against the body's view of the
// tensors (batch axis removed in opset 8).
Status read_params(const OpContext& ctx, ScanParams* p) {
  TERN_ASSIGN_OR_RETURN(p->body, ops::subgraph_slot(ctx, "body"));
  p->batched = ctx.opset < 9;
  TERN_ASSIGN_OR_RETURN(int64_t m, ctx.attrs().get_int("num_scan_inputs", -1));
  if (m < 1) return invalid_model("attribute 'num_scan_inputs' must be at least 1");
  const size_t formal = formal_inputs(*ctx.node) - (p->batched ? 1 : 0);
  if (static_cast<size_t>(m) > formal) {
    return invalid_model("num_scan_inputs is ", m, " but the node has ", formal, " inputs");
  }
  p->scan_ins = static_cast<size_t>(m);
  p->states = formal - p->scan_ins;
  if (p->body.formal != formal) {
    return invalid_model("the body takes ", p->body.formal, " inputs, the node gives ", formal);
  }
  if (p->body.graph->outputs.size() < p->states ||
      ctx.outputs.size() != p->body.graph->outputs.size()) {
    return invalid_model("the node has ", ctx.outputs.size(), " outputs, its body ",
                         p->body.graph->outputs.size(), ", and ", p->states, " are states");
  }
  p->scan_outs = ctx.outputs.size() - p->states;
  const size_t first = p->batched ? 1 : 0;
  const int64_t batch_axis = p->batched ? 1 : 0;
  auto axes = [&](const char* name, size_t n, bool input) -> Expected<std::vector<int64_t>> {
    TERN_ASSIGN_OR_RETURN(std::vector<int64_t> v, ctx.attrs().get_ints(name));
    if (v.empty()) v.assign(n, 0);
    if (v.size() != n)
      return invalid_model("attribute '", name, "' has ", v.size(), " entries, expected ", n);
    for (size_t i = 0; i < n; ++i) {
      // The rank the axis refers to: a scan input's own (less the batch axis), or a scan
      // output's, which is the body output's rank plus one.
      int64_t rank =
          input ? static_cast<int64_t>(ctx.inputs[first + p->states + i].shape.size()) - batch_axis
                : -1;
      if (!input) continue;
      TERN_ASSIGN_OR_RETURN(v[i], ops::normalize_axis(v[i], rank, name));
    }
    return v;
  };
  auto flags01 = [&](const char* name, size_t n) -> Expected<std::vector<int64_t>> {
    TERN_ASSIGN_OR_RETURN(std::vector<int64_t> v, ctx.attrs().get_ints(name));
    if (v.empty()) v.assign(n, 0);
    if (v.size() != n)
      return invalid_model("attribute '", name, "' has ", v.size(), " entries, expected ", n);
    for (int64_t x : v) {
      if (x != 0 && x != 1)
        return invalid_model("attribute '", name, "' holds ", x, ", not 0 or 1");
    }
    return v;
  };
  if (p->batched) {
    TERN_ASSIGN_OR_RETURN(p->in_reverse, flags01("directions", p->scan_ins));
    p->in_axes.assign(p->scan_ins, 0);
    p->out_axes.assign(p->scan_outs, 0);
    p->out_reverse.assign(p->scan_outs, 0);
  } else {
    TERN_ASSIGN_OR_RETURN(p->in_axes, axes("scan_input_axes", p->scan_ins, true));
    TERN_ASSIGN_OR_RETURN(p->in_reverse, flags01("scan_input_directions", p->scan_ins));
    TERN_ASSIGN_OR_RETURN(p->out_axes, axes("scan_output_axes", p->scan_outs, false));
    TERN_ASSIGN_OR_RETURN(p->out_reverse, flags01("scan_output_directions", p->scan_outs));
  }
  return Status::ok();
}

// The body's formal inputs for one batch item: states and slices of the scan inputs.
std::vector<TensorInfo> body_formal(const OpContext& ctx, const ScanParams& p, int64_t* trips) {
  const size_t first = p.batched ? 1 : 0;
  std::vector<TensorInfo> f;
  for (size_t j = 0; j < p.states; ++j) {
    TensorInfo t = ctx.inputs[first + j];
    if (p.batched && !t.shape.empty()) t.shape.erase(t.shape.begin());
    f.push_back(t);
  }
  *trips = -1;
  for (size_t i = 0; i < p.scan_ins; ++i) {
    TensorInfo t = ctx.inputs[first + p.states + i];
    if (p.batched && !t.shape.empty()) t.shape.erase(t.shape.begin());
    const auto ax = static_cast<size_t>(p.in_axes[i]);
    if (ax < t.shape.size()) {
      if (*trips < 0) *trips = t.shape[ax];
      t.shape.erase(t.shape.begin() + static_cast<std::ptrdiff_t>(ax));
    }
    f.push_back(t);
  }
  return f;
}

Status infer_scan(OpContext& ctx) {
  ScanParams p;
  TERN_RETURN_IF_ERROR(read_params(ctx, &p));
  const size_t first = p.batched ? 1 : 0;
  int64_t trips = -1;
  std::vector<TensorInfo> formal = body_formal(ctx, p, &trips);
  for (size_t i = 0; i < p.scan_ins; ++i) {
    const Shape& s = ctx.inputs[first + p.states + i].shape;
    const size_t ax = static_cast<size_t>(p.in_axes[i]) + (p.batched ? 1 : 0);
    if (ax >= s.size() || s[ax] != trips) {
      return invalid_argument("scan input ", i, " of shape ", shape_str(s),
                              " does not have the first scan input's length ", trips,
                              " on its scan axis");
    }
    if (p.batched && s[0] != ctx.inputs[first + p.states].shape[0]) {
      return invalid_argument("scan inputs disagree on the batch size");
    }
  }
  std::vector<TensorInfo> outs;
  bool known = false;
  if (ctx.subgraphs) {
    TERN_ASSIGN_OR_RETURN(
        auto runner, ops::compile_subgraph(ctx, p.body, ops::subgraph_inputs(ctx, p.body, formal)));
    for (int round = 0; round < 3; ++round) {
      TERN_RETURN_IF_ERROR(runner->infer(ops::subgraph_inputs(ctx, p.body, formal), &outs, &known)
                               .with_prefix("in the body"));
      if (!known) break;
      bool stable = true;
      for (size_t j = 0; j < p.states; ++j) {
        if (outs[j].dtype != formal[j].dtype) {
          return invalid_model("state ", j, " enters the body as ", dtype_name(formal[j].dtype),
                               " and leaves it as ", dtype_name(outs[j].dtype));
        }
        if (outs[j].shape != formal[j].shape) stable = false, formal[j].shape = outs[j].shape;
      }
      if (stable) break;
      known = false;
    }
  } else {
    for (int id : p.body.graph->outputs) {
      TensorInfo t;
      t.present = true;
      t.dtype = p.body.graph->values[static_cast<size_t>(id)].type.dtype;
      outs.push_back(t);
    }
  }
  const int64_t batch = p.batched ? ctx.inputs[first + p.states].shape[0] : 1;
  for (size_t j = 0; j < p.states; ++j) {
    ctx.set_output(j, ctx.inputs[first + j].dtype, ctx.inputs[first + j].shape);
  }
  for (size_t k = 0; k < p.scan_outs; ++k) {
    const TensorInfo& o = outs[p.states + k];
    known = known && o.dtype != DType::kUndefined;  // else the body's run tells
    Shape s = o.shape;
    int64_t axis = p.out_axes[k];
    if (!p.batched) {
      TERN_ASSIGN_OR_RETURN(
          axis, ops::normalize_axis(axis, static_cast<int64_t>(s.size()) + 1, "scan_output_axes"));
    }
    s.insert(s.begin() + axis, trips);
    if (p.batched) s.insert(s.begin(), batch);
    ctx.set_output(p.states + k, o.dtype, s);
  }
  ctx.outputs_from_run = !known;
  return Status::ok();
}

// One scan (one batch item in opset 8) of `length` steps over the given states and scan inputs
// (as the body sees them: no batch axis); final states and stacked scan outputs into `outs`.
// `direct[k]` (may be null): the planned output scan output k is written into step by step (no
// copy kept); outs[k] is then left undefined.
Status scan_once(const ScanParams& p, const KernelArgs& a, const ExecContext& exec,
                 std::vector<Tensor> state, const std::vector<Tensor>& inputs, int64_t length,
                 int64_t padded, const std::vector<Tensor*>& direct, std::vector<Tensor>* outs) {
  std::vector<std::vector<Tensor>> parts(p.scan_outs);
  std::vector<Tensor> result;
  std::vector<const Tensor*> formal(p.states + p.scan_ins);
  std::vector<Tensor> slices(p.scan_ins);
  for (int64_t t = 0; t < length; ++t) {
    for (size_t j = 0; j < p.states; ++j) formal[j] = &state[j];
    for (size_t i = 0; i < p.scan_ins; ++i) {
      const int64_t at = p.in_reverse[i] ? length - 1 - t : t;
      TERN_ASSIGN_OR_RETURN(slices[i], ops::slice_axis(inputs[i], p.in_axes[i], at));
      formal[p.states + i] = &slices[i];
    }
    // Between steps a cancelled or late run stops (the body's own steps check too).
    TERN_RETURN_IF_ERROR(check_run(exec.control, "a Scan step"));
    TERN_RETURN_IF_ERROR(p.run->run(ops::call_inputs(a, p.body, formal), &result, exec.control)
                             .with_prefix(str_cat("step ", t)));
    for (size_t j = 0; j < p.states; ++j) state[j] = std::move(result[j]);
    for (size_t k = 0; k < p.scan_outs; ++k) {
      if (direct[k]) {
        int64_t axis = p.out_axes[k];
        if (axis < 0) axis += static_cast<int64_t>(result[p.states + k].rank()) + 1;
        TERN_RETURN_IF_ERROR(ops::place_part(result[p.states + k], t, length, axis,
                                             p.out_reverse[k] != 0, direct[k],
                                             str_cat("scan output ", k)));
      } else {
        parts[k].push_back(std::move(result[p.states + k]));
      }
    }
  }
  outs->clear();
  for (size_t j = 0; j < p.states; ++j) outs->push_back(std::move(state[j]));
  for (size_t k = 0; k < p.scan_outs; ++k) {
    if (direct[k]) {
      outs->emplace_back();
      continue;
    }
    // Steps past a sequence's end (opset 8's sequence_lens) are zeros.
    while (static_cast<int64_t>(parts[k].size()) < padded) {
      const Shape elem = parts[k].empty() ? p.out_elems[k] : parts[k][0].shape();
      TERN_ASSIGN_OR_RETURN(
          Tensor z,
          Tensor::allocate(parts[k].empty() ? p.out_dtypes[k] : parts[k][0].dtype(), elem));
      parts[k].push_back(std::move(z));
    }
    Tensor stacked;
    int64_t axis = p.out_axes[k];
    const int64_t rank =
        static_cast<int64_t>(parts[k].empty() ? p.out_elems[k].size() : parts[k][0].rank());
    if (axis < 0) axis += rank + 1;
    TERN_RETURN_IF_ERROR(ops::stack_axis(parts[k], axis, p.out_reverse[k] != 0, p.out_dtypes[k],
                                         p.out_elems[k], &stacked, str_cat("scan output ", k)));
    outs->push_back(std::move(stacked));
  }
  return Status::ok();
}

Status run_scan(const ScanParams& p, const KernelArgs& a, const ExecContext& exec) {
  const size_t first = p.batched ? 1 : 0;
  const Tensor& scan0 = *a.inputs[first + p.states];
  if (!p.batched) {
    std::vector<Tensor> state, inputs;
    for (size_t j = 0; j < p.states; ++j) state.push_back(*a.inputs[j]);
    for (size_t i = 0; i < p.scan_ins; ++i) inputs.push_back(*a.inputs[p.states + i]);
    const int64_t length = scan0.shape()[static_cast<size_t>(p.in_axes[0])];
    // Planned scan outputs are written in place as the steps make them.
    std::vector<Tensor*> direct(p.scan_outs, nullptr);
    for (size_t k = 0; k < p.scan_outs; ++k) {
      Tensor* out = a.outputs[p.states + k];
      if (out && out->defined() && length > 0) direct[k] = out;
    }
    std::vector<Tensor> outs;
    TERN_RETURN_IF_ERROR(
        scan_once(p, a, exec, std::move(state), inputs, length, length, direct, &outs));
    for (size_t o = 0; o < outs.size(); ++o) {
      if (o >= p.states && direct[o - p.states]) continue;
      if (o < p.states && outs[o].raw() == a.inputs[o]->raw()) {
        TERN_ASSIGN_OR_RETURN(outs[o], outs[o].clone());  // a scan of length 0
      }
      TERN_RETURN_IF_ERROR(
          ops::set_output(std::move(outs[o]), a.outputs[o], str_cat("output ", o)));
    }
    return Status::ok();
  }
  // Opset 8: each batch item scans on its own; results are stacked along the batch axis.
  const int64_t batch = scan0.shape()[0], length = scan0.shape()[1];
  const Tensor* lens = a.inputs[0];
  std::vector<std::vector<Tensor>> per_output(a.outputs.size());
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Tensor> state, inputs;
    for (size_t j = 0; j < p.states; ++j) {
      TERN_ASSIGN_OR_RETURN(Tensor s, ops::slice_axis(*a.inputs[first + j], 0, b));
      state.push_back(std::move(s));
    }
    for (size_t i = 0; i < p.scan_ins; ++i) {
      TERN_ASSIGN_OR_RETURN(Tensor s, ops::slice_axis(*a.inputs[first + p.states + i], 0, b));
      inputs.push_back(std::move(s));
    }
    const int64_t len = lens ? lens->int_at(b) : length;
    if (len < 0 || len > length) {
      return invalid_argument("sequence_lens[", b, "] is ", len, ", outside 0..", length);
    }
    std::vector<Tensor> outs;
    TERN_RETURN_IF_ERROR(scan_once(p, a, exec, std::move(state), inputs, len, length,
                                   std::vector<Tensor*>(p.scan_outs, nullptr), &outs));
    for (size_t o = 0; o < outs.size(); ++o) per_output[o].push_back(std::move(outs[o]));
  }
  for (size_t o = 0; o < a.outputs.size(); ++o) {
    if (!a.outputs[o]) continue;
    TERN_RETURN_IF_ERROR(ops::stack_axis(per_output[o], 0, false, a.outputs[o]->dtype(), Shape{},
                                         a.outputs[o], str_cat("output ", o)));
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_scan(const OpContext& ctx) {
  ScanParams p;
  TERN_RETURN_IF_ERROR(read_params(ctx, &p));
  int64_t trips = -1;
  const std::vector<TensorInfo> formal = body_formal(ctx, p, &trips);
  TERN_ASSIGN_OR_RETURN(
      p.run, ops::compile_subgraph(ctx, p.body, ops::subgraph_inputs(ctx, p.body, formal)));
  for (size_t k = 0; k < p.scan_outs; ++k) {
    const TensorInfo& o = ctx.outputs[p.states + k];
    p.out_dtypes.push_back(o.dtype);
    Shape elem = o.shape;
    if (p.batched && !elem.empty()) elem.erase(elem.begin());
    int64_t axis = p.out_axes[k];
    if (axis < 0) axis += static_cast<int64_t>(elem.size());
    if (axis >= 0 && static_cast<size_t>(axis) < elem.size()) {
      elem.erase(elem.begin() + axis);
    }
    p.out_elems.push_back(elem);
  }
  return make_kernel("subgraph", std::move(p), run_scan);
}

}  // namespace

TERN_REGISTRATION void register_op_scan(OpRegistry& r) {
  // min_inputs 0: opset 8's first input, sequence_lens, may be omitted (read_params counts).
  r.add({"Scan",
         0,
         1 << 20,
         1,
         1 << 20,
         infer_scan,
         make_scan,
         {},
         attrs("body, directions, num_scan_inputs, scan_input_axes, scan_input_directions, "
               "scan_output_axes, scan_output_directions")});
}

}  // namespace tern
