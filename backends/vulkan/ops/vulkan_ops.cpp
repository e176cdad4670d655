#include "backends/vulkan/ops/vulkan_ops.h"

namespace tern::vk {

Status chain_add(const OpContext& ctx, Chain* c, uint32_t code, float a, float b) {
  if (c->steps == 3) return unsupported(ctx.where, ": more than three activations on Vulkan");
  c->acts |= code << (8 * c->steps);
  c->ap[2 * c->steps] = a;
  c->ap[2 * c->steps + 1] = b;
  ++c->steps;
  return Status::ok();
}

Expected<Chain> chain_of(const OpContext& ctx, const std::vector<ops::FusedStep>& steps) {
  Chain c;
  for (const ops::FusedStep& s : steps) {
    auto param = [&](size_t i) { return i < s.params.size() ? s.params[i] : 0.0f; };
    uint32_t code = kNone;
    switch (s.act) {
      case ops::FusedAct::kRelu:
        code = kRelu;
        break;
      case ops::FusedAct::kLeakyRelu:
        code = kLeakyRelu;
        break;
      case ops::FusedAct::kClip:
        code = kClip;
        break;
      case ops::FusedAct::kSigmoid:
        code = kSigmoid;
        break;
      case ops::FusedAct::kHardSigmoid:
        code = kHardSigmoid;
        break;
      case ops::FusedAct::kHardSwish:
        code = kHardSwish;
        break;
      case ops::FusedAct::kTanh:
        code = kTanh;
        break;
      case ops::FusedAct::kAffine:
        code = kAffine;
        break;
      case ops::FusedAct::kSwish:
        code = kSwish;
        break;
    }
    TERN_RETURN_IF_ERROR(chain_add(ctx, &c, code, param(0), param(1)));
  }
  return c;
}

Expected<Context*> context() {
  return Context::get();
}

Expected<const Pipeline*> pipeline(const std::string& shader) {
  TERN_ASSIGN_OR_RETURN(Context * c, context());
  return c->pipeline(shader);
}

Expected<std::string> float_suffix(const OpContext& ctx, DType t, bool has_f16a) {
  if (t == DType::kFloat32) return std::string("f32");
  if (t != DType::kFloat16) {
    return unsupported(ctx.where, ": no Vulkan kernel for ", dtype_name(t));
  }
  if (!ctx.flag(FlagId::kVulkanAllowFp16)) {
    return unsupported(ctx.where, ": float16 on Vulkan is off (vulkan.allow_fp16=0)");
  }
  TERN_ASSIGN_OR_RETURN(Context * c, context());
  if (!c->info().fp16_storage) {
    return unsupported(ctx.where, ": ", c->info().name, " has no 16-bit storage buffers");
  }
  if (has_f16a && ctx.flag(FlagId::kVulkanFp16Arithmetic) && c->info().fp16_arithmetic) {
    return std::string("f16a");
  }
  return std::string("f16");
}

Status check_count(const OpContext& ctx, int64_t n) {
  if (n >= (int64_t{1} << 31)) {
    return unsupported(ctx.where, ": ", n, " elements pass the Vulkan shaders' 32-bit indices");
  }
  return Status::ok();
}

Status run_gemm(const Pipeline* p, const void* a, const void* b, const void* c, const void* z,
                void* y, const GemmPush& push, uint32_t batch) {
  TERN_ASSIGN_OR_RETURN(Context * ctx, context());
  constexpr uint32_t kTile = 64;
  return ctx->dispatch(*p, {a, b, c ? c : y, z ? z : y, y}, &push, sizeof(push),
                       (push.N + kTile - 1) / kTile, (push.M + kTile - 1) / kTile, batch);
}

Status check_gemm_size(const OpContext& ctx, int64_t M, int64_t N, int64_t batch) {
  constexpr int64_t kMaxGroups = 65535, kTile = 64;
  if ((M + kTile - 1) / kTile > kMaxGroups || (N + kTile - 1) / kTile > kMaxGroups ||
      batch > kMaxGroups) {
    return unsupported(ctx.where, ": a ", batch, " x ", M, " x ", N,
                       " GEMM needs more workgroups than a Vulkan dispatch may have");
  }
  return check_count(ctx, batch * M * N);
}

}  // namespace tern::vk
