// Elementwise activations on float tensors: Relu, Sigmoid, HardSigmoid, HardSwish, Clip.
// Clip also takes integer tensors (opset 12).
#include <cmath>
#include <limits>

#include "core/parallel.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

enum class Act { kRelu, kSigmoid, kHardSigmoid, kHardSwish };

struct ActParams {
  Act act;
  DType dtype;
  float alpha = 0, beta = 0;
};

Status infer_same(OpContext& ctx) {
  ctx.set_output(0, ctx.inputs[0].dtype, ctx.inputs[0].shape);
  return Status::ok();
}

template <class T>
void apply(const ActParams& p, const T* x, T* y, int64_t n, int threads) {
  parallel_for(n, 16384, threads, [&](int64_t b, int64_t e) {
    switch (p.act) {
      case Act::kRelu:
        // (NaN stays NaN, as the vectorised kernel and the fused epilogues keep it.)
        for (int64_t i = b; i < e; ++i) y[i] = x[i] < T(0) ? T(0) : x[i];
        break;
      case Act::kSigmoid:
        for (int64_t i = b; i < e; ++i) y[i] = T(1) / (T(1) + std::exp(-x[i]));
        break;
      case Act::kHardSigmoid:
        for (int64_t i = b; i < e; ++i) {
          y[i] = std::min(T(1), std::max(T(0), T(p.alpha) * x[i] + T(p.beta)));
        }
        break;
      case Act::kHardSwish:
        for (int64_t i = b; i < e; ++i) {
          y[i] = x[i] * std::min(T(1), std::max(T(0), x[i] / T(6) + T(0.5)));
        }
        break;
    }
  });
}

Status run_act(const ActParams& p, const KernelArgs& a, const ExecContext& exec) {
  const Tensor& x = *a.inputs[0];
  ops::visit_float(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    apply<T>(p, x.data<T>(), a.outputs[0]->data<T>(), x.numel(), exec.num_threads);
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_act(const OpContext& ctx, Act act) {
  ActParams p{act, ctx.inputs[0].dtype};
  if (!ops::visit_float(p.dtype, [](auto) {})) return ops::dtype_error(ctx, 0, "float32, float64");
  if (act == Act::kHardSigmoid) {
    TERN_ASSIGN_OR_RETURN(p.alpha, ctx.attrs().get_float("alpha", 0.2f));
    TERN_ASSIGN_OR_RETURN(p.beta, ctx.attrs().get_float("beta", 0.5f));
  }
  return make_elementwise_kernel("reference", p, run_act);
}

template <Act A>
Expected<std::unique_ptr<Kernel>> make_act(const OpContext& ctx) {
  return make_act(ctx, A);
}

// Clip: bounds from attributes before opset 11, from optional scalar inputs since.
struct ClipParams {
  DType dtype;
  bool from_inputs;
  float attr_min, attr_max;
};

Status infer_clip(OpContext& ctx) {
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    TERN_RETURN_IF_ERROR(ops::require_same_dtype(ctx, 0, i));
    if (numel(ctx.inputs[i].shape) != 1) {
      return invalid_model("input '", ctx.input_names[i], "' must be a scalar, got shape ",
                           shape_str(ctx.inputs[i].shape));
    }
  }
  return infer_same(ctx);
}

Status run_clip(const ClipParams& p, const KernelArgs& a, const ExecContext& exec) {
  const Tensor& x = *a.inputs[0];
  ops::visit_numeric(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
    if (p.from_inputs) {
      if (a.inputs.size() > 1 && a.inputs[1]) lo = *a.inputs[1]->data<T>();
      if (a.inputs.size() > 2 && a.inputs[2]) hi = *a.inputs[2]->data<T>();
    } else {
      lo = static_cast<T>(p.attr_min);
      hi = static_cast<T>(p.attr_max);
    }
    const T* px = x.data<T>();
    T* py = a.outputs[0]->data<T>();
    parallel_for(x.numel(), 16384, exec.num_threads, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) py[i] = std::min(hi, std::max(lo, px[i]));
    });
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_clip(const OpContext& ctx) {
  ClipParams p{ctx.inputs[0].dtype, ctx.opset >= 11 || ctx.num_inputs() > 1, 0, 0};
  if (!ops::visit_numeric(p.dtype, [](auto) {})) {
    return ops::dtype_error(ctx, 0, "float32, float64 and the integer types");
  }
  TERN_ASSIGN_OR_RETURN(p.attr_min,
                        ctx.attrs().get_float("min", std::numeric_limits<float>::lowest()));
  TERN_ASSIGN_OR_RETURN(p.attr_max,
                        ctx.attrs().get_float("max", std::numeric_limits<float>::max()));
  return make_elementwise_kernel("reference", p, run_clip);
}

}  // namespace

TERN_REGISTRATION void register_op_activation(OpRegistry& r) {
  r.add({"Relu", 1, 1, 1, 1, infer_same, make_act<Act::kRelu>, {}, attrs({})});
  r.add({"Sigmoid", 1, 1, 1, 1, infer_same, make_act<Act::kSigmoid>, {}, attrs({})});
  r.add({"HardSigmoid",
         1,
         1,
         1,
         1,
         infer_same,
         make_act<Act::kHardSigmoid>,
         {},
         attrs("alpha, beta")});
  r.add({"HardSwish", 1, 1, 1, 1, infer_same, make_act<Act::kHardSwish>, {}, attrs({})});
  r.add({"Clip", 1, 3, 1, 1, infer_clip, make_clip, {}, attrs("max, min")});
}

}  // namespace tern
