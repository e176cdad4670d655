// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (reduction none / sum / mean, optional
// class weights, ignore_index; SCE's optional second output is the log-probabilities).
// Computed in double.
#include <cmath>
#include <optional>

#include "ops/common/op_utils.h"

namespace tern {
namespace {

enum class Reduction { kNone, kSum, kMean };

struct LossParams {
  bool softmax;
  DType dtype;
  Reduction reduction;
  std::optional<int64_t> ignore;
  int64_t n, c, d;  // input [n, c, d...] flattened to [n, c, d]
};

Expected<LossParams> loss_params(const OpContext& ctx, bool softmax) {
  const Shape& x = ctx.inputs[0].shape;
  const Shape& t = ctx.inputs[1].shape;
  if (x.size() < 2 || t.size() != x.size() - 1 || t[0] != x[0] ||
      !std::equal(t.begin() + 1, t.end(), x.begin() + 2)) {
    return invalid_model(ctx.where, ": input ", shape_str(x), " and target ", shape_str(t),
                         " do not fit [N, C, d...] and [N, d...]");
  }
  if (!ops::visit_any_float(ctx.inputs[0].dtype, [](auto) {})) {
    return ops::dtype_error(ctx, 0, "float types");
  }
  if (ctx.inputs[1].dtype != DType::kInt32 && ctx.inputs[1].dtype != DType::kInt64) {
    return ops::dtype_error(ctx, 1, "int32, int64");
  }
  LossParams p{softmax, ctx.inputs[0].dtype, Reduction::kMean, std::nullopt, x[0], x[1], 1};
  for (size_t i = 2; i < x.size(); ++i) p.d *= x[i];
  TERN_ASSIGN_OR_RETURN(std::string red, ctx.attrs().get_string("reduction", "mean"));
  if (red == "none") {
    p.reduction = Reduction::kNone;
  } else if (red == "sum") {
    p.reduction = Reduction::kSum;
  } else if (red != "mean") {
    return invalid_model(ctx.where, ": reduction must be none, sum or mean, got '", red, "'");
  }
  if (const Attribute* ig = ctx.attrs().find("ignore_index")) p.ignore = ig->i;
  if (ctx.has_input(2) && ctx.inputs[2].shape != Shape{p.c}) {
    return invalid_model(ctx.where, ": weight must have shape [C]");
  }
  return p;
}

Status infer_loss(OpContext& ctx) {
  const bool softmax = ctx.node->op_type == "SoftmaxCrossEntropyLoss";
  TERN_ASSIGN_OR_RETURN(LossParams p, loss_params(ctx, softmax));
  ctx.set_output(0, ctx.inputs[0].dtype,
                 p.reduction == Reduction::kNone ? ctx.inputs[1].shape : Shape{});
  if (ctx.outputs.size() > 1) ctx.set_output(1, ctx.inputs[0].dtype, ctx.inputs[0].shape);
  return Status::ok();
}

Status run_loss(const LossParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& x = *a.inputs[0];
  const Tensor& t = *a.inputs[1];
  const Tensor* w = a.inputs.size() > 2 ? a.inputs[2] : nullptr;
  std::vector<double> logp(static_cast<size_t>(x.numel()));
  ops::visit_any_float(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) logp[static_cast<size_t>(i)] = ops::as_double(px[i]);
  });
  if (p.softmax) {  // log-softmax over C
    for (int64_t n = 0; n < p.n; ++n) {
      for (int64_t d = 0; d < p.d; ++d) {
        double mx = -INFINITY, sum = 0;
        for (int64_t c = 0; c < p.c; ++c) mx = std::max(mx, logp[static_cast<size_t>((n * p.c + c) * p.d + d)]);
        for (int64_t c = 0; c < p.c; ++c) sum += std::exp(logp[static_cast<size_t>((n * p.c + c) * p.d + d)] - mx);
        const double lse = mx + std::log(sum);
        for (int64_t c = 0; c < p.c; ++c) logp[static_cast<size_t>((n * p.c + c) * p.d + d)] -= lse;
      }
    }
  }
  std::vector<double> loss(static_cast<size_t>(p.n * p.d));
  double total = 0, weight_sum = 0;
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t d = 0; d < p.d; ++d) {
      const int64_t k = t.int_at(n * p.d + d);
      double l = 0, wk = 0;
      if (!(p.ignore && k == *p.ignore)) {
        if (k < 0 || k >= p.c) {
          return invalid_argument("target ", k, " is outside [0, ", p.c, ")");
        }
        wk = w ? w->float_at(k) : 1.0;
        l = -logp[static_cast<size_t>((n * p.c + k) * p.d + d)] * wk;
      }
      loss[static_cast<size_t>(n * p.d + d)] = l;
      total += l;
      weight_sum += wk;
    }
  }
  ops::visit_any_float(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* y = a.outputs[0]->data<T>();
    if (p.reduction == Reduction::kNone) {
      for (size_t i = 0; i < loss.size(); ++i) y[i] = ops::from_double<T>(loss[i]);
    } else if (p.reduction == Reduction::kSum) {
      y[0] = ops::from_double<T>(total);
    } else {
      y[0] = ops::from_double<T>(weight_sum == 0 ? 0.0 : total / weight_sum);
    }
    if (a.outputs.size() > 1 && a.outputs[1]) {
      T* lp = a.outputs[1]->data<T>();
      for (size_t i = 0; i < logp.size(); ++i) lp[i] = ops::from_double<T>(logp[i]);
    }
  });
  return Status::ok();
}

template <bool kSoftmax>
Expected<std::unique_ptr<Kernel>> make_loss(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(LossParams p, loss_params(ctx, kSoftmax));
  return make_kernel("reference", p, run_loss);
}

}  // namespace

TERN_REGISTRATION void register_op_loss(OpRegistry& r) {
  r.add({"NegativeLogLikelihoodLoss",
         2,
         3,
         1,
         1,
         infer_loss,
         make_loss<false>,
         {},
         attrs("ignore_index, reduction")});
  r.add({"SoftmaxCrossEntropyLoss",
         2,
         3,
         1,
         2,
         infer_loss,
         make_loss<true>,
         {},
         attrs("ignore_index, reduction")});
}

}  // namespace tern
