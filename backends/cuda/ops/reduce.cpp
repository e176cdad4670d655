// Row-wise ops on CUDA: Reduce* over one contiguous run of dims, global pooling, Softmax /
// LogSoftmax and LayerNormalization.
#include "ops/reduce.h"
#include "backends/cuda/ops/cuda_ops.h"
#include "core/kernel_registry.h"
#include "ops/common/device_ops.h"
#include "ops/softmax.h"

namespace tern::cuda {

namespace {

struct ReduceParams {
  ReduceOp op;
  int64_t outer, r, inner;
};

Status run_reduce(const ReduceParams& q, const KernelArgs& a, const ExecContext&) {
  return launched(reduce(q.op, a.inputs[0]->data<float>(), a.outputs[0]->data<float>(), q.outer,
                         q.r, q.inner, stream()),
                  "reduce");
}

Expected<std::unique_ptr<Kernel>> make_reduce(const OpContext& ctx) {
  static const std::pair<const char*, ReduceOp> kOps[] = {
      {"ReduceSum", ReduceOp::kSum},
      {"ReduceMean", ReduceOp::kMean},
      {"ReduceMax", ReduceOp::kMax},
      {"ReduceMin", ReduceOp::kMin},
      {"ReduceProd", ReduceOp::kProd},
      {"ReduceSumSquare", ReduceOp::kSumSquare},
      {"ReduceL1", ReduceOp::kL1},
      {"ReduceL2", ReduceOp::kL2},
      {"ReduceLogSumExp", ReduceOp::kLogSumExp}};
  ReduceParams p{};
  bool found = false;
  for (const auto& [name, op] : kOps) {
    if (ctx.node->op_type == name) {
      p.op = op;
      found = true;
    }
  }
  if (!found || ctx.inputs[0].dtype != DType::kFloat32) {
    return unsupported(ctx.where, ": the CUDA reductions take float32");
  }
  TERN_ASSIGN_OR_RETURN(ops::ReduceSpec spec, ops::reduce_spec(ctx));
  TERN_ASSIGN_OR_RETURN(ops::ReduceRows rows, ops::reduce_rows(ctx.inputs[0].shape, spec));
  p.outer = rows.outer;
  p.r = rows.r;
  p.inner = rows.inner;
  if (spec.identity) p.op = ReduceOp::kSum;  // r is 1: a copy
  return make_kernel("cuda_reduce", p, run_reduce);
}

Expected<std::unique_ptr<Kernel>> make_global_pool(const OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  if (ctx.inputs[0].dtype != DType::kFloat32 || x.size() < 3) {
    return unsupported(ctx.where, ": CUDA global pooling takes float32 [N, C, ...]");
  }
  ReduceParams p{ctx.node->op_type == "GlobalMaxPool" ? ReduceOp::kMax : ReduceOp::kMean,
                 x[0] * x[1], 1, 1};
  for (size_t d = 2; d < x.size(); ++d) p.r *= x[d];
  return make_kernel("cuda_global_pool", p, run_reduce);
}

struct SoftmaxParams {
  Elem t;
  ops::SoftmaxSpan span;
  bool log;
};

Expected<std::unique_ptr<Kernel>> make_softmax(const OpContext& ctx) {
  const DType t = ctx.inputs[0].dtype;
  if (t != DType::kFloat32 && t != DType::kFloat16) {
    return unsupported(ctx.where, ": CUDA softmax takes float32 and float16");
  }
  SoftmaxParams p{};
  TERN_ASSIGN_OR_RETURN(p.t, elem_for(ctx, t, "softmax"));
  TERN_ASSIGN_OR_RETURN(p.span, ops::parse_softmax_span(ctx));
  p.log = ctx.node->op_type == "LogSoftmax";
  return make_elementwise_kernel(
      "cuda_softmax", p, [](const SoftmaxParams& q, const KernelArgs& a, const ExecContext&) {
        return launched(softmax(q.t, a.inputs[0]->raw(), a.outputs[0]->raw(), q.span.outer,
                                q.span.axis_len, q.span.inner, q.log, stream()),
                        "softmax");
      });
}

struct LayerNormParams {
  int64_t rows, n;
  float eps;
  bool bias;
};

Expected<std::unique_ptr<Kernel>> make_layer_norm(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::LayerNormSpan s, ops::layer_norm_span(ctx));
  const LayerNormParams p{s.rows, s.n, s.eps, s.bias};
  return make_kernel(
      "cuda_layer_norm", p, [](const LayerNormParams& q, const KernelArgs& a, const ExecContext&) {
        return launched(layer_norm(a.inputs[0]->data<float>(), a.inputs[1]->data<float>(),
                                   q.bias ? a.inputs[2]->data<float>() : nullptr,
                                   a.outputs[0]->data<float>(), q.rows, q.n, q.eps, stream()),
                        "layer_norm");
      });
}

}  // namespace

}  // namespace tern::cuda

namespace tern {

void register_cuda_reduce(KernelRegistry& r) {
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                         "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSumExp"}) {
    r.add(op, "cuda", DType::kFloat32, cuda::make_reduce);
  }
  r.add("GlobalAveragePool", "cuda", DType::kFloat32, cuda::make_global_pool);
  r.add("GlobalMaxPool", "cuda", DType::kFloat32, cuda::make_global_pool);
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    r.add(op, "cuda", DType::kUndefined, cuda::make_softmax);
  }
  r.add("LayerNormalization", "cuda", DType::kFloat32, cuda::make_layer_norm);
}

}  // namespace tern
