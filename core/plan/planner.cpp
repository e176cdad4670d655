#include "core/plan/planner.h"

#include <algorithm>

#include "core/opt/optimizer.h"
#include "core/plan/layout.h"
#include "core/plan/memory.h"
#include "core/plan/partition.h"
#include "core/plan/plan_template.h"
#include "core/plan/schedule.h"
#include "core/plan/shapes.h"
#include "core/plan/static_prefix.h"

namespace tern {

ShapeInputs PlannerContext::shape_inputs(const std::vector<Shape>& shapes,
                                         const std::vector<DType>& dtypes,
                                         const FlagValues& flags) const {
  ShapeInputs in;
  in.graph = graph;
  in.order = order;
  in.inputs = inputs;
  in.shapes = shapes;
  in.dtypes = dtypes;
  in.backends = planning_backends.empty() ? backends : planning_backends;
  in.flags = &flags;
  in.weights = weights;
  in.subgraphs = subgraphs;
  in.labels = &labels;
  return in;
}

namespace {

// One attempt at a full plan; pg.plain_only holds the nodes to plan on plain data.
Expected<std::shared_ptr<const Plan>> build_plan_once(
    const PlannerContext& pc, const std::vector<Shape>& shapes, const std::vector<DType>& dtypes,
    const FlagValues& flags, std::shared_ptr<PlanTemplate>* keep, PlanGraph& pg) {
  auto plan = std::make_shared<Plan>();
  const ShapeInputs in = pc.shape_inputs(shapes, dtypes, flags);
  bool planned = true;
  ShapeMemo memo;
  TERN_RETURN_IF_ERROR(infer_plan_shapes(in, &pg, &planned, &plan->dynamic_reason, &memo));
  if (!planned) {
    plan->dynamic = true;
    // The nodes that plan statically all the same run first as a plan of their own; where that
    // cannot be made, the whole graph runs node by node (which reports any real error).
    if (pc.prefixes) {
      auto prefix = pc.prefixes->find_or_make(in, pc.subgraphs);
      if (prefix) plan->prefix = std::move(*prefix);
    }
    return std::shared_ptr<const Plan>(std::move(plan));
  }
  optimize_plan_graph(pg, *pc.attention, [&](const OpContext& ctx) {
    PlanStep probe;
    return choose_kernel(ctx, pc.backends, &probe).is_ok();
  });
  choose_layouts(pg, pc.backends);
  TERN_RETURN_IF_ERROR(partition(pg, pc.backends, pc.inputs->size(), pc.weights, plan.get()));
  if (keep) {
    *keep = PlanTemplate::capture(pg, std::move(memo), plan.get());
  } else {
    plan->nodes_owner = std::make_shared<std::vector<std::unique_ptr<Node>>>(std::move(pg.nodes));
  }
  estimate_schedule(plan.get());
  TERN_RETURN_IF_ERROR(plan_arenas(pc.graph->outputs, plan.get()));
  return std::shared_ptr<const Plan>(std::move(plan));
}

}  // namespace

Expected<std::shared_ptr<const Plan>> build_plan(const PlannerContext& pc,
                                                 const std::vector<Shape>& shapes,
                                                 const std::vector<DType>& dtypes,
                                                 const FlagValues& flags,
                                                 std::shared_ptr<PlanTemplate>* keep) {
  // A layout is a preference, never a reason to fail: where a node's kernels decline its
  // blocked data (a shape or attribute the blocked kernel lacks), that node is planned on plain
  // data (reorders before it, a plain output) and the plan is made again. Each attempt demotes
  // one more node, so this ends.
  std::vector<bool> plain_only;
  for (;;) {
    PlanGraph pg;
    pg.plain_only = plain_only;
    auto plan = build_plan_once(pc, shapes, dtypes, flags, keep, pg);
    if (plan || pg.declined_blocked < 0 ||
        pg.is_plain_only(static_cast<size_t>(pg.declined_blocked))) {
      return plan;
    }
    plain_only.resize(std::max(plain_only.size(), static_cast<size_t>(pg.declined_blocked) + 1));
    plain_only[static_cast<size_t>(pg.declined_blocked)] = true;
  }
}

Expected<std::shared_ptr<const Plan>> Planner::plan(const std::vector<Shape>& shapes,
                                                    const std::vector<DType>& dtypes,
                                                    const FlagValues& flags,
                                                    const std::vector<int64_t>& flag_key) {
  // The shape class: the plan-affecting flags, the inputs' dtypes and ranks.
  std::vector<int64_t> cls = flag_key;
  for (size_t i = 0; i < shapes.size(); ++i) {
    cls.push_back(static_cast<int64_t>(dtypes[i]));
    cls.push_back(static_cast<int64_t>(shapes[i].size()));
  }
  std::vector<std::shared_ptr<PlanTemplate>> candidates;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = templates_.find(cls);
    if (it != templates_.end()) candidates = it->second;
  }
  for (const auto& t : candidates) {
    TERN_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> p,
                          t->instantiate(pc_, shapes, dtypes, flags));
    if (p) {
      std::lock_guard<std::mutex> lock(mu_);
      ++template_plans_;
      // The template that fitted is tried first next time (shapes tend to repeat their class).
      auto& list = templates_[cls];
      auto at = std::find(list.begin(), list.end(), t);
      if (at != list.end()) std::rotate(list.begin(), at, at + 1);
      return p;
    }
  }
  std::shared_ptr<PlanTemplate> made;
  TERN_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> p,
                        build_plan(pc_, shapes, dtypes, flags, &made));
  std::lock_guard<std::mutex> lock(mu_);
  ++full_plans_;
  if (made) {
    auto& list = templates_[cls];
    list.insert(list.begin(), std::move(made));
    if (list.size() > kTemplatesPerClass) list.pop_back();
  }
  return p;
}

size_t Planner::full_plans() const {
  std::lock_guard<std::mutex> lock(mu_);
  return full_plans_;
}

size_t Planner::template_plans() const {
  std::lock_guard<std::mutex> lock(mu_);
  return template_plans_;
}

}  // namespace tern
