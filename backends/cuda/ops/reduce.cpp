// Row-wise ops on CUDA: Reduce* over any set of dims (one contiguous run directly, others after
// a copy that moves the reduced dims last), global pooling, Softmax / LogSoftmax and
// LayerNormalization.
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
  bool gather = false;  // the input is first copied to the workspace as [kept dims, reduced dims]
  Strided order;
};

Status run_reduce(const ReduceParams& q, const KernelArgs& a, const ExecContext&) {
  const float* x = a.inputs[0]->data<float>();
  if (q.gather) {
    TERN_RETURN_IF_ERROR(
        launched(strided_copy(4, x, a.workspace, q.order, stream()), "strided_copy"));
    x = static_cast<const float*>(a.workspace);
  }
  return launched(reduce(q.op, x, a.outputs[0]->data<float>(), q.outer, q.r, q.inner, stream()),
                  "reduce");
}

// The input's dims reordered kept first, reduced last (each group in its order), as a strided
// copy: the reduction is then over rows of r. Dims of 1 count as kept.
Expected<Strided> reduced_last(const Shape& x, const ops::ReduceSpec& spec, ReduceParams* p) {
  const Shape st = contiguous_strides(x);
  Shape shape, strides;
  p->outer = p->r = p->inner = 1;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t d = 0; d < x.size(); ++d) {
      const bool reduced = spec.reduced[d] && x[d] != 1;
      if (reduced != (pass == 1)) continue;
      shape.push_back(x[d]);
      strides.push_back(st[d]);
      (pass == 0 ? p->outer : p->r) *= x[d];
    }
  }
  return make_strided(shape, strides, 0);
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
  if (spec.identity) p.op = ReduceOp::kSum;  // r is 1: a copy
  const Shape& x = ctx.inputs[0].shape;
  Expected<ops::ReduceRows> rows = ops::reduce_rows(x, spec);
  if (rows.has_value()) {
    p.outer = rows->outer;
    p.r = rows->r;
    p.inner = rows->inner;
    return make_kernel("cuda_reduce", p, run_reduce);
  }
  TERN_ASSIGN_OR_RETURN(p.order, reduced_last(x, spec, &p));
  p.gather = true;
  return make_kernel("cuda_reduce", p, run_reduce, static_cast<size_t>(p.outer * p.r) * 4);
}

Expected<std::unique_ptr<Kernel>> make_global_pool(const OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  if (ctx.inputs[0].dtype != DType::kFloat32 || x.size() < 3) {
    return unsupported(ctx.where, ": CUDA global pooling takes float32 [N, C, ...]");
  }
  ReduceParams p{};
  p.op = ctx.node->op_type == "GlobalMaxPool" ? ReduceOp::kMax : ReduceOp::kMean;
  p.outer = x[0] * x[1];
  p.r = p.inner = 1;
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
