// Dynamic execution (Plan::dynamic): shape inference and a kernel per node on the run's actual
// values, for graphs whose shapes depend on computed values or that compute strings.
#include <algorithm>

#include "core/exec/executor.h"

namespace tern {

Status Executor::run_dynamic(const std::vector<const Tensor*>& ordered,
                             const std::vector<int>& wanted, const FlagValues& flags,
                             std::vector<Tensor>* outputs) const {
  const Graph& g = graph_;
  std::vector<PlannedValue> values(g.values.size());
  std::vector<std::unique_ptr<Tensor>> held(g.values.size());  // computed during this run
  auto hold = [&](size_t id, Tensor t) {
    held[id] = std::make_unique<Tensor>(std::move(t));
    const Tensor* p = held[id].get();
    values[id] = PlannedValue::of_constant(p);
  };
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (g.values[v].constant) values[v] = PlannedValue::of_constant(&*g.values[v].constant);
  }
  for (size_t i = 0; i < inputs_.size(); ++i) {
    values[static_cast<size_t>(inputs_[i].value)] = PlannedValue::of_constant(ordered[i]);
  }
  // Readers left per value, so intermediate tensors are freed after their last use.
  std::vector<int> readers(g.values.size(), 0);
  for (size_t n : order_) {
    for (int id : g.nodes[n].inputs) {
      if (id >= 0) ++readers[static_cast<size_t>(id)];
    }
  }
  for (int id : g.outputs) readers[static_cast<size_t>(id)] += 1 << 20;  // never freed
  for (size_t n : order_) {
    OpContext ctx;
    ctx.flags = &flags;
    ctx.weights = weights_;
    ctx.subgraphs = subgraphs_;
    TERN_RETURN_IF_ERROR(make_node_context(g, g.nodes[n], g.describe_node(n), values, &ctx));
    const Node& node = g.nodes[n];
    std::vector<Tensor> outs;
    const bool from_shapes = std::all_of(ctx.output_values.begin(), ctx.output_values.end(),
                                         [](const auto& v) { return v.has_value(); });
    if (from_shapes && !ctx.output_values.empty()) {
      for (auto& v : ctx.output_values) outs.push_back(std::move(*v));
    } else {
      TERN_RETURN_IF_ERROR(evaluate_node(ctx, backends_, flags, &outs));
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (node.outputs[i] >= 0) hold(static_cast<size_t>(node.outputs[i]), std::move(outs[i]));
    }
    for (int id : node.inputs) {
      if (id >= 0 && --readers[static_cast<size_t>(id)] == 0 && held[static_cast<size_t>(id)]) {
        held[static_cast<size_t>(id)].reset();
        values[static_cast<size_t>(id)] = PlannedValue{};
      }
    }
  }
  std::vector<Tensor> result;
  for (int id : wanted) {
    const PlannedValue& pv = values[static_cast<size_t>(id)];
    if (!pv.constant) return internal_error("output '", g.value_name(id), "' was not computed");
    TERN_ASSIGN_OR_RETURN(Tensor copy, pv.constant->clone());
    result.push_back(std::move(copy));
  }
  *outputs = std::move(result);
  return Status::ok();
}

}  // namespace tern
