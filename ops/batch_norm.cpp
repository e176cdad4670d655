// BatchNormalization in inference mode: y = scale * (x - mean) / sqrt(var + epsilon) + bias, per
// channel (dim 1). Training mode (extra outputs) is not supported.
#include <cmath>

#include "ops/common/channel_affine.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

struct BatchNormParams {
  float epsilon;
  int64_t n, c, inner;
  // Channel-blocked (nChw8c / nChw16c) or channels-last (block == c) input and output: the
  // planner gives BatchNormalization its input's layout (LayoutRole::kKeepsBlock on the CPU).
  int64_t block = 0;
};

Status infer_bn(OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  if (ctx.inputs[0].dtype != DType::kFloat32) return ops::dtype_error(ctx, 0, "float32");
  if (x.size() < 2) return invalid_argument("input '", ctx.input_names[0], "' must have rank >= 2");
  TERN_ASSIGN_OR_RETURN(int64_t spatial, ctx.attrs().get_int("spatial", 1));
  if (spatial != 1) {
    return unsupported("spatial=", spatial,
                       " (opset 7-8: statistics per element, not per channel)");
  }
  TERN_ASSIGN_OR_RETURN(int64_t training, ctx.attrs().get_int("training_mode", 0));
  if (training != 0) return unsupported("training_mode=", training);
  for (size_t i = 1; i < 5; ++i) {
    if (ctx.inputs[i].dtype != DType::kFloat32 || ctx.inputs[i].shape != Shape{x[1]}) {
      return invalid_argument("input '", ctx.input_names[i], "' must be float32 [", x[1], "], got ",
                              dtype_name(ctx.inputs[i].dtype), " ", shape_str(ctx.inputs[i].shape));
    }
  }
  for (size_t i = 1; i < ctx.outputs.size(); ++i) {
    if (ctx.outputs[i].present) return unsupported("training-mode outputs are not supported");
    ctx.set_output(i, DType::kFloat32, {x[1]});
  }
  ctx.set_output(0, DType::kFloat32, x);
  return Status::ok();
}

// y = x * k + shift with one (k, shift) per channel; the scratch holds k then shift.
void affine_of(const BatchNormParams& p, const KernelArgs& a, float* k, float* shift) {
  const float* scale = a.inputs[1]->data<float>();
  const float* bias = a.inputs[2]->data<float>();
  const float* mean = a.inputs[3]->data<float>();
  const float* var = a.inputs[4]->data<float>();
  for (int64_t ch = 0; ch < p.c; ++ch) {
    k[ch] = scale[ch] / std::sqrt(var[ch] + p.epsilon);
    shift[ch] = bias[ch] - mean[ch] * k[ch];
  }
}

Status run_bn(const BatchNormParams& p, const KernelArgs& a, const ExecContext& exec) {
  float* k = static_cast<float*>(a.workspace);
  float* shift = k + p.c;
  affine_of(p, a, k, shift);
  ops::channel_affine(a.inputs[0]->data<float>(), a.outputs[0]->data<float>(), k, shift, p.n, p.c,
                      p.inner, p.block, exec.num_threads);
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_bn(const OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  BatchNormParams p{};
  TERN_ASSIGN_OR_RETURN(p.epsilon, ctx.attrs().get_float("epsilon", 1e-5f));
  p.n = x[0];
  p.c = x[1];
  p.inner = 1;
  for (size_t i = 2; i < x.size(); ++i) p.inner *= x[i];
  const int blk = ctx.outputs[0].block;
  if (blk > 0 || ctx.inputs[0].block > 0) {
    if (ctx.inputs[0].block != blk || x.size() != 4 || p.c % blk != 0) {
      return unsupported("input layout (block ", ctx.inputs[0].block,
                         ") differs from the output's (", blk,
                         ") or is not whole channel blocks of a rank-4 tensor");
    }
    p.block = blk;
  }
  const size_t scratch = 2 * static_cast<size_t>(p.c) * sizeof(float);
  // One multiply-add per element, vectorised; the output may overwrite the input.
  return std::unique_ptr<Kernel>(
      std::make_unique<FunctionKernel<BatchNormParams, decltype(&run_bn)>>(
          p.block > 0 ? "batch_norm_blocked" : "batch_norm", p, &run_bn, scratch, 0));
}

}  // namespace

void register_op_batch_norm(OpRegistry& r) {
  r.add({"BatchNormalization",
         5,
         5,
         1,
         5,
         infer_bn,
         make_bn,
         {},
         attrs({"epsilon", "spatial", "training_mode"},
               {{"momentum", "updates the running statistics in training only"}})});
}

}  // namespace tern
