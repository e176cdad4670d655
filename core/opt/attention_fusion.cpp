#include "core/opt/attention_fusion.h"

#include <algorithm>
#include <optional>

namespace tern {

namespace {

struct Uses {
  std::vector<int> producer;          // node producing each value, -1 for none
  std::vector<int> readers;           // node inputs reading each value
  std::vector<bool> is_graph_output;  // value is a graph output
};

Uses count_uses(const Graph& g) {
  Uses u;
  u.producer.assign(g.values.size(), -1);
  u.readers.assign(g.values.size(), 0);
  u.is_graph_output.assign(g.values.size(), false);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    for (int id : g.nodes[n].outputs) {
      if (id >= 0) u.producer[static_cast<size_t>(id)] = static_cast<int>(n);
    }
    for (int id : g.nodes[n].inputs) {
      if (id >= 0) ++u.readers[static_cast<size_t>(id)];
    }
  }
  for (int id : g.outputs) u.is_graph_output[static_cast<size_t>(id)] = true;
  return u;
}

// True when value id is read by exactly one node input and is not a graph output: it can vanish.
bool private_value(const Uses& u, int id) {
  return id >= 0 && u.readers[static_cast<size_t>(id)] == 1 &&
         !u.is_graph_output[static_cast<size_t>(id)];
}

const Node* producer(const Graph& g, const Uses& u, int id, const char* op_type, int* index) {
  if (id < 0) return nullptr;
  int p = u.producer[static_cast<size_t>(id)];
  if (p < 0 || g.nodes[static_cast<size_t>(p)].op_type != op_type ||
      !g.nodes[static_cast<size_t>(p)].domain.empty()) {
    return nullptr;
  }
  *index = p;
  return &g.nodes[static_cast<size_t>(p)];
}

bool single_output(const Node& n) {
  return n.outputs.size() == 1 && n.outputs[0] >= 0;
}

}  // namespace

std::vector<AttentionMatch> find_attention_patterns(const Graph& g,
                                                    const std::vector<bool>& constant) {
  std::vector<AttentionMatch> out;
  const Uses u = count_uses(g);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& mm2 = g.nodes[n];
    if (mm2.op_type != "MatMul" || !mm2.domain.empty() || mm2.inputs.size() != 2) continue;
    AttentionMatch m;
    m.matmul_v = n;
    m.v = mm2.inputs[1];
    int idx = -1;
    const Node* sm = producer(g, u, mm2.inputs[0], "Softmax", &idx);
    if (!sm || !private_value(u, mm2.inputs[0]) || !single_output(*sm)) continue;
    m.softmax = static_cast<size_t>(idx);
    auto axis = sm->attrs.get_int("axis", -1);
    if (!axis || *axis != -1) continue;
    int cur = sm->inputs[0];
    if (const Node* add = producer(g, u, cur, "Add", &idx); add && private_value(u, cur)) {
      m.add_node = idx;
      // The scores side is the one a Div/Mul/MatMul produces; the other is the mask.
      int side = -1;
      for (int s = 0; s < 2 && side < 0; ++s) {
        int j = -1;
        for (const char* op : {"Div", "Mul", "MatMul"}) {
          if (producer(g, u, add->inputs[static_cast<size_t>(s)], op, &j)) side = s;
        }
      }
      if (side < 0) continue;
      m.mask = add->inputs[static_cast<size_t>(1 - side)];
      cur = add->inputs[static_cast<size_t>(side)];
    }
    for (const char* op : {"Div", "Mul"}) {
      const Node* sc = producer(g, u, cur, op, &idx);
      if (!sc || !private_value(u, cur) || sc->inputs.size() != 2) continue;
      int scalar_side = -1;
      for (int s = 0; s < 2; ++s) {
        int id = sc->inputs[static_cast<size_t>(s)];
        if (id >= 0 && constant[static_cast<size_t>(id)]) scalar_side = s;
      }
      if (scalar_side < 0 || (op[0] == 'D' && scalar_side != 1)) continue;
      m.scale_node = idx;
      m.scale_value = sc->inputs[static_cast<size_t>(scalar_side)];
      m.scale_divides = op[0] == 'D';
      cur = sc->inputs[static_cast<size_t>(1 - scalar_side)];
      break;
    }
    const Node* mm1 = producer(g, u, cur, "MatMul", &idx);
    if (!mm1 || !private_value(u, cur)) continue;
    m.matmul_qk = static_cast<size_t>(idx);
    m.q = mm1->inputs[0];
    const Node* tr = producer(g, u, mm1->inputs[1], "Transpose", &idx);
    if (!tr) continue;
    m.transpose = static_cast<size_t>(idx);
    auto perm = tr->attrs.get_ints("perm");
    if (!perm) continue;
    const std::vector<int64_t> p4 = {0, 1, 3, 2}, p3 = {0, 2, 1};
    if (*perm != p4 && *perm != p3) continue;
    m.k = tr->inputs[0];
    m.keep_transpose = !private_value(u, mm1->inputs[1]);
    m.removed = {m.matmul_qk, m.softmax, m.matmul_v};
    if (!m.keep_transpose) m.removed.push_back(m.transpose);
    if (m.scale_node >= 0) m.removed.push_back(static_cast<size_t>(m.scale_node));
    if (m.add_node >= 0) m.removed.push_back(static_cast<size_t>(m.add_node));
    out.push_back(std::move(m));
  }
  return out;
}

namespace {

// The scale of match m's fused node when its shapes and dtypes fit the Attention kernel.
std::optional<float> attention_scale(const PlanGraph& pg, const AttentionMatch& m) {
  const Graph& g = *pg.graph;
  // Every replaced node must be a run-time step (not folded or shape math).
  for (size_t n : m.removed) {
    for (int id : g.nodes[n].outputs) {
      const auto where = id < 0 ? PlannedValue::Where::kArena : pg.value(id).where;
      if (where != PlannedValue::Where::kArena && where != PlannedValue::Where::kOutput) {
        return std::nullopt;
      }
    }
  }
  const PlannedValue &q = pg.value(m.q), &k = pg.value(m.k), &v = pg.value(m.v);
  if (q.dtype != DType::kFloat32 || k.dtype != DType::kFloat32 || v.dtype != DType::kFloat32) {
    return std::nullopt;
  }
  const size_t r = q.shape.size();
  if ((r != 3 && r != 4) || k.shape.size() != r || v.shape.size() != r) return std::nullopt;
  // MatMul broadcasts batch dims; Attention needs them equal.
  for (size_t d = 0; d + 2 < r; ++d) {
    if (q.shape[d] != k.shape[d] || q.shape[d] != v.shape[d]) return std::nullopt;
  }
  float scale = 1.0f;
  if (m.scale_value >= 0) {
    const PlannedValue& sv = pg.value(m.scale_value);
    if (sv.where != PlannedValue::Where::kConstant || sv.dtype != DType::kFloat32 ||
        sv.constant->numel() != 1) {
      return std::nullopt;
    }
    const float c = sv.constant->data<float>()[0];
    if (m.scale_divides && c == 0.0f) return std::nullopt;
    scale = m.scale_divides ? 1.0f / c : c;
  }
  const Shape& scores = pg.value(g.nodes[m.matmul_qk].outputs[0]).shape;
  if (m.add_node >= 0) {
    if (pg.value(m.mask).dtype != DType::kFloat32) return std::nullopt;
    if (pg.value(g.nodes[static_cast<size_t>(m.add_node)].outputs[0]).shape != scores) {
      return std::nullopt;
    }
  }
  return scale;
}

std::unique_ptr<Node> attention_node(const Graph& g, const AttentionMatch& m, float scale,
                                     size_t rank) {
  auto node = std::make_unique<Node>();
  node->name = g.nodes[m.matmul_v].name;
  node->op_type = "Attention";
  node->inputs = {m.q, m.k, m.v};
  if (m.mask >= 0) node->inputs.push_back(m.mask);
  node->outputs = g.nodes[m.matmul_v].outputs;
  Attribute a;
  a.kind = Attribute::Kind::kFloat;
  a.f = scale;
  node->attrs.set("scale", a);
  if (rank == 3) {  // [N, S, D] reads as one head per batch entry
    Attribute h;
    h.kind = Attribute::Kind::kInt;
    h.i = 1;
    node->attrs.set("q_num_heads", h);
    node->attrs.set("kv_num_heads", h);
  }
  return node;
}

// The context of the fused node for match m; false when its inference does not give the
// replaced MatMul's output.
bool attention_context(const PlanGraph& pg, const AttentionMatch& m, const Node& node,
                       OpContext* ctx) {
  const Graph& g = *pg.graph;
  ctx->flags = pg.flags;
  ctx->weights = pg.weights;
  const std::string where =
      str_cat("fused Attention (mha fastpath) of ", g.describe_node(m.matmul_qk), " .. ",
              g.describe_node(m.matmul_v));
  if (!make_node_context(g, node, where, pg.values, ctx).is_ok()) return false;
  return ctx->outputs[0].shape == pg.value(node.outputs[0]).shape;
}

}  // namespace

size_t fuse_attention(PlanGraph& pg, const std::vector<AttentionMatch>& matches,
                      const std::function<bool(const OpContext&)>& runnable) {
  const Graph& g = *pg.graph;
  size_t fused = 0;
  std::vector<bool> taken(g.nodes.size(), false);
  for (size_t i = 0; i < matches.size(); ++i) {
    const AttentionMatch& m = matches[i];
    if (std::any_of(m.removed.begin(), m.removed.end(), [&](size_t n) { return taken[n]; })) {
      continue;
    }
    const std::optional<float> scale = attention_scale(pg, m);
    if (!scale) continue;
    std::unique_ptr<Node> node = attention_node(g, m, *scale, pg.value(m.q).shape.size());
    auto ctx = std::make_unique<OpContext>();
    if (!attention_context(pg, m, *node, ctx.get()) || !runnable(*ctx)) continue;
    for (size_t n : m.removed) {
      taken[n] = true;
      if (n != m.matmul_v) pg.removed[n] = true;
    }
    FusionRecord rec;
    rec.kind = FusionRecord::Kind::kAttention;
    rec.anchor = m.matmul_v;
    rec.node = node.get();
    rec.match = i;
    pg.fusions.push_back(std::move(rec));
    pg.ctxs[m.matmul_v] = std::move(ctx);
    pg.nodes.push_back(std::move(node));
    ++fused;
  }
  // Values only the removed nodes wrote are never materialised.
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (!pg.removed[n]) continue;
    for (int id : g.nodes[n].outputs) {
      if (id >= 0) pg.value(id).where = PlannedValue::Where::kNone;
    }
  }
  pg.fused_attention += fused;
  return fused;
}

bool refit_attention(const PlanGraph& pg, const AttentionMatch& m, const Node& fused,
                     OpContext* ctx) {
  const std::optional<float> scale = attention_scale(pg, m);
  const Attribute* a = fused.attrs.find("scale");
  if (!scale || !a || a->f != *scale) return false;
  return attention_context(pg, m, fused, ctx);
}

}  // namespace tern
