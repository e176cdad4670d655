// The residual pass (shape-aware): Add(Conv(..), Z) of equal shapes becomes FusedConv with Z as
// its residual input, and the element-wise steps after the sum (each its predecessor's only
// reader) join the convolution's epilogue. The convolution then writes the block's output in one
// pass instead of three.
#pragma once

#include "core/plan_graph.h"

namespace tern {

// Rewrites `pg` (the fused node replaces the context of the chain's last node; the convolution,
// the Add and the folded steps before the last are marked removed). Returns how many it fused.
size_t fuse_residual_adds(PlanGraph& pg);

// For a plan of other shapes that keeps an earlier plan's residual fusion `f`: whether its shape
// conditions still hold; when they do, fills ctx (f.node's context) and marks the replaced nodes
// and values in pg as fuse_residual_adds does.
bool refit_residual(PlanGraph& pg, const FusionRecord& f, OpContext* ctx);

}  // namespace tern
