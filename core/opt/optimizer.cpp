#include "core/opt/optimizer.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "core/opt/graph_util.h"
#include "core/opt/residual_fusion.h"
#include "core/progress.h"

namespace tern {

Status optimize_graph(Graph& g, OptimizerReport* report) {
  // One progress step per pass (core/progress.h).
  using Pass = Status (*)(Graph&, OptimizerReport*);
  static constexpr Pass kPasses[] = {
      fuse_qdq_conv,
      fuse_qdq_matmul,
      fuse_qdq_add,
      fold_qdq_moves,
      fold_pads,
      bypass_identities,
      fold_batch_norm_into_conv,
      fuse_hardswish,
      fuse_swish,
      fuse_layer_norm,
      fuse_group_norm,
      fuse_gelu,
      fuse_matmul_epilogue,
      fuse_conv_activation,
      split_key_transposes,
      remove_dead_nodes,
  };
  constexpr size_t kCount = std::size(kPasses);
  for (size_t i = 0; i < kCount; ++i) {
    report_progress("optimize", i, kCount);
    TERN_RETURN_IF_ERROR(kPasses[i](g, report));
  }
  report_progress("optimize", kCount, kCount);
  return Status::ok();
}

Status optimize_graph(Graph& g, const std::vector<Backend*>& backends, const FlagValues& flags,
                      OptimizerReport* report) {
  // QDQ first: constant folding would turn the weights' DequantizeLinear into float weights. The
  // DequantizeLinears the fusion left unread go before folding, which would otherwise compute
  // (and keep) float32 copies of every int8 weight.
  TERN_RETURN_IF_ERROR(fuse_qdq_conv(g, report));
  TERN_RETURN_IF_ERROR(fuse_qdq_matmul(g, report));
  TERN_RETURN_IF_ERROR(fuse_qdq_add(g, report));
  TERN_RETURN_IF_ERROR(fold_qdq_moves(g, report));
  TERN_RETURN_IF_ERROR(remove_dead_nodes(g, report));
  TERN_RETURN_IF_ERROR(fold_constants(g, backends, flags, report));
  const bool cpu_only = std::all_of(backends.begin(), backends.end(), [](const Backend* b) {
    return std::string(b->name()) == "cpu";
  });
  if (cpu_only && flags.on(FlagId::kCpuFloat16InFloat32)) {
    TERN_RETURN_IF_ERROR(widen_float16(g, report));
  }
  TERN_RETURN_IF_ERROR(optimize_graph(g, report));
  return cpu_only ? fuse_batch_norm_activation(g, report) : Status::ok();
}

void optimize_plan_graph(PlanGraph& pg, const std::vector<AttentionMatch>& attention,
                         const std::function<bool(const OpContext&)>& runnable) {
  if (!pg.flags->on(FlagId::kGraphOptimize)) return;  // the graph as imported
  // (A selective build makes no node of an op it left out.)
  if (pg.flags->on(FlagId::kMhaFastpath) && op_built(OptOp::kAttention)) {
    fuse_attention(pg, attention, runnable);
  }
  if (op_built(OptOp::kFusedConv)) fuse_residual_adds(pg);
}

}  // namespace tern
