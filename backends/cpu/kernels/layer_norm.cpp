// Float32 LayerNormalization over the last axes with a contiguous scale and bias (the form BERT-
// style encoders use, and what the optimizer's fusion of the decomposed pattern produces): one
// vectorised pass per row for the mean, one for the variance, one to normalise (VecOps). Other
// forms (broadcast scale, the Mean / InvStdDev outputs) run on the reference kernel.
#include <cmath>

#include "backends/cpu/cpu_capability.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "ops/common/op_utils.h"

namespace tern {

namespace {

struct LnF32 {
  int64_t rows = 0, len = 0;
  float eps = 1e-5f;
  bool has_bias = false;
  const VecOps* vec = nullptr;
};

Status run_ln_f32(const LnF32& k, const KernelArgs& a, const ExecContext& exec) {
  const float* x = a.inputs[0]->data<float>();
  const float* scale = a.inputs[1]->data<float>();
  const float* bias = k.has_bias ? a.inputs[2]->data<float>() : nullptr;
  float* y = a.outputs[0]->data<float>();
  const int64_t len = k.len;
  parallel_for(k.rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(len, 1)), exec.num_threads,
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   k.vec->layer_norm(x + r * len, scale, bias, k.eps, y + r * len, len);
                 }
               });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_ln_f32(const OpContext& ctx) {
  if (ctx.inputs[0].dtype != DType::kFloat32) return ops::dtype_error(ctx, 0, "float32");
  for (size_t o = 1; o < ctx.outputs.size(); ++o) {
    if (ctx.outputs[o].present) return unsupported("LayerNormalization f32: Mean/InvStdDev wanted");
  }
  const Shape& x = ctx.inputs[0].shape;
  TERN_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", -1));
  TERN_ASSIGN_OR_RETURN(axis, ops::normalize_axis(axis, static_cast<int64_t>(x.size())));
  LnF32 k;
  k.rows = numel(Shape(x.begin(), x.begin() + axis));
  k.len = numel(Shape(x.begin() + axis, x.end()));
  TERN_ASSIGN_OR_RETURN(k.eps, ctx.attrs().get_float("epsilon", 1e-5f));
  k.has_bias = ctx.has_input(2);
  // Scale (and bias) must hold one value per normalised element, in order.
  for (size_t i = 1; i < (k.has_bias ? 3u : 2u); ++i) {
    const TensorInfo& t = ctx.inputs[i];
    if (t.dtype != DType::kFloat32 || numel(t.shape) != k.len ||
        (t.shape.size() > 0 && t.shape.back() != x.back())) {
      return unsupported("LayerNormalization f32: input ", i, " is not one value per element");
    }
  }
  if (k.len == 0) return unsupported("LayerNormalization f32: empty rows");
  k.vec = &vec_ops(effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability)));
  // (Each row is read whole before it is written.)
  return make_elementwise_kernel(str_cat("layer_norm.", k.vec->isa), k, run_ln_f32);
}

}  // namespace

TERN_REGISTRATION void register_cpu_layer_norm(KernelRegistry& r) {
  r.add("LayerNormalization", "cpu", DType::kFloat32, make_ln_f32, /*priority=*/1);
}

}  // namespace tern
