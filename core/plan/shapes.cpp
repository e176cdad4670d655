#include "core/plan/shapes.h"

#include <algorithm>

namespace tern {

Status infer_plan_shapes(const ShapeInputs& in, PlanGraph* pg, bool* planned,
                         std::string* dynamic_reason) {
  const Graph& g = *in.graph;
  pg->graph = &g;
  pg->order = in.order;
  pg->flags = in.flags;
  pg->values.assign(g.values.size(), PlannedValue{});
  pg->ctxs.clear();
  pg->ctxs.resize(g.nodes.size());
  pg->removed.assign(g.nodes.size(), false);
  *planned = true;
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (g.values[v].constant) pg->values[v] = PlannedValue::of_constant(&*g.values[v].constant);
  }
  for (size_t i = 0; i < in.inputs->size(); ++i) {
    PlannedValue& pv = pg->values[static_cast<size_t>((*in.inputs)[i].value)];
    pv = PlannedValue{};
    pv.where = PlannedValue::Where::kInput;
    pv.dtype = in.dtypes[i];
    pv.shape = in.shapes[i];
    pv.input_index = i;
  }
  for (size_t n : *in.order) {
    auto ctx = std::make_unique<OpContext>();
    ctx->flags = in.flags;
    const Node& node = g.nodes[n];
    Status st = make_node_context(g, node, g.describe_node(n), pg->values, ctx.get());
    if (!st.is_ok() && ctx->needs_values) {
      *planned = false;
      *dynamic_reason = st.message();
      return Status::ok();
    }
    TERN_RETURN_IF_ERROR(st);
    const bool all_known = std::all_of(ctx->inputs.begin(), ctx->inputs.end(),
                                       [](const TensorInfo& t) { return !t.present || t.value; });
    const bool from_shapes = std::all_of(ctx->output_values.begin(), ctx->output_values.end(),
                                         [](const auto& v) { return v.has_value(); });
    if (all_known || from_shapes) {
      // Shape math: computed now, constant during runs.
      std::vector<Tensor> outs;
      if (from_shapes) {
        for (auto& v : ctx->output_values) outs.push_back(std::move(*v));
      } else {
        TERN_RETURN_IF_ERROR(evaluate_node(*ctx, in.backends, *in.flags, &outs));
      }
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        const int id = node.outputs[i];
        if (id < 0) continue;
        pg->known.push_back(std::make_unique<Tensor>(std::move(outs[i])));
        pg->value(id) = PlannedValue::of_constant(pg->known.back().get());
      }
      continue;
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      const int id = node.outputs[i];
      if (id < 0) continue;
      if (ctx->outputs[i].dtype == DType::kString) {  // std::string objects never live in arenas
        *planned = false;
        *dynamic_reason = ctx->where + " computes strings";
        return Status::ok();
      }
      PlannedValue& pv = pg->value(id);
      pv = PlannedValue{};
      pv.where = PlannedValue::Where::kArena;
      pv.dtype = ctx->outputs[i].dtype;
      pv.shape = ctx->outputs[i].shape;
    }
    pg->ctxs[n] = std::move(ctx);
  }
  for (int id : g.outputs) {
    PlannedValue& pv = pg->value(id);
    if (pv.where == PlannedValue::Where::kArena) pv.where = PlannedValue::Where::kOutput;
  }
  return Status::ok();
}

}  // namespace tern
