// Row-wise ops on Vulkan (one workgroup per row): Reduce* over one contiguous run of dims, global
// pooling, Softmax / LogSoftmax and LayerNormalization.
#include "ops/reduce.h"
#include "backends/vulkan/ops/vulkan_ops.h"
#include "core/kernel_registry.h"
#include "ops/common/device_ops.h"
#include "ops/softmax.h"

namespace tern::vk {

namespace {

// Shared by the reduce and softmax shaders: x as [outer, r, inner], and the op.
struct RowPush {
  uint32_t outer, r, inner, op, ox, oy;
};

struct RowParams {
  const Pipeline* pipe;
  RowPush push;
};

Status run_rows(const RowParams& q, const KernelArgs& a, const ExecContext&) {
  RowPush push = q.push;
  push.ox = off(a.inputs[0]);
  push.oy = off(a.outputs[0]);
  return run_1d(q.pipe, {a.inputs[0]->raw(), a.outputs[0]->raw()}, push,
                uint64_t{push.outer} * push.inner, 1);
}

Expected<std::unique_ptr<Kernel>> row_kernel(const OpContext& ctx, const char* shader, uint32_t op,
                                             int64_t outer, int64_t r, int64_t inner) {
  TERN_RETURN_IF_ERROR(check_count(ctx, outer * r * inner));
  RowParams p{};
  TERN_ASSIGN_OR_RETURN(p.pipe, pipeline(shader));
  p.push = {u32(outer), u32(r), u32(inner), op, 0, 0};
  return make_kernel("vulkan_rows", p, run_rows);
}

Expected<std::unique_ptr<Kernel>> make_reduce(const OpContext& ctx) {
  static const char* kOps[] = {"ReduceSum",    "ReduceMean",      "ReduceMax", "ReduceMin",
                               "ReduceProd",   "ReduceSumSquare", "ReduceL1",  "ReduceL2",
                               "ReduceLogSum", "ReduceLogSumExp"};
  uint32_t op = 10;
  for (uint32_t i = 0; i < 10; ++i) {
    if (ctx.node->op_type == kOps[i]) op = i;
  }
  if (op == 10 || ctx.inputs[0].dtype != DType::kFloat32) {
    return unsupported(ctx.where, ": the Vulkan reductions take float32");
  }
  TERN_ASSIGN_OR_RETURN(ops::ReduceSpec spec, ops::reduce_spec(ctx));
  TERN_ASSIGN_OR_RETURN(ops::ReduceRows rows, ops::reduce_rows(ctx.inputs[0].shape, spec));
  if (spec.identity) op = 0;  // r is 1: a copy
  return row_kernel(ctx, "reduce_f32", op, rows.outer, rows.r, rows.inner);
}

Expected<std::unique_ptr<Kernel>> make_global_pool(const OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  if (ctx.inputs[0].dtype != DType::kFloat32 || x.size() < 3) {
    return unsupported(ctx.where, ": Vulkan global pooling takes float32 [N, C, ...]");
  }
  int64_t r = 1;
  for (size_t d = 2; d < x.size(); ++d) r *= x[d];
  return row_kernel(ctx, "reduce_f32", ctx.node->op_type == "GlobalMaxPool" ? 2 : 1, x[0] * x[1], r,
                    1);
}

Expected<std::unique_ptr<Kernel>> make_softmax(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(std::string suffix, float_suffix(ctx, ctx.inputs[0].dtype));
  TERN_ASSIGN_OR_RETURN(ops::SoftmaxSpan s, ops::parse_softmax_span(ctx));
  TERN_ASSIGN_OR_RETURN(
      auto k, row_kernel(ctx, ("softmax_" + suffix).c_str(), ctx.node->op_type == "LogSoftmax",
                         s.outer, s.axis_len, s.inner));
  return k;
}

struct LayerNormPush {
  uint32_t rows, n, has_bias, ox, os, ob, oy;
  float eps;
};

struct LayerNormParams {
  const Pipeline* pipe;
  LayerNormPush push;
};

Expected<std::unique_ptr<Kernel>> make_layer_norm(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::LayerNormSpan s, ops::layer_norm_span(ctx));
  TERN_RETURN_IF_ERROR(check_count(ctx, s.rows * s.n));
  LayerNormParams p{};
  TERN_ASSIGN_OR_RETURN(p.pipe, pipeline("layernorm_f32"));
  p.push = {u32(s.rows), u32(s.n), s.bias ? 1u : 0u, 0, 0, 0, 0, s.eps};
  return make_kernel("vulkan_layer_norm", p,
                     [](const LayerNormParams& q, const KernelArgs& a, const ExecContext&) {
                       LayerNormPush push = q.push;
                       const Tensor* b = push.has_bias ? a.inputs[2] : nullptr;
                       push.ox = off(a.inputs[0]);
                       push.os = off(a.inputs[1]);
                       push.ob = b ? off(b) : 0;
                       push.oy = off(a.outputs[0]);
                       return run_1d(q.pipe,
                                     {a.inputs[0]->raw(), a.inputs[1]->raw(),
                                      b ? b->raw() : a.outputs[0]->raw(), a.outputs[0]->raw()},
                                     push, push.rows, 1);
                     });
}

}  // namespace

}  // namespace tern::vk

namespace tern {

void register_vulkan_reduce(KernelRegistry& r) {
  for (const char* op :
       {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare",
        "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"}) {
    r.add(op, "vulkan", DType::kFloat32, vk::make_reduce);
  }
  r.add("GlobalAveragePool", "vulkan", DType::kFloat32, vk::make_global_pool);
  r.add("GlobalMaxPool", "vulkan", DType::kFloat32, vk::make_global_pool);
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    r.add(op, "vulkan", DType::kUndefined, vk::make_softmax);
  }
  r.add("LayerNormalization", "vulkan", DType::kFloat32, vk::make_layer_norm);
}

}  // namespace tern
