// BatchNormalization: y = scale * (x - mean) / sqrt(var + epsilon) + bias, per channel (dim 1).
// Inference mode takes mean and var from the inputs. Training mode (opset 14+, training_mode 1)
// normalises with the batch's own statistics (mean and population variance over every axis but
// 1, in double) and outputs the updated running statistics,
// input * momentum + batch * (1 - momentum); opset 9's five-output training form is refused.
// FusedBatchNormalization (Tern-internal, made by core/opt/norm_activation_fusion.cpp for CPU
// sessions, one output): the same with "activations" ["Relu"] (and "activation_params" empty, as
// FusedConv's epilogue attributes have it), applied as the output is written.
#include <cmath>
#include <string>
#include <vector>

#include "ops/common/channel_affine.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

struct BatchNormParams {
  float epsilon;
  float momentum = 0.9f;
  bool training = false;
  int64_t n, c, inner;
  // Channel-blocked (nChw8c / nChw16c) or channels-last (block == c) input and output: the
  // planner gives BatchNormalization its input's layout (LayoutRole::kKeepsBlock on the CPU).
  int64_t block = 0;
  bool relu = false;  // FusedBatchNormalization's
};

// FusedBatchNormalization's activation: one Relu (activations ["Relu"], no parameters).
Status parse_activation(const OpContext& ctx, BatchNormParams* p) {
  const Attribute* acts = ctx.attrs().find("activations");
  const Attribute* params = ctx.attrs().find("activation_params");  // (none for Relu)
  p->relu = acts && acts->strings.size() == 1 && acts->strings[0] == "Relu" &&
            (!params || params->floats.empty());
  if (!p->relu) return invalid_model("FusedBatchNormalization: activations is not [\"Relu\"]");
  return Status::ok();
}

Status infer_bn(OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  if (ctx.inputs[0].dtype != DType::kFloat32) return ops::dtype_error(ctx, 0, "float32");
  if (x.size() < 2) return invalid_argument("input '", ctx.input_names[0], "' must have rank >= 2");
  TERN_ASSIGN_OR_RETURN(int64_t spatial, ctx.attrs().get_int("spatial", 1));
  if (spatial != 1) {
    return unsupported("spatial=", spatial,
                       " (opset 7-8: statistics per element, not per channel)");
  }
  for (size_t i = 1; i < 5; ++i) {
    if (ctx.inputs[i].dtype != DType::kFloat32 || ctx.inputs[i].shape != Shape{x[1]}) {
      return invalid_argument("input '", ctx.input_names[i], "' must be float32 [", x[1], "], got ",
                              dtype_name(ctx.inputs[i].dtype), " ", shape_str(ctx.inputs[i].shape));
    }
  }
  TERN_ASSIGN_OR_RETURN(int64_t training, ctx.attrs().get_int("training_mode", 0));
  for (size_t i = 1; i < ctx.outputs.size(); ++i) {
    if (ctx.outputs[i].present && (training == 0 || ctx.opset < 14 || i > 2)) {
      return unsupported("running-statistics outputs outside training_mode 1 (opset 14+)");
    }
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
                      p.inner, p.block, exec.num_threads, p.relu);
  return Status::ok();
}

// Training mode: the batch's mean and variance per channel first (scratch: mean, then var), then
// the same per-channel affine as inference.
Status run_bn_training(const BatchNormParams& p, const KernelArgs& a, const ExecContext& exec) {
  float* k = static_cast<float*>(a.workspace);
  float* shift = k + p.c;
  const float* x = a.inputs[0]->data<float>();
  const float* scale = a.inputs[1]->data<float>();
  const float* bias = a.inputs[2]->data<float>();
  const float* in_mean = a.inputs[3]->data<float>();
  const float* in_var = a.inputs[4]->data<float>();
  float* out_mean = a.outputs.size() > 1 && a.outputs[1] ? a.outputs[1]->data<float>() : nullptr;
  float* out_var = a.outputs.size() > 2 && a.outputs[2] ? a.outputs[2]->data<float>() : nullptr;
  const double count = static_cast<double>(p.n * p.inner);
  for (int64_t ch = 0; ch < p.c; ++ch) {
    double sum = 0.0, sq = 0.0;
    for (int64_t b = 0; b < p.n; ++b) {
      const float* row = x + (b * p.c + ch) * p.inner;
      for (int64_t i = 0; i < p.inner; ++i) sum += row[i];
    }
    const double mean = count > 0 ? sum / count : 0.0;
    for (int64_t b = 0; b < p.n; ++b) {
      const float* row = x + (b * p.c + ch) * p.inner;
      for (int64_t i = 0; i < p.inner; ++i) sq += (row[i] - mean) * (row[i] - mean);
    }
    const double var = count > 0 ? sq / count : 0.0;
    const double kk = scale[ch] / std::sqrt(var + p.epsilon);
    k[ch] = static_cast<float>(kk);
    shift[ch] = static_cast<float>(bias[ch] - mean * kk);
    const double keep = p.momentum;
    if (out_mean) out_mean[ch] = static_cast<float>(in_mean[ch] * keep + mean * (1.0 - keep));
    if (out_var) out_var[ch] = static_cast<float>(in_var[ch] * keep + var * (1.0 - keep));
  }
  ops::channel_affine(x, a.outputs[0]->data<float>(), k, shift, p.n, p.c, p.inner, 0,
                      exec.num_threads, p.relu);
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
  TERN_ASSIGN_OR_RETURN(int64_t training, ctx.attrs().get_int("training_mode", 0));
  TERN_ASSIGN_OR_RETURN(p.momentum, ctx.attrs().get_float("momentum", 0.9f));
  p.training = training != 0 && ctx.opset >= 14;
  if (ctx.node->op_type == "FusedBatchNormalization") {
    TERN_RETURN_IF_ERROR(parse_activation(ctx, &p));
  }
  const size_t scratch = 2 * static_cast<size_t>(p.c) * sizeof(float);
  if (p.training) {
    TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
    return std::unique_ptr<Kernel>(
        std::make_unique<FunctionKernel>("batch_norm_training", p, &run_bn_training, scratch, 0));
  }
  const int blk = ctx.outputs[0].block;
  if (blk > 0 || ctx.inputs[0].block > 0) {
    if (ctx.inputs[0].block != blk || x.size() != 4 || p.c % blk != 0) {
      return unsupported("input layout (block ", ctx.inputs[0].block,
                         ") differs from the output's (", blk,
                         ") or is not whole channel blocks of a rank-4 tensor");
    }
    p.block = blk;
  }
  // One multiply-add per element, vectorised; the output may overwrite the input.
  return std::unique_ptr<Kernel>(std::make_unique<FunctionKernel>(
      p.block > 0 ? "batch_norm_blocked" : "batch_norm", p, &run_bn, scratch, 0));
}

}  // namespace

TERN_REGISTRATION void register_op_batch_norm(OpRegistry& r) {
  r.add({"BatchNormalization",
         5,
         5,
         1,
         5,
         infer_bn,
         make_bn,
         {},
         attrs("epsilon, momentum, spatial, training_mode")});
  r.add({"FusedBatchNormalization",
         5,
         5,
         1,
         1,
         infer_bn,
         make_bn,
         {},
         attrs("epsilon, momentum, spatial, training_mode, activations, activation_params")});
}

}  // namespace tern
