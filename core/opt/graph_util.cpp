#include "core/opt/graph_util.h"

#include <cstring>

#include "core/half.h"
#include "core/op_registry.h"

namespace tern {

bool op_built(const std::string& op_type) {
  return OpRegistry::global().find(op_type) != nullptr;
}

bool random_op(const std::string& op_type) {
  // One literal of NUL-ended names (no table of pointers to relocate).
  const char* names =
      "RandomNormal\0RandomUniform\0RandomNormalLike\0RandomUniformLike\0Bernoulli\0Multinomial\0"
      "Dropout\0";
  for (const char* n = names; *n; n += std::strlen(n) + 1) {
    if (op_type == n) return true;
  }
  return false;
}

const Tensor* constant_of(const Graph& g, int v) {
  if (v < 0) return nullptr;
  const Value& val = g.values[static_cast<size_t>(v)];
  return val.constant ? &*val.constant : nullptr;
}

std::optional<float> scalar_of(const Graph& g, int v) {
  const Tensor* t = constant_of(g, v);
  if (!t || t->numel() != 1) return std::nullopt;
  switch (t->dtype()) {
    case DType::kFloat32:
      return t->data<float>()[0];
    case DType::kFloat16:
      return half_to_float(t->data<uint16_t>()[0]);
    case DType::kBFloat16:
      return bfloat16_to_float(t->data<uint16_t>()[0]);
    default:
      return std::nullopt;
  }
}

float scalar_tolerance(const Graph& g, int v) {
  const Tensor* t = constant_of(g, v);
  const DType dt = t ? t->dtype() : DType::kFloat32;
  return dt == DType::kBFloat16 ? 1.0f / 256 : dt == DType::kFloat16 ? 1.0f / 2048 : 1e-4f;
}

std::vector<bool> graph_output_mask(const Graph& g) {
  std::vector<bool> out(g.values.size(), false);
  for (int id : g.outputs) out[static_cast<size_t>(id)] = true;
  return out;
}

// True when value v is read by exactly one node, `reader`, and is not a graph output.
bool only_read_by(const ValueConsumers& consumers, const std::vector<bool>& is_output, int v,
                  size_t reader) {
  const auto c = consumers[static_cast<size_t>(v)];
  return !is_output[static_cast<size_t>(v)] && c.size() == 1 && c[0] == reader;
}

int add_constant(Graph& g, std::string name, Tensor t) {
  ValueType type;
  type.dtype = t.dtype();
  type.has_shape = true;
  for (int64_t d : t.shape()) type.dims.push_back(Dim{d, {}});
  int id = g.add_value(g.unused_name(name), std::move(type));
  g.values[static_cast<size_t>(id)].constant = std::move(t);
  return id;
}

std::vector<int> value_producers(const Graph& g) {
  std::vector<int> p(g.values.size(), -1);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    for (int id : g.nodes[n].outputs) {
      if (id >= 0) p[static_cast<size_t>(id)] = static_cast<int>(n);
    }
  }
  return p;
}

void erase_nodes(Graph& g, const std::vector<bool>& removed) {
  size_t w = 0;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (removed[n]) continue;
    if (w != n) g.nodes[w] = std::move(g.nodes[n]);
    ++w;
  }
  g.nodes.resize(w);
}

ValueConsumers::ValueConsumers(const Graph& g) : start_(g.values.size() + 2, 0) {
  // A counting sort: value v's reads are counted in start_[v + 2] and summed, so start_[v + 1] is
  // where v's readers go; placing them moves it on to v's end, which is v + 1's start.
  for (const Node& n : g.nodes) {
    for (int id : n.inputs) {
      if (id >= 0) ++start_[static_cast<size_t>(id) + 2];
    }
  }
  for (size_t v = 2; v < start_.size(); ++v) start_[v] += start_[v - 1];
  nodes_.resize(start_.back());
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    for (int id : g.nodes[n].inputs) {
      if (id >= 0) nodes_[start_[static_cast<size_t>(id) + 1]++] = n;
    }
  }
}

}  // namespace tern
