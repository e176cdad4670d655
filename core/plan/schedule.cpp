#include "core/plan/schedule.h"

#include <algorithm>
#include <map>

namespace tern {

namespace {

// Rough work of a step in nanoseconds on one core, for the executor's choice only: convolutions
// and matrix products by their multiply-adds (~150 GFLOP/s, what one AVX-512 core's kernels
// reach), everything else by the elements it reads and writes (~0.25 ns each). Both scales
// matter against the fixed cost of handing a step to another thread: at 30 GFLOP/s and 1 ns,
// SqueezeNet's and a small attention model's branches looked worth running side by side at one
// intra-op thread, and ran 14% and 60% slower that way.
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
    return 2.0 * out * per_out / 150.0;
  }
  if ((op == "MatMul" || op == "Gemm") && shape(0) && !shape(0)->empty()) {
    return 2.0 * out * static_cast<double>(shape(0)->back()) / 150.0;
  }
  return 0.25 * (in + out);
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
  plan->step_cost.assign(n, 0.0);
  for (size_t s = 0; s < n; ++s) {
    double before = 0.0;
    for (int p : plan->steps[s].preds) {
      level[s] = std::max(level[s], level[static_cast<size_t>(p)] + 1);
      before = std::max(before, chain[static_cast<size_t>(p)]);
    }
    const double c = estimate_step_cost(*plan, plan->steps[s]);
    plan->step_cost[s] = c;
    chain[s] = before + c;
    plan->total_cost += c;
    plan->critical_cost = std::max(plan->critical_cost, chain[s]);
  }
  std::map<int, int> per_level;
  for (int l : level) plan->width = std::max(plan->width, ++per_level[l]);
}

namespace {

// A step of single-core cost c on p intra-op threads: split p ways at ~85% efficiency plus a
// parallel region's start and join, unless one thread is quicker (kernels keep small work on one).
double on_threads(double c, int p) {
  constexpr double kEfficiency = 0.85, kRegionNs = 3000;
  return p <= 1 ? c : std::min(c, c / (p * kEfficiency) + kRegionNs);
}

}  // namespace

ScheduleEstimate estimate_schedule_time(const Plan& plan, int threads, int interop) {
  ScheduleEstimate e;
  const size_t n = plan.steps.size();
  for (size_t s = 0; s < n && s < plan.step_cost.size(); ++s) {
    e.sequential_ns += on_threads(plan.step_cost[s], threads);
  }
  const int workers = std::max(1, std::min(interop, plan.width));
  if (workers <= 1) {
    e.concurrent_ns = e.sequential_ns;
    return e;
  }
  // Each node gets threads / workers intra-op threads; the run takes at least the longest chain
  // and at least the work spread over the workers, plus a hand-off per step.
  const int per_node = std::max(1, threads / workers);
  std::vector<double> chain(n, 0.0);
  double total = 0, critical = 0;
  for (size_t s = 0; s < n && s < plan.step_cost.size(); ++s) {
    double before = 0.0;
    for (int p : plan.steps[s].preds) before = std::max(before, chain[static_cast<size_t>(p)]);
    const double c = on_threads(plan.step_cost[s], per_node);
    chain[s] = before + c;
    total += c;
    critical = std::max(critical, chain[s]);
  }
  constexpr double kHandoffNs = 5000;
  e.concurrent_ns = std::max(critical, total / workers) + kHandoffNs * static_cast<double>(n);
  return e;
}

}  // namespace tern
