// BatchNormalization in inference mode: y = scale * (x - mean) / sqrt(var + epsilon) + bias, per
// channel (dim 1). Training mode (extra outputs) is not supported.
#include <cmath>

#include "core/parallel.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

struct BatchNormParams {
  float epsilon;
  int64_t n, c, inner;
};

Status infer_bn(OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  if (ctx.inputs[0].dtype != DType::kFloat32) return ops::dtype_error(ctx, 0, "float32");
  if (x.size() < 2) return invalid_argument("input '", ctx.input_names[0], "' must have rank >= 2");
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

Status run_bn(const BatchNormParams& p, const KernelArgs& a, const ExecContext& exec) {
  const float* x = a.inputs[0]->data<float>();
  const float* scale = a.inputs[1]->data<float>();
  const float* bias = a.inputs[2]->data<float>();
  const float* mean = a.inputs[3]->data<float>();
  const float* var = a.inputs[4]->data<float>();
  float* y = a.outputs[0]->data<float>();
  parallel_for(p.n * p.c, std::max<int64_t>(1, 16384 / std::max<int64_t>(p.inner, 1)),
               exec.num_threads, [&](int64_t b, int64_t e) {
                 for (int64_t plane = b; plane < e; ++plane) {
                   const int64_t ch = plane % p.c;
                   const float k = scale[ch] / std::sqrt(var[ch] + p.epsilon);
                   const float shift = bias[ch] - mean[ch] * k;
                   const float* xp = x + plane * p.inner;
                   float* yp = y + plane * p.inner;
                   for (int64_t i = 0; i < p.inner; ++i) yp[i] = xp[i] * k + shift;
                 }
               });
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
  return make_kernel("batch_norm", p, run_bn);  // one multiply-add per element, vectorised
}

}  // namespace

void register_op_batch_norm(OpRegistry& r) {
  r.add({"BatchNormalization", 5, 5, 1, 5, infer_bn, make_bn, {}});
}

}  // namespace tern
