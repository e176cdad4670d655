#include "core/opt/residual_fusion.h"

#include "core/opt/fused_activation.h"
#include "core/opt/graph_util.h"

namespace tern {

namespace {

bool is_conv(const std::string& op) {
  return op == "Conv" || op == "FusedConv";
}

}  // namespace

size_t fuse_residual_adds(PlanGraph& pg) {
  const Graph& g = *pg.graph;
  const auto consumers = value_consumers(g);
  const std::vector<int> producer = value_producers(g);
  size_t fused_count = 0;
  auto arena_only_for = [&](int id, size_t reader) {
    const auto& c = consumers[static_cast<size_t>(id)];
    return pg.value(id).where == PlannedValue::Where::kArena && c.size() == 1 && c[0] == reader;
  };
  auto live = [&](size_t n) { return pg.ctxs[n] && !pg.removed[n]; };
  for (size_t n : *pg.order) {
    if (!live(n)) continue;
    const Node& add = *pg.ctxs[n]->node;
    if (add.op_type != "Add" || add.inputs.size() != 2) continue;
    const Shape out = pg.ctxs[n]->outputs[0].shape;
    for (int side = 0; side < 2; ++side) {
      const int y = add.inputs[static_cast<size_t>(side)];
      const int z = add.inputs[static_cast<size_t>(1 - side)];
      const int c = y < 0 ? -1 : producer[static_cast<size_t>(y)];
      if (c < 0 || !live(static_cast<size_t>(c)) || y == z) continue;
      const Node& conv = *pg.ctxs[static_cast<size_t>(c)]->node;
      if (!is_conv(conv.op_type) || has_epilogue(conv) || conv.inputs.size() > 3 ||
          !arena_only_for(y, n)) {
        continue;
      }
      const PlannedValue& zv = pg.value(z);
      if (zv.shape != out || pg.value(y).shape != out || zv.dtype != DType::kFloat32 ||
          zv.where == PlannedValue::Where::kNone) {
        continue;
      }
      auto fused = std::make_unique<Node>(conv);
      fused->op_type = "FusedConv";
      fused->inputs.resize(3, -1);
      fused->inputs.push_back(z);
      fused->outputs = add.outputs;
      // The element-wise steps after the sum, each its predecessor's only reader, join the
      // epilogue; the last one's place in the order is the fused node's.
      std::vector<size_t> chain;  // the sum's node, then the steps folded after it
      chain.push_back(n);
      for (;;) {
        const int v = fused->outputs[0];
        const auto& readers = consumers[static_cast<size_t>(v)];
        if (readers.size() != 1 || !live(readers[0]) || !arena_only_for(v, readers[0])) break;
        const OpContext& rc = *pg.ctxs[readers[0]];
        auto act = activation_of(g, *rc.node);
        if (!act || rc.node->inputs[static_cast<size_t>(act->input)] != v ||
            rc.outputs[0].shape != out || rc.outputs[0].dtype != DType::kFloat32) {
          break;
        }
        append_fused_activation(*fused, *act);
        fused->outputs = rc.node->outputs;
        chain.push_back(readers[0]);
      }
      const size_t anchor = chain.back();
      auto ctx = std::make_unique<OpContext>();
      ctx->flags = pg.flags;
      const std::string where =
          str_cat("fused Conv+Add", anchor != n ? "+activation" : "", " of ",
                  g.describe_node(static_cast<size_t>(c)), " .. ", g.describe_node(anchor));
      if (!make_node_context(g, *fused, where, pg.values, ctx.get()).is_ok()) continue;
      pg.value(y).where = PlannedValue::Where::kNone;
      for (size_t i = 0; i + 1 < chain.size(); ++i) {
        pg.value(pg.ctxs[chain[i]]->node->outputs[0]).where = PlannedValue::Where::kNone;
        pg.removed[chain[i]] = true;
      }
      pg.removed[static_cast<size_t>(c)] = true;
      pg.ctxs[anchor] = std::move(ctx);
      pg.nodes.push_back(std::move(fused));
      ++fused_count;
      break;
    }
  }
  pg.fused_residuals += fused_count;
  return fused_count;
}

}  // namespace tern
