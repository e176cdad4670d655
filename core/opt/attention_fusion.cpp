#include "core/opt/attention_fusion.h"

#include <algorithm>
#include <optional>

#include "core/opt/graph_util.h"

namespace tern {

namespace {

struct Uses {
  std::vector<int> producer;          // node producing each value, -1 for none
  std::vector<int> readers;           // node inputs reading each value
  std::vector<int> reader;            // the last node reading each value, -1 for none
  std::vector<bool> is_graph_output;  // value is a graph output
};

Uses count_uses(const Graph& g) {
  Uses u;
  u.producer.assign(g.values.size(), -1);
  u.readers.assign(g.values.size(), 0);
  u.reader.assign(g.values.size(), -1);
  u.is_graph_output.assign(g.values.size(), false);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    for (int id : g.nodes[n].outputs) {
      if (id >= 0) u.producer[static_cast<size_t>(id)] = static_cast<int>(n);
    }
    for (int id : g.nodes[n].inputs) {
      if (id < 0) continue;
      ++u.readers[static_cast<size_t>(id)];
      u.reader[static_cast<size_t>(id)] = static_cast<int>(n);
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

bool is_transpose(const Node& n, const std::vector<int64_t>& want) {
  if (n.op_type != "Transpose" || !n.domain.empty() || n.inputs.size() != 1 || !single_output(n)) {
    return false;
  }
  auto perm = n.attrs.get_ints("perm");
  return perm && *perm == want;
}

bool is_transpose_0213(const Node& n) {
  return is_transpose(n, {0, 2, 1, 3});
}

// Value id as x scaled by a float32 scalar constant, Div(x, c), Mul(x, c) or Mul(c, x), with id
// read once: returns x and fills the node, c's value id and whether it divides; -1 when id is not
// that (a constant of other elements scales more than the scores: it stays a node of its own).
int scaled_value(const Graph& g, const Uses& u, const std::vector<bool>& constant, int id,
                 int* node, int* value, bool* divides) {
  for (const char* op : {"Div", "Mul"}) {
    int idx = -1;
    const Node* sc = producer(g, u, id, op, &idx);
    if (!sc || !private_value(u, id) || sc->inputs.size() != 2) continue;
    int scalar_side = -1;
    for (int s = 0; s < 2; ++s) {
      const int c = sc->inputs[static_cast<size_t>(s)];
      if (c < 0 || !constant[static_cast<size_t>(c)]) continue;
      const std::optional<Tensor>& t = g.values[static_cast<size_t>(c)].constant;
      if (t && t->dtype() == DType::kFloat32 && t->numel() == 1) scalar_side = s;
    }
    if (scalar_side < 0 || (op[0] == 'D' && scalar_side != 1)) continue;
    *node = idx;
    *value = sc->inputs[static_cast<size_t>(scalar_side)];
    *divides = op[0] == 'D';
    return sc->inputs[static_cast<size_t>(1 - scalar_side)];
  }
  return -1;
}

// Value id as the split of a projection into heads, Transpose(Reshape(x3), [0, 2, 1, 3]), with
// both outputs read once: *x3, *heads (the Reshape's output) and the two nodes.
bool head_split(const Graph& g, const Uses& u, int id, int* x3, int* heads,
                std::vector<size_t>* nodes) {
  int t = -1, r = -1;
  const Node* tr = producer(g, u, id, "Transpose", &t);
  if (!tr || !private_value(u, id) || !is_transpose_0213(*tr)) return false;
  const Node* rs = producer(g, u, tr->inputs[0], "Reshape", &r);
  if (!rs || !private_value(u, tr->inputs[0]) || rs->inputs.empty() || rs->inputs[0] < 0) {
    return false;
  }
  *x3 = rs->inputs[0];
  *heads = tr->inputs[0];
  nodes->push_back(static_cast<size_t>(t));
  nodes->push_back(static_cast<size_t>(r));
  return true;
}

// The 3-D form of match m (AttentionMatch::q3 ...), when the graph has it.
void find_three_d(const Graph& g, const Uses& u, AttentionMatch* m) {
  if (m->keep_transpose) return;  // K in heads is read elsewhere: it stays
  AttentionMatch t = *m;
  if (!head_split(g, u, m->q, &t.q3, &t.q_heads, &t.removed3) ||
      !head_split(g, u, m->k, &t.k3, &t.k_heads, &t.removed3) ||
      !head_split(g, u, m->v, &t.v3, &t.v_heads, &t.removed3)) {
    return;
  }
  // The merge: MatMul's output -> Transpose [0, 2, 1, 3] -> Reshape, each read once.
  const int y4 = g.nodes[m->matmul_v].outputs[0];
  if (!private_value(u, y4)) return;
  const int tn = u.reader[static_cast<size_t>(y4)];
  if (tn < 0 || !is_transpose_0213(g.nodes[static_cast<size_t>(tn)])) return;
  const int ty = g.nodes[static_cast<size_t>(tn)].outputs[0];
  if (!private_value(u, ty)) return;
  const int rn = u.reader[static_cast<size_t>(ty)];
  const Node& rs = g.nodes[static_cast<size_t>(rn)];
  if (rs.op_type != "Reshape" || !rs.domain.empty() || rs.inputs.empty() || rs.inputs[0] != ty ||
      !single_output(rs)) {
    return;
  }
  t.y_heads = ty;
  t.y3 = rs.outputs[0];
  t.removed3.push_back(static_cast<size_t>(tn));
  t.removed3.push_back(static_cast<size_t>(rn));
  *m = std::move(t);
}

// The sequence-first form of match m (AttentionMatch::qs ...), when the graph has it.
void find_seq_first(const Graph& g, const Uses& u, AttentionMatch* m) {
  if (m->keep_transpose || m->y3 >= 0) return;
  const std::vector<int64_t> swap = {1, 0, 2};
  AttentionMatch t = *m;
  // id as Transpose [1, 0, 2](*s), read once.
  auto heads = [&](int id, int* s) {
    int tn = -1;
    const Node* tr = producer(g, u, id, "Transpose", &tn);
    if (!tr || !private_value(u, id) || !is_transpose(*tr, swap)) return false;
    *s = tr->inputs[0];
    t.removed3.push_back(static_cast<size_t>(tn));
    return true;
  };
  if (!heads(m->q, &t.qs) || !heads(m->k, &t.ks) || !heads(m->v, &t.vs)) return;
  const int y = g.nodes[m->matmul_v].outputs[0];
  if (!private_value(u, y)) return;
  const int tn = u.reader[static_cast<size_t>(y)];
  if (tn < 0 || !is_transpose(g.nodes[static_cast<size_t>(tn)], swap)) return;
  t.ys = g.nodes[static_cast<size_t>(tn)].outputs[0];
  t.removed3.push_back(static_cast<size_t>(tn));
  *m = std::move(t);
}

}  // namespace

std::vector<AttentionMatch> find_attention_patterns(const Graph& g,
                                                    const std::vector<bool>& constant) {
  std::vector<AttentionMatch> out;
  if (!op_built(OptOp::kAttention)) return out;  // a selective build without it
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
    if (int x = scaled_value(g, u, constant, cur, &m.scale_node, &m.scale_value, &m.scale_divides);
        x >= 0) {
      cur = x;
    }
    const Node* mm1 = producer(g, u, cur, "MatMul", &idx);
    if (!mm1 || !private_value(u, cur)) continue;
    m.matmul_qk = static_cast<size_t>(idx);
    m.q = mm1->inputs[0];
    if (int x = scaled_value(g, u, constant, m.q, &m.q_scale_node, &m.q_scale_value,
                             &m.q_scale_divides);
        x >= 0) {
      m.q = x;
    }
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
    if (m.q_scale_node >= 0) m.removed.push_back(static_cast<size_t>(m.q_scale_node));
    if (mm2.outputs.size() == 1 && mm2.outputs[0] >= 0) {
      find_three_d(g, u, &m);
      find_seq_first(g, u, &m);
    }
    out.push_back(std::move(m));
  }
  return out;
}

namespace {

// Every output of these nodes is written by a run-time step (not folded or shape math).
bool run_time_steps(const PlanGraph& pg, const std::vector<size_t>& nodes) {
  const Graph& g = *pg.graph;
  for (size_t n : nodes) {
    for (int id : g.nodes[n].outputs) {
      const auto where = id < 0 ? PlannedValue::Where::kArena : pg.value(id).where;
      if (where != PlannedValue::Where::kArena && where != PlannedValue::Where::kOutput) {
        return false;
      }
    }
  }
  return true;
}

// The scale of match m's fused node when its shapes and dtypes fit the Attention kernel.
std::optional<float> attention_scale(const PlanGraph& pg, const AttentionMatch& m) {
  const Graph& g = *pg.graph;
  if (!run_time_steps(pg, m.removed)) return std::nullopt;
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
  // A scalar constant's factor (its inverse where it divides).
  auto factor = [&](int value, bool divides) -> std::optional<float> {
    const PlannedValue& sv = pg.value(value);
    if (sv.where != PlannedValue::Where::kConstant || sv.dtype != DType::kFloat32 ||
        sv.constant->numel() != 1) {
      return std::nullopt;
    }
    const float c = sv.constant->data<float>()[0];
    if (divides && c == 0.0f) return std::nullopt;
    return divides ? 1.0f / c : c;
  };
  float scale = 1.0f;
  for (const auto& [value, divides] :
       {std::pair{m.scale_value, m.scale_divides}, std::pair{m.q_scale_value, m.q_scale_divides}}) {
    if (value < 0) continue;
    const std::optional<float> f = factor(value, divides);
    if (!f) return std::nullopt;
    scale *= *f;
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

// The head count of a split of x3 [b, s, h * d] into heads [b, s, h, d]; 0 when the shapes are
// not that.
int64_t split_heads(const PlanGraph& pg, int x3, int heads) {
  const PlannedValue& x = pg.value(x3);
  const Shape& h = pg.value(heads).shape;
  if (x.dtype != DType::kFloat32 || x.shape.size() != 3 || h.size() != 4 || h[0] != x.shape[0] ||
      h[1] != x.shape[1] || h[2] <= 0 || h[2] * h[3] != x.shape[2]) {
    return 0;
  }
  return h[2];
}

// The head count of match m's 3-D form for this plan's shapes; 0 when it does not fit (the
// 4-D form may still).
int64_t three_d_heads(const PlanGraph& pg, const AttentionMatch& m) {
  if (m.y3 < 0 || !run_time_steps(pg, m.removed3)) return 0;
  const int64_t h = split_heads(pg, m.q3, m.q_heads);
  if (h == 0 || split_heads(pg, m.k3, m.k_heads) != h || split_heads(pg, m.v3, m.v_heads) != h) {
    return 0;
  }
  // The merge: [b, h, s, dv] -> [b, s, h, dv] -> [b, s, h * dv].
  const Shape& y4 = pg.value(pg.graph->nodes[m.matmul_v].outputs[0]).shape;
  const Shape& y3 = pg.value(m.y3).shape;
  if (y4.size() != 4 || y4[1] != h || y3 != Shape{y4[0], y4[2], h * y4[3]}) return 0;
  return h;
}

// Whether match m's sequence-first form fits this plan: 3-D heads whose transposes each run.
bool seq_first_fits(const PlanGraph& pg, const AttentionMatch& m) {
  return m.ys >= 0 && pg.value(m.q).shape.size() == 3 && run_time_steps(pg, m.removed3);
}

// The forms a fused node takes: the plain one reads q, k and v as the MatMuls did.
enum class Form { kPlain, kThreeD, kSeqFirst };

std::unique_ptr<Node> attention_node(const Graph& g, const AttentionMatch& m, float scale,
                                     size_t rank, Form form, int64_t three_d_heads) {
  auto node = std::make_unique<Node>();
  node->name = g.nodes[m.matmul_v].name;
  node->op_type = "Attention";
  node->inputs = {m.q, m.k, m.v};
  node->outputs = g.nodes[m.matmul_v].outputs;
  int64_t heads = rank == 3 ? 1 : 0;  // [N, S, D] reads as one head per batch entry
  if (form == Form::kThreeD) {
    node->inputs = {m.q3, m.k3, m.v3};
    node->outputs = {m.y3};
    heads = three_d_heads;
  } else if (form == Form::kSeqFirst) {  // [S, N, D]: one head per entry of N too
    node->inputs = {m.qs, m.ks, m.vs};
    node->outputs = {m.ys};
    Attribute a;
    a.kind = Attribute::Kind::kInt;
    a.i = 1;
    node->attrs.set(kAttentionSeqFirst, a);
  }
  if (m.mask >= 0) node->inputs.push_back(m.mask);
  Attribute a;
  a.kind = Attribute::Kind::kFloat;
  a.f = scale;
  node->attrs.set("scale", a);
  if (heads > 0) {
    Attribute h;
    h.kind = Attribute::Kind::kInt;
    h.i = heads;
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
  ctx->subgraphs = pg.subgraphs;
  const std::string where =
      str_cat("fused Attention (mha fastpath) of ", g.describe_node(m.matmul_qk), " .. ",
              g.describe_node(m.matmul_v));
  if (!make_node_context(g, node, where, pg.values, ctx).is_ok()) return false;
  return ctx->outputs[0].shape == pg.value(node.outputs[0]).shape;
}

// in_form: the fused node has the 3-D or the sequence-first form.
void mark_removed(PlanGraph& pg, const AttentionMatch& m, bool in_form) {
  for (size_t n : m.removed) {
    if (n != m.matmul_v) pg.removed[n] = true;
  }
  if (in_form) {
    for (size_t n : m.removed3) pg.removed[n] = true;
  }
}

}  // namespace

size_t fuse_attention(PlanGraph& pg, const std::vector<AttentionMatch>& matches,
                      const std::function<bool(const OpContext&)>& runnable) {
  const Graph& g = *pg.graph;
  size_t fused = 0;
  std::vector<bool> taken(g.nodes.size(), false);
  const auto free_nodes = [&](const std::vector<size_t>& nodes) {
    return std::none_of(nodes.begin(), nodes.end(), [&](size_t n) { return taken[n]; });
  };
  for (size_t i = 0; i < matches.size(); ++i) {
    const AttentionMatch& m = matches[i];
    if (!free_nodes(m.removed)) continue;
    const std::optional<float> scale = attention_scale(pg, m);
    if (!scale) continue;
    // The 3-D or sequence-first form where it fits (no copies into and out of heads), else the
    // plain one.
    const bool free3 = free_nodes(m.removed3);
    const int64_t heads = free3 ? three_d_heads(pg, m) : 0;
    const bool seq_first = free3 && seq_first_fits(pg, m);
    std::unique_ptr<Node> node;
    std::unique_ptr<OpContext> ctx;
    for (Form f : {Form::kThreeD, Form::kSeqFirst, Form::kPlain}) {
      if ((f == Form::kThreeD && heads == 0) || (f == Form::kSeqFirst && !seq_first)) continue;
      node = attention_node(g, m, *scale, pg.value(m.q).shape.size(), f, heads);
      ctx = std::make_unique<OpContext>();
      if (attention_context(pg, m, *node, ctx.get()) && runnable(*ctx)) break;
      node.reset();
    }
    if (!node) continue;
    const bool in_form = node->outputs[0] != g.nodes[m.matmul_v].outputs[0];
    for (size_t n : m.removed) taken[n] = true;
    if (in_form) {
      for (size_t n : m.removed3) taken[n] = true;
    }
    mark_removed(pg, m, in_form);
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
  drop_unwritten_values(pg, pg.fusions);
  pg.fused_attention += fused;
  return fused;
}

void drop_unwritten_values(PlanGraph& pg, const std::vector<FusionRecord>& fusions) {
  const Graph& g = *pg.graph;
  std::vector<bool> dropped(g.nodes.size(), false), written(pg.values.size(), false);
  for (size_t n = 0; n < g.nodes.size(); ++n) dropped[n] = pg.removed[n];
  for (const FusionRecord& f : fusions) {
    dropped[f.anchor] = true;
    for (int id : f.node->outputs) {
      if (id >= 0) written[static_cast<size_t>(id)] = true;
    }
  }
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (!dropped[n]) continue;
    for (int id : g.nodes[n].outputs) {
      if (id >= 0 && !written[static_cast<size_t>(id)]) {
        pg.value(id).where = PlannedValue::Where::kNone;
      }
    }
  }
}

bool refit_attention(PlanGraph& pg, const AttentionMatch& m, const Node& fused, OpContext* ctx) {
  const std::optional<float> scale = attention_scale(pg, m);
  const Attribute* a = fused.attrs.find("scale");
  if (!scale || !a || a->f != *scale) return false;
  const bool three_d = m.y3 >= 0 && fused.outputs[0] == m.y3;
  const bool seq_first = m.ys >= 0 && fused.outputs[0] == m.ys;
  if (three_d) {
    const Attribute* h = fused.attrs.find("q_num_heads");
    if (!h || h->i != three_d_heads(pg, m)) return false;
  }
  if (seq_first && !seq_first_fits(pg, m)) return false;
  if (!attention_context(pg, m, fused, ctx)) return false;
  mark_removed(pg, m, three_d || seq_first);
  return true;
}

}  // namespace tern
