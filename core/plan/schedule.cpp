#include "core/plan/schedule.h"

#include <algorithm>
#include <map>

namespace tern {

namespace {

// Rough work of a step in nanoseconds on one core, for the executor's choice only: convolutions
// and matrix products by their multiply-adds (~30 GFLOP/s), everything else by the elements it
// reads and writes (~1 ns each).
double estimate_step_cost(const Plan& plan, const PlanStep& step) {
  auto elems = [&](int v) {
    return v < 0 ? 0.0 : static_cast<double>(numel(plan.values[static_cast<size_t>(v)].shape));
  };
  auto shape = [&](size_t i) -> const Shape* {
    if (i >= step.inputs.size() || step.inputs[i] < 0) return nullptr;
    return &plan.values[static_cast<size_t>(step.inputs[i])].shape;
  };
  double out = 0.0, in = 0.0;
  for (int v : step.outputs) out += elems(v);
  for (int v : step.inputs) in += elems(v);
  const std::string& op = step.op_node->op_type;
  const Shape* w = shape(1);
  if ((op == "Conv" || op == "FusedConv" || op == "ConvTranspose") && w && w->size() >= 3) {
    double per_out = 1.0;  // weight elements per output channel: C/group x kernel
    for (size_t d = 1; d < w->size(); ++d) per_out *= static_cast<double>((*w)[d]);
    return 2.0 * out * per_out / 30.0;
  }
  if ((op == "MatMul" || op == "Gemm") && shape(0) && !shape(0)->empty()) {
    return 2.0 * out * static_cast<double>(shape(0)->back()) / 30.0;
  }
  return in + out;
}

}  // namespace

StepSets step_ancestors(const Plan& plan) {
  const size_t n = plan.steps.size();
  StepSets anc(n);
  for (size_t s = 0; s < n; ++s) {
    for (int p : plan.steps[s].preds) {
      anc.merge(s, static_cast<size_t>(p));
      anc.add(s, static_cast<size_t>(p));
    }
  }
  return anc;
}

void estimate_schedule(Plan* plan) {
  const size_t n = plan->steps.size();
  std::vector<int> level(n, 0);
  std::vector<double> chain(n, 0.0);
  plan->width = 1;
  plan->total_cost = plan->critical_cost = 0;
  for (size_t s = 0; s < n; ++s) {
    double before = 0.0;
    for (int p : plan->steps[s].preds) {
      level[s] = std::max(level[s], level[static_cast<size_t>(p)] + 1);
      before = std::max(before, chain[static_cast<size_t>(p)]);
    }
    const double c = estimate_step_cost(*plan, plan->steps[s]);
    chain[s] = before + c;
    plan->total_cost += c;
    plan->critical_cost = std::max(plan->critical_cost, chain[s]);
  }
  std::map<int, int> per_level;
  for (int l : level) plan->width = std::max(plan->width, ++per_level[l]);
}

}  // namespace tern
