// The planner's layout stage: convolutions run fastest on the layout their backend asks for
// (Backend::conv_layout: channel blocks of the vector width, or channels-last), so a chain of
// them, with the element-wise ops and pools between, keeps it; the partition stage inserts a
// ReorderToPlain step before any consumer that needs plain data. Which ops read and write which
// layouts is the backend's answer (Backend::layout_role), never this file's.
#pragma once

#include <vector>

#include "core/plan_graph.h"

namespace tern {

// Sets PlannedValue::block of the values that should be blocked. Layouts are planned only when
// every backend of the session is a host one (device kernels read plain tensors).
void choose_layouts(PlanGraph& pg, const std::vector<Backend*>& backends);

// Whether the step computing `node` on `backend` is made with its blocked inputs as they are
// (the backend's kernel reads them, or its output is blocked); otherwise its inputs get plain
// copies first.
bool reads_blocked(const Backend& backend, const Node& node, int output_block);

}  // namespace tern
