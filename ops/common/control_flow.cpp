#include "ops/common/control_flow.h"

#include "ops/common/op_utils.h"

namespace tern::ops {

Expected<SubgraphSlot> subgraph_slot(const OpContext& ctx, const std::string& name) {
  size_t next = formal_inputs(*ctx.node);
  for (const auto& [attr, a] : ctx.attrs().all()) {
    std::vector<const Graph*> graphs;
    if (a.kind == Attribute::Kind::kGraph && a.g) graphs.push_back(a.g.get());
    if (a.kind == Attribute::Kind::kGraphs) {
      for (const auto& g : a.graphs) graphs.push_back(g.get());
    }
    if (attr == name) {
      if (a.kind != Attribute::Kind::kGraph || !a.g) {
        return invalid_model("attribute '", name, "' is ", attribute_kind_name(a.kind),
                             ", expected graph");
      }
      SubgraphSlot slot;
      slot.graph = a.g.get();
      slot.first_captured = next;
      slot.formal = a.g->inputs.size() - a.g->captured;
      return slot;
    }
    for (const Graph* g : graphs) next += g->captured;
  }
  return invalid_model("the required subgraph attribute '", name, "' is missing");
}

FlagValues subgraph_flags(const OpContext& ctx) {
  return ctx.flags ? *ctx.flags : Flags::global().resolve(nullptr, nullptr);
}

std::vector<TensorInfo> subgraph_inputs(const OpContext& ctx, const SubgraphSlot& slot,
                                        std::vector<TensorInfo> formal) {
  for (TensorInfo& t : formal) {
    t.value = nullptr;
    t.graph_constant = false;
    t.packed = nullptr;
  }
  for (size_t k = 0; k < slot.graph->captured; ++k) {
    TensorInfo t = ctx.inputs[slot.first_captured + k];
    // Only the graph's own constants are the same on every run: anything else is fed per call.
    if (!t.graph_constant) t.value = nullptr;
    formal.push_back(std::move(t));
  }
  return formal;
}

Expected<std::shared_ptr<const SubgraphRunner>> compile_subgraph(
    const OpContext& ctx, const SubgraphSlot& slot, const std::vector<TensorInfo>& inputs) {
  if (!ctx.subgraphs) {
    return unsupported("subgraphs run only inside a session (no subgraph compiler here)");
  }
  return ctx.subgraphs->compile(*slot.graph, inputs, subgraph_flags(ctx));
}

std::vector<const Tensor*> call_inputs(const KernelArgs& a, const SubgraphSlot& slot,
                                       std::vector<const Tensor*> formal) {
  for (size_t k = 0; k < slot.graph->captured; ++k) {
    formal.push_back(a.inputs[slot.first_captured + k]);
  }
  return formal;
}

Status set_output(Tensor&& result, Tensor* out, const std::string& what) {
  if (!out) return Status::ok();  // an omitted optional output
  if (!out->defined()) {
    *out = std::move(result);
    return Status::ok();
  }
  if (result.dtype() != out->dtype() || result.shape() != out->shape()) {
    return invalid_argument(what, " is ", dtype_name(result.dtype()), " ",
                            shape_str(result.shape()), ", but was planned as ",
                            dtype_name(out->dtype()), " ", shape_str(out->shape()));
  }
  copy_elements(result.dtype(), result.raw(), 0, out->raw(), 0, result.numel());
  return Status::ok();
}

TensorInfo scalar_info(DType dtype) {
  TensorInfo t;
  t.present = true;
  t.dtype = dtype;
  return t;
}

Expected<Tensor> slice_axis(const Tensor& t, int64_t axis, int64_t i) {
  const Shape& s = t.shape();
  const auto ax = static_cast<size_t>(axis);
  Shape out_shape;
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < s.size(); ++d) {
    if (d < ax) outer *= s[d];
    if (d > ax) inner *= s[d];
    if (d != ax) out_shape.push_back(s[d]);
  }
  const int64_t n = s[ax];
  const size_t es = dtype_size(t.dtype());
  if (outer == 1) {  // contiguous: a view of the input (alive while the kernel runs)
    auto* p = static_cast<uint8_t*>(t.raw()) + static_cast<size_t>(i * inner) * es;
    return Tensor::wrap(t.dtype(), std::move(out_shape), p, nullptr, t.device());
  }
  TERN_ASSIGN_OR_RETURN(Tensor out, Tensor::allocate(t.dtype(), std::move(out_shape)));
  for (int64_t o = 0; o < outer; ++o) {
    copy_elements(t.dtype(), t.raw(), (o * n + i) * inner, out.raw(), o * inner, inner);
  }
  return out;
}

Status place_part(const Tensor& part, int64_t t, int64_t T, int64_t axis, bool reverse, Tensor* out,
                  const std::string& what) {
  Shape want = part.shape();
  if (axis < 0 || axis > static_cast<int64_t>(want.size())) {
    return invalid_argument(what, ": axis ", axis, " is outside a result of rank ",
                            want.size() + 1);
  }
  want.insert(want.begin() + axis, T);
  if (out->shape() != want || out->dtype() != part.dtype() || t >= T) {
    return invalid_argument(what, ": iteration ", t, " gave ", dtype_name(part.dtype()), " ",
                            shape_str(part.shape()), ", which does not fit the planned ",
                            dtype_name(out->dtype()), " ", shape_str(out->shape()));
  }
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < part.rank(); ++d) {
    (static_cast<int64_t>(d) < axis ? outer : inner) *= part.shape()[d];
  }
  const int64_t slot = reverse ? T - 1 - t : t;
  for (int64_t o = 0; o < outer; ++o) {
    copy_elements(part.dtype(), part.raw(), o * inner, out->raw(), (o * T + slot) * inner, inner);
  }
  return Status::ok();
}

Status stack_axis(const std::vector<Tensor>& parts, int64_t axis, bool reverse, DType dtype,
                  const Shape& elem_shape, Tensor* out, const std::string& what) {
  const Shape elem = parts.empty() ? elem_shape : parts[0].shape();
  const DType dt = parts.empty() ? dtype : parts[0].dtype();
  if (axis < 0 || axis > static_cast<int64_t>(elem.size())) {
    return invalid_argument(what, ": axis ", axis, " is outside a result of rank ",
                            elem.size() + 1);
  }
  for (size_t t = 0; t < parts.size(); ++t) {
    if (parts[t].shape() != elem || parts[t].dtype() != dt) {
      return invalid_argument(what, ": iteration ", t, " gave ", dtype_name(parts[t].dtype()), " ",
                              shape_str(parts[t].shape()), ", iteration 0 gave ", dtype_name(dt),
                              " ", shape_str(elem));
    }
  }
  const auto T = static_cast<int64_t>(parts.size());
  Shape shape = elem;
  shape.insert(shape.begin() + axis, T);
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < elem.size(); ++d)
    (static_cast<int64_t>(d) < axis ? outer : inner) *= elem[d];
  Tensor result;
  Tensor* dst = out;
  if (!out->defined()) {
    TERN_ASSIGN_OR_RETURN(result, Tensor::allocate(dt, shape));
    dst = &result;
  } else if (out->shape() != shape || out->dtype() != dt) {
    return invalid_argument(what, " is ", dtype_name(dt), " ", shape_str(shape),
                            ", but was planned as ", dtype_name(out->dtype()), " ",
                            shape_str(out->shape()));
  }
  for (int64_t t = 0; t < T; ++t) {
    const Tensor& src = parts[static_cast<size_t>(reverse ? T - 1 - t : t)];
    for (int64_t o = 0; o < outer; ++o) {
      copy_elements(dt, src.raw(), o * inner, dst->raw(), (o * T + t) * inner, inner);
    }
  }
  if (!out->defined()) *out = std::move(result);
  return Status::ok();
}

bool body_keeps_condition(const Graph& body) {
  if (body.outputs.empty() || body.inputs.size() < 2) return false;
  int id = body.outputs[0];
  for (size_t hops = 0; hops <= body.nodes.size(); ++hops) {
    if (id == body.inputs[1]) return true;
    const Value& v = body.values[static_cast<size_t>(id)];
    if (v.constant) {
      return v.constant->numel() == 1 && v.constant->on_host() && v.constant->int_at(0) != 0;
    }
    const Node* producer = nullptr;
    for (const Node& n : body.nodes) {
      for (int o : n.outputs) {
        if (o == id) producer = &n;
      }
    }
    if (!producer || producer->op_type != "Identity" || producer->inputs.empty()) return false;
    id = producer->inputs[0];
    if (id < 0) return false;
  }
  return false;
}

}  // namespace tern::ops
