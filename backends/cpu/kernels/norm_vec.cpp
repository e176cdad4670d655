// Float32 InstanceNormalization and GroupNormalization on Tern's vectorised primitives: one task
// per (image, group) computes the group's mean and variance (VecOps::moments, 16 lanes) and
// writes each channel as one fused multiply-add (VecOps::affine). Rows of the reference kernel's
// double-precision loop cost 10x more (U-Net's and wav2vec's normalisations).
#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/vec/vec.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "ops/common/op_utils.h"
#include "ops/norm.h"

namespace tern {
namespace {

struct VecGroupNorm {
  const VecOps* vec = nullptr;
  ops::GroupNormParams p;
};

Status run_group_norm(const VecGroupNorm& k, const KernelArgs& a, const ExecContext& exec) {
  const ops::GroupNormParams& p = k.p;
  const float* x = a.inputs[0]->data<float>();
  const float* scale = a.inputs[1]->data<float>();
  const float* bias = a.inputs[2]->data<float>();
  float* y = a.outputs[0]->data<float>();
  const int64_t cpg = p.c / p.groups, len = cpg * p.spatial;
  parallel_for(p.n * p.groups, std::max<int64_t>(1, 16384 / std::max<int64_t>(len, 1)),
               exec.num_threads, [&](int64_t b, int64_t e) {
                 for (int64_t task = b; task < e; ++task) {
                   const int64_t g = task % p.groups;
                   const float* xg = x + task * len;
                   float* yg = y + task * len;
                   float mean = 0, inv = 0;
                   k.vec->moments(xg, len, static_cast<float>(p.eps), &mean, &inv);
                   for (int64_t c = 0; c < cpg; ++c) {
                     const int64_t s = p.per_group_scale ? g : g * cpg + c;
                     const float mul = scale[s] * inv;
                     k.vec->affine(xg + c * p.spatial, mul, bias[s] - mean * mul,
                                   yg + c * p.spatial, p.spatial);
                   }
                 }
               });
  return Status::ok();
}

template <bool kInstance>
Expected<std::unique_ptr<Kernel>> make_group_norm(const OpContext& ctx) {
  for (size_t i = 0; i < 3; ++i) {
    if (ctx.inputs[i].dtype != DType::kFloat32) return ops::dtype_error(ctx, i, "float32");
  }
  VecGroupNorm k{&vec_ops(effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability))), {}};
  TERN_ASSIGN_OR_RETURN(k.p, ops::parse_group_norm(ctx, kInstance));
  if (k.p.spatial == 0 || k.p.n == 0) return unsupported("an empty input (the reference runs it)");
  return make_kernel(str_cat(kInstance ? "instance_norm." : "group_norm.", k.vec->isa), k,
                     run_group_norm);
}

}  // namespace

void register_cpu_norm_vec(KernelRegistry& r) {
  r.add("InstanceNormalization", "cpu", DType::kFloat32, make_group_norm<true>, /*priority=*/1);
  r.add("GroupNormalization", "cpu", DType::kFloat32, make_group_norm<false>, /*priority=*/1);
}

}  // namespace tern
