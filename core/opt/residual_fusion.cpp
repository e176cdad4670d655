#include "core/opt/residual_fusion.h"

#include "core/opt/fused_activation.h"
#include "core/opt/graph_util.h"

namespace tern {

namespace {

bool is_conv(const std::string& op) {
  return op == "Conv" || op == "FusedConv";
}

// The shape conditions of a residual fusion: the convolution's output, the other operand Z and
// every folded step's output have the sum's shape and float type (float32, or float16/bfloat16:
// the fused node accumulates in float32 and rounds once).
bool shapes_fit(const PlanGraph& pg, const Node& conv, const Node& add, int side,
                const std::vector<size_t>& chain) {
  const Graph& g = *pg.graph;
  const int y = add.inputs[static_cast<size_t>(side)];
  const int z = add.inputs[static_cast<size_t>(1 - side)];
  const Shape& out = pg.value(add.outputs[0]).shape;
  const PlannedValue& zv = pg.value(z);
  const DType t = pg.value(y).dtype;
  if (t != DType::kFloat32 && t != DType::kFloat16 && t != DType::kBFloat16) return false;
  if (zv.shape != out || pg.value(y).shape != out || zv.dtype != t ||
      zv.where == PlannedValue::Where::kNone || pg.value(conv.outputs[0]).shape != out) {
    return false;
  }
  for (size_t i = 1; i < chain.size(); ++i) {
    const PlannedValue& o = pg.value(g.nodes[chain[i]].outputs[0]);
    if (o.shape != out || o.dtype != t) return false;
  }
  return true;
}

std::string fused_where(const Graph& g, size_t conv, size_t add, size_t anchor) {
  return str_cat("fused Conv+Add", anchor != add ? "+activation" : "", " of ",
                 g.describe_node(conv), " .. ", g.describe_node(anchor));
}

// Marks what a fusion replaces: the convolution, the Add and the folded steps but the last, and
// the values only they wrote.
void mark_replaced(PlanGraph& pg, const FusionRecord& f) {
  const Graph& g = *pg.graph;
  pg.value(g.nodes[f.add].inputs[static_cast<size_t>(f.side)]).where = PlannedValue::Where::kNone;
  for (size_t i = 0; i + 1 < f.chain.size(); ++i) {
    pg.value(g.nodes[f.chain[i]].outputs[0]).where = PlannedValue::Where::kNone;
    pg.removed[f.chain[i]] = true;
  }
  pg.removed[f.conv] = true;
}

}  // namespace

size_t fuse_residual_adds(PlanGraph& pg) {
  const Graph& g = *pg.graph;
  const auto consumers = value_consumers(g);
  const std::vector<int> producer = value_producers(g);
  size_t fused_count = 0;
  auto arena_only_for = [&](int id, size_t reader) {
    const auto c = consumers[static_cast<size_t>(id)];
    return pg.value(id).where == PlannedValue::Where::kArena && c.size() == 1 && c[0] == reader;
  };
  // A node that runs as a step of this plan (unchanged ones may have no context yet).
  auto live = [&](size_t n) { return !pg.computed[n] && !pg.removed[n]; };
  for (size_t n : *pg.order) {
    const Node& add = g.nodes[n];
    if (!live(n) || !pg.ctxs[n] || pg.ctxs[n]->node != &add) continue;
    if (add.op_type != "Add" || add.inputs.size() != 2) continue;
    for (int side = 0; side < 2; ++side) {
      const int y = add.inputs[static_cast<size_t>(side)];
      const int z = add.inputs[static_cast<size_t>(1 - side)];
      const int c = y < 0 ? -1 : producer[static_cast<size_t>(y)];
      if (c < 0 || !live(static_cast<size_t>(c)) || y == z) continue;
      const Node& conv = g.nodes[static_cast<size_t>(c)];
      const OpContext* cc = pg.ctxs[static_cast<size_t>(c)].get();
      if ((cc && cc->node != &conv) || !is_conv(conv.op_type) || has_epilogue(conv) ||
          conv.inputs.size() > 3 || !arena_only_for(y, n)) {
        continue;
      }
      auto fused = std::make_unique<Node>(conv);
      fused->op_type = "FusedConv";
      fused->inputs.resize(3, -1);
      fused->inputs.push_back(z);
      fused->outputs = add.outputs;
      // The element-wise steps after the sum, each its predecessor's only reader, join the
      // epilogue; the last one's place in the order is the fused node's.
      std::vector<size_t> chain = {n};  // the sum's node, then the steps folded after it
      for (;;) {
        const int v = fused->outputs[0];
        const auto readers = consumers[static_cast<size_t>(v)];
        if (readers.size() != 1 || !live(readers[0]) || !arena_only_for(v, readers[0])) break;
        const Node& rn = g.nodes[readers[0]];
        auto act = activation_of(g, rn);
        const PlannedValue& ro = pg.value(rn.outputs[0]);
        if (!act || rn.inputs[static_cast<size_t>(act->input)] != v ||
            ro.shape != pg.value(add.outputs[0]).shape || ro.dtype != pg.value(v).dtype) {
          break;
        }
        append_fused_activation(*fused, *act);
        fused->outputs = rn.outputs;
        chain.push_back(readers[0]);
      }
      if (!shapes_fit(pg, conv, add, side, chain)) continue;
      const size_t anchor = chain.back();
      auto ctx = std::make_unique<OpContext>();
      ctx->flags = pg.flags;
      ctx->weights = pg.weights;
      ctx->subgraphs = pg.subgraphs;
      if (!make_node_context(g, *fused, fused_where(g, static_cast<size_t>(c), n, anchor),
                             pg.values, ctx.get())
               .is_ok()) {
        continue;
      }
      FusionRecord rec;
      rec.kind = FusionRecord::Kind::kResidual;
      rec.anchor = anchor;
      rec.node = fused.get();
      rec.conv = static_cast<size_t>(c);
      rec.add = n;
      rec.side = side;
      rec.chain = std::move(chain);
      mark_replaced(pg, rec);
      pg.ctxs[anchor] = std::move(ctx);
      pg.fusions.push_back(std::move(rec));
      pg.nodes.push_back(std::move(fused));
      ++fused_count;
      break;
    }
  }
  pg.fused_residuals += fused_count;
  return fused_count;
}

bool refit_residual(PlanGraph& pg, const FusionRecord& f, OpContext* ctx) {
  const Graph& g = *pg.graph;
  if (!shapes_fit(pg, g.nodes[f.conv], g.nodes[f.add], f.side, f.chain)) return false;
  ctx->flags = pg.flags;
  ctx->weights = pg.weights;
  ctx->subgraphs = pg.subgraphs;
  if (!make_node_context(g, *f.node, fused_where(g, f.conv, f.add, f.anchor), pg.values, ctx)
           .is_ok()) {
    return false;
  }
  mark_replaced(pg, f);
  return true;
}

}  // namespace tern
