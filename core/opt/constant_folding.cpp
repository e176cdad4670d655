// Nodes whose inputs are all constant are computed once, at session creation, and their outputs
// become constants (random ops excepted: they give new values every run).
#include <algorithm>

#include "core/node_context.h"
#include "core/opt/graph_util.h"
#include "core/opt/optimizer.h"
#include "core/progress.h"

namespace tern {

#if !defined(TERN_MINIMAL)
namespace {
// Constants of at most this many bytes are computed on one thread. A parallel region while the
// session is being made starts the creating thread's OpenMP team there, whose idle worker then
// spins through the rest of the creation beside it; and starting a worker costs a scheduler tick
// (about 4 ms) on this project's 2-vCPU machines. swin_small's optimized .tern folds such small
// constants at every load.
constexpr int64_t kParallelFoldBytes = int64_t{1} << 22;
}  // namespace
#endif

Status fold_constants(Graph& g, const std::vector<Backend*>& backends, const FlagValues& flags,
                      OptimizerReport* report) {
  TERN_ASSIGN_OR_RETURN(std::vector<size_t> order, g.topological_order());
  std::vector<PlannedValue> values(g.values.size());
  auto mark_constant = [&](size_t v) {
    values[v] = PlannedValue::of_constant(&*g.values[v].constant);
  };
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (g.values[v].constant) mark_constant(v);
  }
  std::vector<bool> is_input(g.values.size(), false);
  for (int id : g.inputs) is_input[static_cast<size_t>(id)] = true;
  std::vector<bool> folded(g.nodes.size(), false);
#if !defined(TERN_MINIMAL)
  FlagValues one_thread = flags;
  one_thread.value[static_cast<size_t>(FlagId::kNumThreads)] = 1;
#endif
  size_t visited = 0;
  for (size_t n : order) {
    report_progress("fold constants", visited++, order.size());
    const Node& node = g.nodes[n];
    bool foldable =
        (!node.inputs.empty() || node.op_type == "Constant") && !random_op(node.op_type) &&
        std::none_of(node.outputs.begin(), node.outputs.end(),
                     [&](int id) { return id >= 0 && is_input[static_cast<size_t>(id)]; });
    for (int id : node.inputs) {
      if (id >= 0 && values[static_cast<size_t>(id)].where != PlannedValue::Where::kConstant) {
        foldable = false;
      }
    }
    if (!foldable) continue;
    OpContext ctx;
    ctx.flags = &flags;
    TERN_RETURN_IF_ERROR(make_node_context(g, node, g.describe_node(n), values, &ctx));
    std::vector<Tensor> outs;
#if !defined(TERN_MINIMAL)
    if (!ctx.outputs_from_run && outputs_fit(ctx, kParallelFoldBytes)) {
      ctx.flags = &one_thread;
      TERN_RETURN_IF_ERROR(evaluate_node(ctx, backends, one_thread, &outs));
    } else {
      TERN_RETURN_IF_ERROR(evaluate_node(ctx, backends, flags, &outs));
    }
#else
    TERN_RETURN_IF_ERROR(evaluate_node(ctx, backends, flags, &outs));
#endif
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      const int id = node.outputs[i];
      if (id < 0) continue;
      g.values[static_cast<size_t>(id)].constant = std::move(outs[i]);
      mark_constant(static_cast<size_t>(id));
    }
    folded[n] = true;
    ++report->constants_folded;
  }
  report_progress("fold constants", order.size(), order.size());
  erase_nodes(g, folded);
  return Status::ok();
}

}  // namespace tern
