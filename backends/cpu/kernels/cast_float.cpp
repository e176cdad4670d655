// Cast between float32 and float16 / bfloat16 on the CPU: the rows of widened_kernel.h (F16C,
// AVX-512F or NEON conversions for float16; shifts and AVX-512 BF16's VCVTNEPS2BF16 for
// bfloat16, through VecOps), on the session's threads. The Casts at the ends of a half model meant
// for float32 callers run here; every other pair keeps the portable kernel.
#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/widened_kernel.h"
#include "core/kernel_registry.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

struct CastFloat {
  DType from, to;
  const VecOps* vec;
};

bool is_half(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16;
}

Status run_cast_float(const CastFloat& p, const KernelArgs& a, const ExecContext& exec) {
  const int64_t n = a.inputs[0]->numel();
  if (p.from == DType::kFloat32) {
    narrow_from_f32(*p.vec, p.to, a.inputs[0]->data<float>(), a.outputs[0]->raw(), n,
                    exec.num_threads);
  } else {
    widen_to_f32(*p.vec, p.from, a.inputs[0]->raw(), a.outputs[0]->data<float>(), n,
                 exec.num_threads);
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_cast_float(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  const DType from = ctx.inputs[0].dtype, to = ctx.outputs[0].dtype;
  if (!((from == DType::kFloat32 && is_half(to)) || (is_half(from) && to == DType::kFloat32))) {
    return unsupported("cast_float: float32 <-> float16/bfloat16 only");
  }
  const VecOps* v = &vec_ops(effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability)));
  return make_kernel(str_cat("cast.", v->isa), CastFloat{from, to, v}, run_cast_float);
}

}  // namespace

TERN_REGISTRATION void register_cpu_cast_float(KernelRegistry& r) {
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    r.add("Cast", "cpu", t, make_cast_float);
    r.add("CastLike", "cpu", t, make_cast_float);
  }
}

}  // namespace tern
