#include "core/graph_optimizer.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tern {

namespace {

const Tensor* constant_of(const Graph& g, int v) {
  if (v < 0) return nullptr;
  const Value& val = g.values[static_cast<size_t>(v)];
  return val.constant ? &*val.constant : nullptr;
}

std::optional<float> scalar_of(const Graph& g, int v) {
  const Tensor* t = constant_of(g, v);
  if (!t || t->numel() != 1 || t->dtype() != DType::kFloat32) return std::nullopt;
  return t->data<float>()[0];
}

std::vector<bool> graph_output_mask(const Graph& g) {
  std::vector<bool> out(g.values.size(), false);
  for (int id : g.outputs) out[static_cast<size_t>(id)] = true;
  return out;
}

// True when value v is read by exactly one node, `reader`, and is not a graph output.
bool only_read_by(const std::vector<std::vector<size_t>>& consumers,
                  const std::vector<bool>& is_output, int v, size_t reader) {
  const auto& c = consumers[static_cast<size_t>(v)];
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

}  // namespace

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

std::vector<std::vector<size_t>> value_consumers(const Graph& g) {
  std::vector<std::vector<size_t>> c(g.values.size());
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    for (int id : g.nodes[n].inputs) {
      if (id >= 0) c[static_cast<size_t>(id)].push_back(n);
    }
  }
  return c;
}

void append_fused_activation(Node& conv, const FusedActivation& act) {
  const Attribute* kinds = conv.attrs.find("activations");
  const Attribute* params = conv.attrs.find("activation_params");
  Attribute k, p;
  k.kind = Attribute::Kind::kStrings;
  p.kind = Attribute::Kind::kFloats;
  if (kinds && params) {
    k = *kinds;
    p = *params;
  }
  if (act.kind == "Affine" && !k.strings.empty() && k.strings.back() == "Affine" &&
      p.floats.size() >= 2) {
    // (x * s1 + b1) * s2 + b2 = x * (s1 * s2) + (b1 * s2 + b2)
    float& s1 = p.floats[p.floats.size() - 2];
    float& b1 = p.floats[p.floats.size() - 1];
    b1 = b1 * act.params[0] + act.params[1];
    s1 = s1 * act.params[0];
  } else {
    k.strings.push_back(act.kind);
    p.floats.insert(p.floats.end(), act.params.begin(), act.params.end());
  }
  conv.attrs.set("activations", k);
  conv.attrs.set("activation_params", p);
}

bool has_epilogue(const Node& conv) {
  const Attribute* kinds = conv.attrs.find("activations");
  return kinds && !kinds->strings.empty();
}

std::optional<FusedActivation> activation_of(const Graph& g, const Node& n) {
  if (!n.domain.empty() && n.domain != "ai.onnx") return std::nullopt;
  const std::string& op = n.op_type;
  if ((op == "Mul" || op == "Add") && n.inputs.size() == 2) {
    // By a float scalar constant, on either side: x * s or x + b.
    for (int side = 0; side < 2; ++side) {
      const Tensor* c = constant_of(g, n.inputs[static_cast<size_t>(1 - side)]);
      if (!c || c->numel() != 1 || c->dtype() != DType::kFloat32 || n.inputs[side] < 0) continue;
      const float v = c->data<float>()[0];
      return FusedActivation{
          "Affine", op == "Mul" ? std::vector<float>{v, 0.0f} : std::vector<float>{1.0f, v}, side,
          c->rank()};
    }
    return std::nullopt;
  }
  if (op == "Relu" || op == "Sigmoid" || op == "HardSwish" || op == "Tanh") {
    return FusedActivation{op, {}};
  }
  if (op == "LeakyRelu") {
    auto alpha = n.attrs.get_float("alpha", 0.01f);
    if (!alpha) return std::nullopt;
    return FusedActivation{op, {*alpha}};
  }
  if (op == "HardSigmoid") {
    auto alpha = n.attrs.get_float("alpha", 0.2f);
    auto beta = n.attrs.get_float("beta", 0.5f);
    if (!alpha || !beta) return std::nullopt;
    return FusedActivation{op, {*alpha, *beta}};
  }
  if (op == "Clip") {
    float lo = -std::numeric_limits<float>::infinity(), hi = -lo;
    if (g.opset < 11) {
      auto a = n.attrs.get_float("min", lo);
      auto b = n.attrs.get_float("max", hi);
      if (!a || !b) return std::nullopt;
      lo = *a;
      hi = *b;
    } else {
      for (size_t i = 1; i < n.inputs.size() && i < 3; ++i) {
        if (n.inputs[i] < 0) continue;
        auto s = scalar_of(g, n.inputs[i]);
        if (!s) return std::nullopt;
        (i == 1 ? lo : hi) = *s;
      }
    }
    return FusedActivation{op, {lo, hi}};
  }
  return std::nullopt;
}

namespace {

// What pattern-matching passes look at: who produces and reads each value, and the nodes a pass
// has already taken (removed at its end).
struct PatternView {
  Graph& g;
  std::vector<std::vector<size_t>> consumers = value_consumers(g);
  std::vector<int> producers = value_producers(g);
  std::vector<bool> is_output = graph_output_mask(g);
  std::vector<bool> removed = std::vector<bool>(g.nodes.size(), false);

  // The node of type `op` that produces v, unless taken already.
  Node* node_at(int v, const char* op) {
    int p = v < 0 ? -1 : producers[static_cast<size_t>(v)];
    if (p < 0 || removed[static_cast<size_t>(p)]) return nullptr;
    Node& n = g.nodes[static_cast<size_t>(p)];
    return n.op_type == op && n.domain.empty() ? &n : nullptr;
  }
  size_t index_of(const Node* n) const { return static_cast<size_t>(n - g.nodes.data()); }
  // Read only by `reader` and not a graph output.
  bool only(int v, const Node* reader) const {
    return only_read_by(consumers, is_output, v, index_of(reader));
  }
};

}  // namespace

Status fold_batch_norm_into_conv(Graph& g, OptimizerReport* report) {
  auto consumers = value_consumers(g);
  auto producers = value_producers(g);
  auto is_output = graph_output_mask(g);
  std::vector<bool> removed(g.nodes.size(), false);
  for (size_t b = 0; b < g.nodes.size(); ++b) {
    Node& bn = g.nodes[b];
    if (bn.op_type != "BatchNormalization" || bn.inputs.size() != 5 || !bn.domain.empty()) continue;
    if (std::any_of(bn.outputs.begin() + 1, bn.outputs.end(), [](int id) { return id >= 0; })) {
      continue;  // training-mode statistics are wanted
    }
    auto training = bn.attrs.get_int("training_mode", 0);
    auto eps = bn.attrs.get_float("epsilon", 1e-5f);
    if (!training || *training != 0 || !eps) continue;
    const int x = bn.inputs[0];
    const int c = producers[static_cast<size_t>(x)];
    if (c < 0 || removed[static_cast<size_t>(c)]) continue;
    Node& conv = g.nodes[static_cast<size_t>(c)];
    if (conv.op_type != "Conv" || !conv.domain.empty() || conv.outputs[0] != x ||
        !only_read_by(consumers, is_output, x, b)) {
      continue;
    }
    const Tensor* w = constant_of(g, conv.inputs[1]);
    const Tensor* bias = conv.inputs.size() > 2 ? constant_of(g, conv.inputs[2]) : nullptr;
    if (conv.inputs.size() > 2 && conv.inputs[2] >= 0 && !bias) continue;
    const Tensor* p[4];
    bool ok = w && w->dtype() == DType::kFloat32 && w->rank() >= 3;
    const int64_t m = ok ? w->shape()[0] : 0;
    for (int i = 0; i < 4 && ok; ++i) {
      p[i] = constant_of(g, bn.inputs[static_cast<size_t>(i) + 1]);
      ok = p[i] && p[i]->dtype() == DType::kFloat32 && p[i]->numel() == m;
    }
    if (!ok || (bias && (bias->dtype() != DType::kFloat32 || bias->numel() != m))) continue;
    TERN_ASSIGN_OR_RETURN(Tensor nw, Tensor::allocate(DType::kFloat32, w->shape()));
    TERN_ASSIGN_OR_RETURN(Tensor nb, Tensor::allocate(DType::kFloat32, {m}));
    const int64_t per = w->numel() / std::max<int64_t>(m, 1);
    const float* scale = p[0]->data<float>();
    const float* shift = p[1]->data<float>();
    const float* mean = p[2]->data<float>();
    const float* var = p[3]->data<float>();
    for (int64_t o = 0; o < m; ++o) {
      const double s =
          static_cast<double>(scale[o]) / std::sqrt(static_cast<double>(var[o]) + *eps);
      for (int64_t k = 0; k < per; ++k) {
        nw.data<float>()[o * per + k] = static_cast<float>(w->data<float>()[o * per + k] * s);
      }
      const double b0 = bias ? bias->data<float>()[o] : 0.0;
      nb.data<float>()[o] = static_cast<float>((b0 - mean[o]) * s + shift[o]);
    }
    const std::string base = conv.name.empty() ? g.values[static_cast<size_t>(x)].name : conv.name;
    int wid = add_constant(g, base + "/bn_folded_weight", std::move(nw));
    int bid = add_constant(g, base + "/bn_folded_bias", std::move(nb));
    conv.inputs.resize(3);
    conv.inputs[1] = wid;
    conv.inputs[2] = bid;
    conv.outputs[0] = bn.outputs[0];
    removed[b] = true;
    ++report->batch_norms_folded;
  }
  erase_nodes(g, removed);
  return Status::ok();
}

Status fuse_hardswish(Graph& g, OptimizerReport* report) {
  PatternView pv{g};
  for (size_t d = 0; d < g.nodes.size(); ++d) {
    Node& div = g.nodes[d];
    // div(mul(x, clip(add(x, 3), 0, 6)), 6)
    if (div.op_type != "Div" || !div.domain.empty() || div.inputs.size() != 2) continue;
    if (scalar_of(g, div.inputs[1]) != 6.0f) continue;
    Node* mul = pv.node_at(div.inputs[0], "Mul");
    if (!mul || !pv.only(div.inputs[0], &div)) continue;
    for (int side = 0; side < 2; ++side) {
      const int x = mul->inputs[static_cast<size_t>(side)];
      const int c = mul->inputs[static_cast<size_t>(1 - side)];
      Node* clip = pv.node_at(c, "Clip");
      if (!clip || !pv.only(c, mul)) continue;
      auto act = activation_of(g, *clip);
      if (!act || act->params[0] != 0.0f || act->params[1] != 6.0f) continue;
      Node* add = pv.node_at(clip->inputs[0], "Add");
      if (!add || !pv.only(clip->inputs[0], clip)) continue;
      const bool x_first = add->inputs[0] == x && scalar_of(g, add->inputs[1]) == 3.0f;
      const bool x_second = add->inputs[1] == x && scalar_of(g, add->inputs[0]) == 3.0f;
      if (!x_first && !x_second) continue;
      pv.removed[pv.index_of(mul)] = pv.removed[pv.index_of(clip)] = pv.removed[pv.index_of(add)] =
          true;
      div.op_type = "HardSwish";
      div.inputs = {x};
      div.attrs = Attributes();
      ++report->hardswish_fused;
      break;
    }
  }
  erase_nodes(g, pv.removed);
  return Status::ok();
}

Status fuse_layer_norm(Graph& g, OptimizerReport* report) {
  PatternView pv{g};
  // ReduceMean over the last axis only, keeping it (opset < 18: axes is an attribute).
  auto last_axis_mean = [&](const Node* n) {
    if (!n || n->inputs.size() != 1) return false;
    auto axes = n->attrs.get_ints("axes", {});
    auto keep = n->attrs.get_int("keepdims", 1);
    return axes && keep && *keep == 1 && *axes == std::vector<int64_t>{-1};
  };
  // A constant float32 vector (or [1, ..., n]) to scale or shift the normalised rows with.
  auto row_vector = [&](int v) {
    const Tensor* t = constant_of(g, v);
    if (!t || t->dtype() != DType::kFloat32 || t->rank() == 0) return false;
    return t->numel() == t->shape().back();
  };
  for (size_t a = 0; a < g.nodes.size(); ++a) {
    Node& add_b = g.nodes[a];
    // add(mul(div(sub(x, mean(x)), sqrt(add(mean(pow(sub, 2)), eps))), scale), bias)
    if (pv.removed[a] || add_b.op_type != "Add" || !add_b.domain.empty() ||
        add_b.inputs.size() != 2)
      continue;
    for (int side = 0; side < 2; ++side) {
      const int mul_out = add_b.inputs[static_cast<size_t>(side)];
      const int bias = add_b.inputs[static_cast<size_t>(1 - side)];
      Node* mul = pv.node_at(mul_out, "Mul");
      if (!mul || !row_vector(bias) || !pv.only(mul_out, &add_b) || mul->inputs.size() != 2)
        continue;
      const int scale_side = row_vector(mul->inputs[1]) ? 1 : row_vector(mul->inputs[0]) ? 0 : -1;
      if (scale_side < 0) continue;
      const int div_out = mul->inputs[static_cast<size_t>(1 - scale_side)];
      const int scale = mul->inputs[static_cast<size_t>(scale_side)];
      Node* div = pv.node_at(div_out, "Div");
      if (!div || !pv.only(div_out, mul) || div->inputs.size() != 2) continue;
      const int sub_out = div->inputs[0];
      Node* sub = pv.node_at(sub_out, "Sub");
      Node* sqrt = pv.node_at(div->inputs[1], "Sqrt");
      if (!sub || !sqrt || !pv.only(div->inputs[1], div) || sub->inputs.size() != 2) continue;
      const int x = sub->inputs[0];
      Node* mean = pv.node_at(sub->inputs[1], "ReduceMean");
      if (!last_axis_mean(mean) || mean->inputs[0] != x || !pv.only(sub->inputs[1], sub)) continue;
      Node* add_eps = pv.node_at(sqrt->inputs[0], "Add");
      if (!add_eps || !pv.only(sqrt->inputs[0], sqrt) || add_eps->inputs.size() != 2) continue;
      const int eps_side = scalar_of(g, add_eps->inputs[1])   ? 1
                           : scalar_of(g, add_eps->inputs[0]) ? 0
                                                              : -1;
      if (eps_side < 0) continue;
      const float eps = *scalar_of(g, add_eps->inputs[static_cast<size_t>(eps_side)]);
      const int var_out = add_eps->inputs[static_cast<size_t>(1 - eps_side)];
      Node* var = pv.node_at(var_out, "ReduceMean");
      if (!last_axis_mean(var) || !pv.only(var_out, add_eps)) continue;
      Node* pow = pv.node_at(var->inputs[0], "Pow");
      if (!pow || !pv.only(var->inputs[0], var) || pow->inputs.size() != 2 ||
          pow->inputs[0] != sub_out || scalar_of(g, pow->inputs[1]) != 2.0f) {
        continue;
      }
      // sub's output feeds exactly the Pow and the Div.
      const auto& readers = pv.consumers[static_cast<size_t>(sub_out)];
      if (pv.is_output[static_cast<size_t>(sub_out)] || readers.size() != 2) continue;
      const Tensor& sc = *constant_of(g, scale);
      const Tensor& bi = *constant_of(g, bias);
      if (sc.numel() != bi.numel()) continue;
      for (Node* n : {mul, div, sub, sqrt, mean, add_eps, var, pow})
        pv.removed[pv.index_of(n)] = true;
      add_b.op_type = "LayerNormalization";
      add_b.inputs = {x, scale, bias};
      add_b.attrs = Attributes();
      Attribute axis, epsilon;
      axis.kind = Attribute::Kind::kInt;
      axis.i = -1;
      epsilon.kind = Attribute::Kind::kFloat;
      epsilon.f = eps;
      add_b.attrs.set("axis", axis);
      add_b.attrs.set("epsilon", epsilon);
      ++report->layer_norms_fused;
      break;
    }
  }
  erase_nodes(g, pv.removed);
  return Status::ok();
}

Status fuse_gelu(Graph& g, OptimizerReport* report) {
  PatternView pv{g};
  auto near = [&](int v, float want) {
    auto x = scalar_of(g, v);
    return x && std::abs(*x - want) <= 1e-4f * std::abs(want);
  };
  for (size_t t = 0; t < g.nodes.size(); ++t) {
    Node& top = g.nodes[t];
    // mul(mul(x, add(erf(div(x, sqrt 2)), 1)), 0.5), Mul operands in either order
    if (pv.removed[t] || top.op_type != "Mul" || !top.domain.empty() || top.inputs.size() != 2)
      continue;
    const int half_side = near(top.inputs[1], 0.5f) ? 1 : near(top.inputs[0], 0.5f) ? 0 : -1;
    if (half_side < 0) continue;
    const int inner_out = top.inputs[static_cast<size_t>(1 - half_side)];
    Node* inner = pv.node_at(inner_out, "Mul");
    if (!inner || !pv.only(inner_out, &top) || inner->inputs.size() != 2) continue;
    for (int side = 0; side < 2; ++side) {
      const int x = inner->inputs[static_cast<size_t>(side)];
      const int add_out = inner->inputs[static_cast<size_t>(1 - side)];
      Node* add = pv.node_at(add_out, "Add");
      if (!add || !pv.only(add_out, inner) || add->inputs.size() != 2) continue;
      const int one_side = near(add->inputs[1], 1.0f) ? 1 : near(add->inputs[0], 1.0f) ? 0 : -1;
      if (one_side < 0) continue;
      const int erf_out = add->inputs[static_cast<size_t>(1 - one_side)];
      Node* erf = pv.node_at(erf_out, "Erf");
      if (!erf || !pv.only(erf_out, add)) continue;
      Node* div = pv.node_at(erf->inputs[0], "Div");
      if (!div || !pv.only(erf->inputs[0], erf) || div->inputs.size() != 2 || div->inputs[0] != x ||
          !near(div->inputs[1], 1.41421356f)) {
        continue;
      }
      for (Node* n : {inner, add, erf, div}) pv.removed[pv.index_of(n)] = true;
      top.op_type = "Gelu";
      top.inputs = {x};
      top.attrs = Attributes();
      ++report->gelus_fused;
      break;
    }
  }
  erase_nodes(g, pv.removed);
  return Status::ok();
}

Status fuse_matmul_epilogue(Graph& g, OptimizerReport* report) {
  PatternView pv{g};
  for (size_t a = 0; a < g.nodes.size(); ++a) {
    Node& add = g.nodes[a];
    if (pv.removed[a] || add.op_type != "Add" || !add.domain.empty() || add.inputs.size() != 2)
      continue;
    for (int side = 0; side < 2; ++side) {
      const int mm_out = add.inputs[static_cast<size_t>(side)];
      const int bias = add.inputs[static_cast<size_t>(1 - side)];
      Node* mm = pv.node_at(mm_out, "MatMul");
      if (!mm || !pv.only(mm_out, &add)) continue;
      const Tensor* w = constant_of(g, mm->inputs[1]);
      const Tensor* b = constant_of(g, bias);
      if (!w || !b || w->dtype() != DType::kFloat32 || w->rank() != 2 ||
          b->dtype() != DType::kFloat32 || b->rank() == 0 || b->shape().back() != w->shape()[1] ||
          b->numel() != w->shape()[1]) {
        continue;
      }
      pv.removed[pv.index_of(mm)] = true;
      add.op_type = "FusedMatMul";
      add.inputs = {mm->inputs[0], mm->inputs[1], bias};
      add.attrs = Attributes();
      ++report->matmuls_fused;
      break;
    }
  }
  erase_nodes(g, pv.removed);
  // A Relu or Gelu that alone reads a FusedMatMul's output runs inside it.
  PatternView again{g};
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    Node& act = g.nodes[n];
    if ((act.op_type != "Relu" && act.op_type != "Gelu") || !act.domain.empty()) continue;
    if (act.op_type == "Gelu") {
      auto approximate = act.attrs.get_string("approximate", "none");
      if (!approximate || *approximate != "none") continue;
    }
    Node* mm = again.node_at(act.inputs[0], "FusedMatMul");
    if (!mm || !again.only(act.inputs[0], &act) || mm->attrs.find("activation")) continue;
    Attribute kind;
    kind.kind = Attribute::Kind::kString;
    kind.s = act.op_type;
    mm->attrs.set("activation", kind);
    mm->outputs = act.outputs;
    again.removed[n] = true;
  }
  erase_nodes(g, again.removed);
  return Status::ok();
}

// conv(x) * s + b with constant float32 weights (and bias): the same convolution with weights
// W * s and bias B * s + b. Returns false when the weights are not constant.
Expected<bool> fold_affine_into_conv(Graph& g, Node& conv, const FusedActivation& act) {
  // Handles, not pointers into g.values: add_constant below may move them.
  std::optional<Tensor> w_handle, bias_handle;
  if (const Tensor* t = constant_of(g, conv.inputs[1])) w_handle = *t;
  const bool has_bias = conv.inputs.size() > 2 && conv.inputs[2] >= 0;
  if (const Tensor* t = has_bias ? constant_of(g, conv.inputs[2]) : nullptr) bias_handle = *t;
  const Tensor* w = w_handle ? &*w_handle : nullptr;
  const Tensor* bias = bias_handle ? &*bias_handle : nullptr;
  if (!w || w->dtype() != DType::kFloat32 || w->rank() < 3 || (has_bias && !bias)) return false;
  const int64_t m = w->shape()[0];
  if (bias && (bias->dtype() != DType::kFloat32 || bias->numel() != m)) return false;
  const float scale = act.params[0], shift = act.params[1];
  const std::string base =
      conv.name.empty() ? g.values[static_cast<size_t>(conv.outputs[0])].name : conv.name;
  if (scale != 1.0f) {
    TERN_ASSIGN_OR_RETURN(Tensor nw, Tensor::allocate(DType::kFloat32, w->shape()));
    for (int64_t i = 0; i < w->numel(); ++i) nw.data<float>()[i] = w->data<float>()[i] * scale;
    conv.inputs[1] = add_constant(g, base + "/scaled_weight", std::move(nw));
  }
  if (scale != 1.0f || shift != 0.0f || !has_bias) {
    TERN_ASSIGN_OR_RETURN(Tensor nb, Tensor::allocate(DType::kFloat32, {m}));
    for (int64_t o = 0; o < m; ++o) {
      nb.data<float>()[o] = (bias ? bias->data<float>()[o] * scale : 0.0f) + shift;
    }
    conv.inputs.resize(3, -1);
    conv.inputs[2] = add_constant(g, base + "/shifted_bias", std::move(nb));
  }
  return true;
}

Status fuse_conv_activation(Graph& g, OptimizerReport* report) {
  auto consumers = value_consumers(g);
  auto producers = value_producers(g);
  auto is_output = graph_output_mask(g);
  std::vector<bool> removed(g.nodes.size(), false);
  for (size_t a = 0; a < g.nodes.size(); ++a) {
    const Node& act_node = g.nodes[a];
    auto act = activation_of(g, act_node);
    if (!act || act_node.inputs.empty()) continue;
    const int x = act_node.inputs[static_cast<size_t>(act->input)];
    const int c = producers[static_cast<size_t>(x)];
    if (c < 0 || removed[static_cast<size_t>(c)]) continue;
    Node& conv = g.nodes[static_cast<size_t>(c)];
    const bool plain_conv = conv.op_type == "Conv" && conv.domain.empty();
    const bool fused_conv = conv.op_type == "FusedConv" && conv.inputs.size() <= 3;
    if ((!plain_conv && !fused_conv) || conv.inputs.size() < 2 || conv.outputs[0] != x ||
        !only_read_by(consumers, is_output, x, a)) {
      continue;
    }
    // A constant operand of higher rank than the convolution's output would broadcast it.
    const Tensor* w = constant_of(g, conv.inputs[1]);
    if (act->operand_rank > (w ? w->rank() : size_t{1})) continue;
    // FusedConv computes float32: constant float32 weights or a float32-typed output say so.
    const DType typed = g.values[static_cast<size_t>(x)].type.dtype;
    if (!(w ? w->dtype() == DType::kFloat32 : typed == DType::kFloat32)) continue;
    bool folded = false;
    if (act->kind == "Affine" && !has_epilogue(conv)) {
      // Straight after the convolution an affine step costs nothing: it goes into the weights.
      TERN_ASSIGN_OR_RETURN(folded, fold_affine_into_conv(g, conv, *act));
    }
    if (!folded) {
      conv.op_type = "FusedConv";
      append_fused_activation(conv, *act);
    }
    conv.outputs[0] = act_node.outputs[0];
    producers[static_cast<size_t>(conv.outputs[0])] = c;
    removed[a] = true;
    ++report->activations_fused;
  }
  erase_nodes(g, removed);
  return Status::ok();
}

Status remove_dead_nodes(Graph& g, OptimizerReport* report) {
  for (bool changed = true; changed;) {
    changed = false;
    auto consumers = value_consumers(g);
    auto is_output = graph_output_mask(g);
    std::vector<bool> removed(g.nodes.size(), false);
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      bool used = std::any_of(g.nodes[n].outputs.begin(), g.nodes[n].outputs.end(), [&](int id) {
        return id >= 0 &&
               (is_output[static_cast<size_t>(id)] || !consumers[static_cast<size_t>(id)].empty());
      });
      if (!used) {
        removed[n] = changed = true;
        ++report->dead_nodes_removed;
      }
    }
    erase_nodes(g, removed);
  }
  return Status::ok();
}

Status optimize_graph(Graph& g, OptimizerReport* report) {
  TERN_RETURN_IF_ERROR(fold_batch_norm_into_conv(g, report));
  TERN_RETURN_IF_ERROR(fuse_hardswish(g, report));
  TERN_RETURN_IF_ERROR(fuse_layer_norm(g, report));
  TERN_RETURN_IF_ERROR(fuse_gelu(g, report));
  TERN_RETURN_IF_ERROR(fuse_matmul_epilogue(g, report));
  TERN_RETURN_IF_ERROR(fuse_conv_activation(g, report));
  return remove_dead_nodes(g, report);
}

}  // namespace tern
