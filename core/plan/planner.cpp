#include "core/plan/planner.h"

#include "core/opt/optimizer.h"
#include "core/plan/layout.h"
#include "core/plan/memory.h"
#include "core/plan/partition.h"
#include "core/plan/schedule.h"
#include "core/plan/shapes.h"

namespace tern {

Expected<std::shared_ptr<const Plan>> build_plan(const PlannerContext& pc,
                                                 const std::vector<Shape>& shapes,
                                                 const std::vector<DType>& dtypes,
                                                 const FlagValues& flags) {
  auto plan = std::make_shared<Plan>();
  PlanGraph pg;
  ShapeInputs in;
  in.graph = pc.graph;
  in.order = pc.order;
  in.inputs = pc.inputs;
  in.shapes = shapes;
  in.dtypes = dtypes;
  in.backends = pc.backends;
  in.flags = &flags;
  bool planned = true;
  TERN_RETURN_IF_ERROR(infer_plan_shapes(in, &pg, &planned, &plan->dynamic_reason));
  if (!planned) {
    plan->dynamic = true;
    return std::shared_ptr<const Plan>(std::move(plan));
  }
  optimize_plan_graph(pg, *pc.attention, [&](const OpContext& ctx) {
    PlanStep probe;
    return choose_kernel(ctx, pc.backends, &probe).is_ok();
  });
  choose_layouts(pg, pc.backends);
  TERN_RETURN_IF_ERROR(partition(pg, pc.backends, pc.inputs->size(), pc.weights, plan.get()));
  estimate_schedule(plan.get());
  TERN_RETURN_IF_ERROR(plan_arenas(pc.graph->outputs, plan.get()));
  return std::shared_ptr<const Plan>(std::move(plan));
}

}  // namespace tern
