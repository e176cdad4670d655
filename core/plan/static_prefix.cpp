#include "core/plan/static_prefix.h"

#include <algorithm>

namespace tern {

namespace {

// Outputs up to this size are computed while finding the static nodes when their inputs are
// known (shape arithmetic), as the planner does, so that a Reshape by a computed shape stays
// static.
constexpr int64_t kMaxComputedBytes = int64_t{64} << 10;

bool tensors_only(const std::vector<TensorInfo>& list) {
  return std::none_of(list.begin(), list.end(), [](const TensorInfo& t) {
    return t.present && (dtype_is_composite(t.dtype) || t.dtype == DType::kString);
  });
}

}  // namespace

Expected<std::vector<bool>> static_nodes(const ShapeInputs& in) {
  const Graph& g = *in.graph;
  std::vector<PlannedValue> values(g.values.size());
  std::vector<bool> known(g.values.size(), false);
  std::vector<std::unique_ptr<Tensor>> made;  // values computed here
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (g.values[v].constant) {
      values[v] = PlannedValue::of_constant(&*g.values[v].constant);
      known[v] = true;
    }
  }
  for (size_t i = 0; i < in.inputs->size(); ++i) {
    if (dtype_is_composite(in.dtypes[i])) continue;
    const auto id = static_cast<size_t>((*in.inputs)[i].value);
    values[id].where = PlannedValue::Where::kInput;
    values[id].dtype = in.dtypes[i];
    values[id].shape = in.shapes[i];
    values[id].input_index = i;
    known[id] = true;
  }
  std::vector<bool> result(g.nodes.size(), false);
  for (size_t n : *in.order) {
    const Node& node = g.nodes[n];
    if (!std::all_of(node.inputs.begin(), node.inputs.end(),
                     [&](int id) { return id < 0 || known[static_cast<size_t>(id)]; })) {
      continue;
    }
    OpContext ctx;
    ctx.flags = in.flags;
    ctx.weights = in.weights;
    ctx.subgraphs = in.subgraphs;
    const Status st = make_node_context(g, node, g.describe_node(n), values, &ctx);
    // A node that needs run-time data, or that a run may reject, is left to the dynamic run.
    if (!st.is_ok() || ctx.outputs_from_run || !tensors_only(ctx.outputs)) continue;
    const bool from_shapes = !ctx.output_values.empty() &&
                             std::all_of(ctx.output_values.begin(), ctx.output_values.end(),
                                         [](const auto& v) { return v.has_value(); });
    const bool all_known = std::all_of(ctx.inputs.begin(), ctx.inputs.end(),
                                       [](const TensorInfo& t) { return !t.present || t.value; });
    std::vector<Tensor> outs;
    if (from_shapes) {
      for (auto& v : ctx.output_values) outs.push_back(std::move(*v));
    } else if (all_known && outputs_fit(ctx, kMaxComputedBytes)) {
      if (!evaluate_node(ctx, in.backends, *in.flags, &outs).is_ok()) continue;
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      const int id = node.outputs[i];
      if (id < 0) continue;
      PlannedValue& pv = values[static_cast<size_t>(id)];
      if (!outs.empty()) {
        made.push_back(std::make_unique<Tensor>(std::move(outs[i])));
        pv = PlannedValue::of_constant(made.back().get());
      } else {
        pv = PlannedValue{};
        pv.where = PlannedValue::Where::kArena;
        pv.dtype = ctx.outputs[i].dtype;
        pv.shape = ctx.outputs[i].shape;
      }
      known[static_cast<size_t>(id)] = true;
    }
    result[n] = true;
  }
  return result;
}

Expected<std::shared_ptr<const StaticPrefix>> StaticPrefixes::find_or_make(
    const ShapeInputs& in, SubgraphCompiler* compiler) {
  if (!compiler) return std::shared_ptr<const StaticPrefix>();
  TERN_ASSIGN_OR_RETURN(std::vector<bool> is_static, static_nodes(in));
  const Graph& g = *in.graph;
  // Worth a plan of its own only where it holds a node with real work (not shape arithmetic
  // alone, which the dynamic run computes as cheaply).
  size_t count = 0;
  for (size_t n = 0; n < g.nodes.size(); ++n) count += is_static[n] ? 1 : 0;
  if (count < 2) return std::shared_ptr<const StaticPrefix>();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = made_.find(is_static);
  if (it != made_.end()) return it->second;

  auto prefix = std::make_shared<StaticPrefix>();
  prefix->node_static = is_static;
  Graph pg;
  pg.values = g.values;
  pg.opset = g.opset;
  std::vector<bool> produced(g.values.size(), false), read_outside(g.values.size(), false),
      read_inside(g.values.size(), false);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    for (int id : node.inputs) {
      if (id >= 0) (is_static[n] ? read_inside : read_outside)[static_cast<size_t>(id)] = true;
    }
    if (!is_static[n]) continue;
    pg.nodes.push_back(node);
    for (int id : node.outputs) {
      if (id >= 0) produced[static_cast<size_t>(id)] = true;
    }
  }
  for (int id : g.outputs) read_outside[static_cast<size_t>(id)] = true;
  for (size_t i = 0; i < in.inputs->size(); ++i) {
    const int id = (*in.inputs)[i].value;
    if (read_inside[static_cast<size_t>(id)]) {
      pg.inputs.push_back(id);
      prefix->inputs.push_back(i);
    }
  }
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (produced[v] && read_outside[v]) {
      pg.outputs.push_back(static_cast<int>(v));
      prefix->outputs.push_back(static_cast<int>(v));
    }
  }
  if (pg.outputs.empty()) return std::shared_ptr<const StaticPrefix>();
  prefix->graph = std::make_shared<const Graph>(std::move(pg));
  std::vector<TensorInfo> infos;
  for (size_t i : prefix->inputs) {
    TensorInfo t;
    t.present = true;
    t.dtype = in.dtypes[i];
    t.shape = in.shapes[i];
    infos.push_back(std::move(t));
  }
  TERN_ASSIGN_OR_RETURN(prefix->runner, compiler->compile(*prefix->graph, infos, *in.flags));
  made_.emplace(std::move(is_static), prefix);
  return std::shared_ptr<const StaticPrefix>(prefix);
}

}  // namespace tern
