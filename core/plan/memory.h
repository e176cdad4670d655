// The planner's memory stage: every arena value and every step's workspace becomes a buffer with
// a lifetime (its writer to its last reader); a step whose kernel allows it writes its output over
// an input only it reads; then the buffers get offsets in the run arena: the sequential layout
// reuses memory along the step order, the concurrent one (plans with independent branches) only
// where every schedule the inter-op threads may take allows it. Device values get a layout of
// their own in the device arena.
#pragma once

#include "core/plan/plan.h"

namespace tern {

// Fills plan->layouts, device_layout, in_place, arena_bytes, naive_bytes and
// packed_weight_bytes. `graph_outputs` are the graph's output value ids (device arena outputs
// live to the end of the run). Needs plan->width (estimate_schedule) for the concurrent layout.
Status plan_arenas(const std::vector<int>& graph_outputs, Plan* plan);

}  // namespace tern
