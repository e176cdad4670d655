// CausalConvWithState on the CPU (float32, float16, bfloat16; float32 sums): per (batch, channel)
// row, the past and the input are laid out as one prefixed row in the thread's scratch, the output
// row is bias + one row-long multiply-add per tap (vectorised by the compiler), then SiLU through
// the dispatched vector table; rows run on the intra-op threads.
#include <algorithm>

#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/float_rows.h"
#include "backends/cpu/vec/vec.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "ops/causal_conv_with_state.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

struct CpuCausalConv {
  ops::CausalConvParams p;
  const VecOps* vec = nullptr;
  int slots = 1;
};

// Scratch per slot, in floats: the prefixed row, the output row, the taps (64-byte aligned parts).
int64_t slot_floats(const ops::CausalConvParams& p) {
  auto r16 = [](int64_t n) { return (n + 15) / 16 * 16; };
  return r16(p.carry() + p.length) + r16(p.length) + r16(p.taps);
}

Status run_causal_conv(const CpuCausalConv& k, const KernelArgs& a, const ExecContext& exec) {
  const ops::CausalConvParams& p = k.p;
  const Tensor& X = *a.inputs[0];
  const Tensor& W = *a.inputs[1];
  const Tensor* bias = p.has_bias ? a.inputs[2] : nullptr;
  const Tensor* past = p.has_past ? a.inputs[3] : nullptr;
  Tensor& Y = *a.outputs[0];
  Tensor* present = a.outputs.size() > 1 ? a.outputs[1] : nullptr;
  const int64_t K = p.taps, L = p.length, carry = p.carry();
  const int64_t per_slot = slot_floats(p);
  const int threads = std::min(exec.num_threads, k.slots);
  parallel_for_slots(p.batch * p.channels, 1, threads, [&](int slot, int64_t r0, int64_t r1) {
    float* row = static_cast<float*>(a.workspace) + slot * per_slot;
    float* y = row + (carry + L + 15) / 16 * 16;
    float* taps = y + (L + 15) / 16 * 16;
    for (int64_t bc = r0; bc < r1; ++bc) {
      const int64_t c = bc % p.channels;
      if (past) {
        const float* s = read_f32(*past, bc * carry, carry, row);
        if (s != row) std::copy(s, s + carry, row);
      } else {
        std::fill(row, row + carry, 0.0f);
      }
      const float* x = read_f32(X, bc * L, L, row + carry);
      if (x != row + carry) std::copy(x, x + L, row + carry);
      const float* w = read_f32(W, c * K, K, taps);
      float b0 = 0;
      if (bias) b0 = *read_f32(*bias, c, 1, &b0);
      std::fill(y, y + L, b0);
      for (int64_t j = 0; j < K; ++j) {
        const float wj = w[j];
        const float* __restrict src = row + j;
        float* __restrict dst = y;
        for (int64_t t = 0; t < L; ++t) dst[t] += wj * src[t];
      }
      if (p.silu) k.vec->activation(static_cast<int>(Activation::kSwish), 1.0f, y, y, L);
      write_f32(y, L, Y, bc * L);
      if (present) write_f32(row + L, carry, *present, bc * carry);
    }
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_causal_conv(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  TERN_ASSIGN_OR_RETURN(ops::CausalConvParams p, ops::parse_causal_conv(ctx));
  const CpuIsa isa = effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability));
  CpuCausalConv k{p, &vec_ops(isa), std::max(1, static_cast<int>(ctx.flag(FlagId::kNumThreads)))};
  const size_t bytes = static_cast<size_t>(k.slots * slot_floats(p)) * sizeof(float);
  return make_kernel(str_cat("causal_conv.", k.vec->isa), k, run_causal_conv, bytes);
}

}  // namespace

TERN_REGISTRATION void register_cpu_causal_conv_with_state(KernelRegistry& r) {
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    r.add("CausalConvWithState", "cpu", t, make_causal_conv);
  }
}

}  // namespace tern
