// Helpers of the Vulkan kernel factories (backends/vulkan/ops/*.cpp): the device, pipelines,
// shader variants per dtype and flags, activation chains and dispatch.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "backends/vulkan/vk_context.h"
#include "core/kernel.h"
#include "ops/common/op_utils.h"
#include "ops/fused_conv.h"

namespace tern::vk {

// Activation codes of shaders/act.glsl.
enum Act : uint32_t {
  kNone = 0,
  kRelu,
  kLeakyRelu,
  kClip,
  kSigmoid,
  kHardSigmoid,
  kHardSwish,
  kTanh,
  kAffine,
  kGelu,
  kErf,
  kSqrt,
  kExp,
  kLog,
  kNeg,
  kAbs,
  kReciprocal,
  kSoftplus,
  kElu,
  kCeil,
  kFloor,
  kRound,
  kSin,
  kCos,
  kSign,
  kSelu,
  kMish,
  kSwish,  // x * sigmoid(a x)
};

// Up to three activation steps as the shaders take them: 8 bits per code, two floats each.
struct Chain {
  uint32_t acts = 0;
  float ap[6] = {0, 0, 0, 0, 0, 0};
  int steps = 0;
};
Status chain_add(const OpContext& ctx, Chain* c, uint32_t code, float a = 0, float b = 0);
// A FusedConv epilogue as a chain (UNSUPPORTED past three steps).
Expected<Chain> chain_of(const OpContext& ctx, const std::vector<ops::FusedStep>& steps);

// The device, or BACKEND_UNAVAILABLE.
Expected<Context*> context();
// The pipeline of a shader variant, created now so that a kernel never fails to find it.
Expected<const Pipeline*> pipeline(const std::string& shader);
// The variant suffix for float tensors of dtype `t` under the plan's flags: "f32", "f16"
// (float16 storage) or "f16a" (float16 arithmetic), or UNSUPPORTED saying why not.
Expected<std::string> float_suffix(const OpContext& ctx, DType t, bool has_f16a = false);
// UNSUPPORTED when a count would not fit the shaders' 32-bit indices.
Status check_count(const OpContext& ctx, int64_t n);
inline uint32_t u32(int64_t v) {
  return static_cast<uint32_t>(v);
}
// A tensor's offset in its chunk in units of `unit` bytes (its element size by default).
inline uint32_t off(const Tensor* t, size_t unit = 0) {
  return offset_of(t->raw(), unit ? unit : dtype_size(t->dtype()));
}

// A 1-D dispatch of n invocations of `local`-sized groups.
template <class Push>
Status run_1d(const Pipeline* p, std::initializer_list<const void*> buffers, const Push& push,
              uint64_t n, uint32_t local = 256) {
  static_assert(sizeof(Push) <= kMaxPush, "push constants past the 128 bytes every device has");
  TERN_ASSIGN_OR_RETURN(Context * c, context());
  uint32_t gx, gy;
  groups_1d(n, local, &gx, &gy);
  return c->dispatch(*p, buffers, &push, sizeof(Push), gx, gy);
}

// The push constants of shaders/gemm.comp: y[b] = chain(alpha * A[b] B[b] + beta * C[b] + Z[b]),
// element offsets and strides in elements (flags: 1 = C present, 2 = Z present).
struct GemmPush {
  uint32_t M, N, K, oa, ob, oc, oz, oy;
  uint32_t sab, sam, sak, sbb, sbk, sbn, scb, scm;
  uint32_t scn, syb, szb, flags;
  float alpha, beta;
  uint32_t acts;
  float ap[6];
};
// One GEMM dispatch over `batch` matrices; absent C or Z are passed as null (y is bound instead).
Status run_gemm(const Pipeline* p, const void* a, const void* b, const void* c, const void* z,
                void* y, const GemmPush& push, uint32_t batch);
// UNSUPPORTED when an M x N output needs more workgroups than a dispatch may have.
Status check_gemm_size(const OpContext& ctx, int64_t M, int64_t N, int64_t batch);

constexpr size_t kMaxRank = 6;

}  // namespace tern::vk
