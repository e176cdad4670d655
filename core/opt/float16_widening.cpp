// A float16 model on a CPU-only session computes in float32 between Casts at its float16 edges
// (see optimizer.h, widen_float16).
//
// Intermediate values need no declared types: the ops derive their output types from their
// inputs, so float32 flows from the widened constants and the Casts at the edges. What fixes a
// float16 output without a float16 input is rewritten too: Constant's and ConstantOfShape's
// tensor, and the dtype attributes of EyeLike, the random ops and SequenceEmpty.
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/half.h"
#include "core/opt/graph_util.h"
#include "core/opt/optimizer.h"

namespace tern {
namespace {

constexpr int64_t kHalf = static_cast<int64_t>(DType::kFloat16);
constexpr int64_t kFloat = static_cast<int64_t>(DType::kFloat32);

bool casts_to_half(const Node& n) {
  if (n.op_type != "Cast" || !n.domain.empty()) return false;
  const Attribute* to = n.attrs.find("to");
  return to && to->kind == Attribute::Kind::kInt && to->i == kHalf;
}

bool holds_subgraph(const Node& n) {
  for (const auto& kv : n.attrs.all()) {
    const Attribute::Kind k = kv.second.kind;
    if (k == Attribute::Kind::kGraph || k == Attribute::Kind::kGraphs) return true;
  }
  return false;
}

// Float16 in an attribute that decides an output's type: a tensor, a dtype, a value type.
bool half_attribute(const std::string& name, const Attribute& a) {
  switch (a.kind) {
    case Attribute::Kind::kTensor:
      return a.t.dtype() == DType::kFloat16;
    case Attribute::Kind::kInt:
      return (name == "dtype" || name == "output_dtype" || name == "output_datatype") &&
             a.i == kHalf;
    case Attribute::Kind::kType:
      for (int64_t d : a.ints) {
        if (d == kHalf) return true;
      }
      return false;
    default:
      return false;
  }
}

void widen_type(ValueType& t) {
  for (DType* d : {&t.dtype, &t.elem, &t.seq_elem}) {
    if (*d == DType::kFloat16) *d = DType::kFloat32;
  }
}

Expected<Tensor> widened(const Tensor& h) {
  TERN_ASSIGN_OR_RETURN(Tensor f, Tensor::allocate_uninitialized(DType::kFloat32, h.shape()));
  const auto* src = h.data<uint16_t>();
  float* dst = f.data<float>();
  for (int64_t i = 0, n = h.numel(); i < n; ++i) dst[i] = half_to_float(src[i]);
  return f;
}

Status widen_attributes(Node& n) {
  Attributes attrs;
  for (const auto& kv : n.attrs.all()) {
    Attribute a = kv.second;
    if (half_attribute(kv.first, a)) {
      if (a.kind == Attribute::Kind::kTensor) {
        TERN_ASSIGN_OR_RETURN(a.t, widened(a.t));
      } else if (a.kind == Attribute::Kind::kInt) {
        a.i = kFloat;
      } else {
        for (int64_t& d : a.ints) d = d == kHalf ? kFloat : d;
      }
    }
    attrs.set(kv.first, std::move(a));
  }
  n.attrs = std::move(attrs);
  return Status::ok();
}

// A Cast node writing `to` from `from`.
Node cast_node(const Graph& g, int from, int to, DType dtype) {
  Node c;
  c.name = g.value_name(to) + "/cast";
  c.op_type = "Cast";
  c.inputs = {from};
  c.outputs = {to};
  c.attrs.set("to", Attribute::of_int(static_cast<int64_t>(dtype)));
  return c;
}

// A new value like v (named after it) of dtype `dt`.
int twin_of(Graph& g, int v, DType dt) {
  ValueType type = g.values[static_cast<size_t>(v)].type;
  type.dtype = dt;
  std::string name = g.unused_name(g.value_name(v) + (dt == DType::kFloat32 ? "/float32" : ""));
  return g.add_value(std::move(name), std::move(type));
}

}  // namespace

Status widen_float16(Graph& g, OptimizerReport* report) {
  // A selective build without float16 (loading refuses such models; the pass folds away) or
  // without Cast.
  if (!dtype_built(DType::kFloat16) || !op_built("Cast")) return Status::ok();
  // Anything float16 at all? Graphs the pass cannot keep the meaning of stay as they are:
  // - with If/Loop/Scan (a subgraph's formal inputs keep their types);
  // - with BitCast (its width is its type's);
  // - whose inputs or outputs have unknown types, or are sequences or optionals of float16;
  // - with a float16 input that carries an initializer (IR < 4 models list weights as inputs: read
  //   through a Cast they would no longer be constants, which kernels pack once).
  bool any = false;
  for (const Value& v : g.values) {
    any = any || v.type.dtype == DType::kFloat16 ||
          (v.constant && v.constant->dtype() == DType::kFloat16);
  }
  for (const Node& n : g.nodes) {
    if (holds_subgraph(n) || (n.op_type == "BitCast" && n.domain.empty())) return Status::ok();
    for (const auto& kv : n.attrs.all()) any = any || half_attribute(kv.first, kv.second);
  }
  if (!any) return Status::ok();
  for (const std::vector<int>* edge : {&g.inputs, &g.outputs}) {
    for (int v : *edge) {
      const Value& val = g.values[static_cast<size_t>(v)];
      if (val.type.dtype == DType::kUndefined || val.type.elem == DType::kFloat16 ||
          val.type.seq_elem == DType::kFloat16 ||
          (val.constant && val.type.dtype == DType::kFloat16 && edge == &g.inputs)) {
        return Status::ok();
      }
    }
  }

  const size_t node_count = g.nodes.size(), value_count = g.values.size();
  const std::vector<int> producers = value_producers(g);
  // Float16 values that stay: the graph's inputs and outputs, and what the model's Casts to
  // float16 write. Every other float16 value becomes float32.
  std::vector<bool> stays = graph_output_mask(g), input(value_count);
  for (int v : g.inputs) stays[static_cast<size_t>(v)] = input[static_cast<size_t>(v)] = true;
  std::vector<bool> cast_output(value_count);
  for (size_t n = 0; n < node_count; ++n) {
    const Node& node = g.nodes[n];
    if (casts_to_half(node) && !node.outputs.empty() && node.outputs[0] >= 0) {
      stays[static_cast<size_t>(node.outputs[0])] = true;
      cast_output[static_cast<size_t>(node.outputs[0])] = true;
    }
  }
  std::vector<bool> half_edge(value_count);  // stays, of type float16
  for (size_t v = 0; v < value_count; ++v) {
    Value& val = g.values[v];
    const bool half = val.type.dtype == DType::kFloat16 || cast_output[v] ||
                      (val.constant && val.constant->dtype() == DType::kFloat16);
    if (stays[v]) {
      half_edge[v] = half;
      continue;
    }
    if (half) ++report->float16_values_widened;
    widen_type(val.type);
    if (val.constant && val.constant->dtype() == DType::kFloat16) {
      TERN_ASSIGN_OR_RETURN(val.constant, widened(*val.constant));
      val.packed.clear();
    }
  }

  std::vector<Node> casts;
  std::vector<int> wide(value_count, -1);  // a float16 edge's float32 twin
  // A float16 graph output computed in float32: its producer writes a float32 twin, which a Cast
  // rounds to the output. Nodes that read the output read it rounded (through a twin of its own,
  // below), so a Cast of the output to float32 gives what the caller receives.
  for (size_t n = 0; n < node_count; ++n) {
    if (casts_to_half(g.nodes[n])) continue;
    for (size_t o = 0; o < g.nodes[n].outputs.size(); ++o) {
      const int v = g.nodes[n].outputs[o];
      if (v < 0 || !half_edge[static_cast<size_t>(v)]) continue;
      const int twin = twin_of(g, v, DType::kFloat32);
      casts.push_back(cast_node(g, twin, v, DType::kFloat16));
      g.nodes[n].outputs[o] = twin;
    }
  }
  // Readers of float16 edges read a float32 twin (made once per edge); Casts read the edge
  // itself (so a second pass over the result adds nothing).
  for (size_t n = 0; n < node_count; ++n) {
    if (g.nodes[n].op_type == "Cast" && g.nodes[n].domain.empty()) continue;
    for (size_t i = 0; i < g.nodes[n].inputs.size(); ++i) {
      const int v = g.nodes[n].inputs[i];
      if (v < 0 || static_cast<size_t>(v) >= value_count || !half_edge[static_cast<size_t>(v)]) {
        continue;
      }
      int& twin = wide[static_cast<size_t>(v)];
      if (twin < 0) {
        const Value& val = g.values[static_cast<size_t>(v)];
        if (val.constant && !input[static_cast<size_t>(v)] &&
            producers[static_cast<size_t>(v)] < 0) {
          std::string name = val.name + "/float32";
          TERN_ASSIGN_OR_RETURN(Tensor t, widened(*val.constant));
          twin = add_constant(g, std::move(name), std::move(t));
        } else {
          twin = twin_of(g, v, DType::kFloat32);
          casts.push_back(cast_node(g, v, twin, DType::kFloat32));
        }
      }
      g.nodes[n].inputs[i] = twin;
    }
    TERN_RETURN_IF_ERROR(widen_attributes(g.nodes[n]));
  }
  report->float16_casts_added += casts.size();
  for (Node& c : casts) g.nodes.push_back(std::move(c));
  return Status::ok();
}

}  // namespace tern
