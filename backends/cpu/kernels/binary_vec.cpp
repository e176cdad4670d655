// Float32 Add, Sub, Mul and Div on plain layouts with numpy broadcasting, vectorised (VecOps):
// the broadcast is merged into rows of a contiguous inner run, where each operand either walks
// or repeats one element. Channel-blocked operands are taken when all have the output's shape
// and layout (or one element); the blocked per-channel case is ops/binary.cpp's blocked_channel.
#include <algorithm>

#include "backends/cpu/broadcast_parts.h"
#include "backends/cpu/cpu_capability.h"
#include "core/kernel_registry.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

struct BinaryVec {
  int op = 0;  // + - * /
  ops::BroadcastRows rows;
  const VecOps* vec = nullptr;
};

Status run_binary_vec(const BinaryVec& k, const KernelArgs& a, const ExecContext& exec) {
  const float* pa = a.inputs[0]->data<float>();
  const float* pb = a.inputs[1]->data<float>();
  float* y = a.outputs[0]->data<float>();
  const ops::BroadcastRows& br = k.rows;
  const int64_t inner = br.inner;
  const int sa = br.in_strides[0].back() != 0, sb = br.in_strides[1].back() != 0;
  parallel_broadcast_parts(br, exec.num_threads,
                           [&](int64_t r, int64_t j0, int64_t n, const int64_t* off) {
                             k.vec->binary(k.op, pa + off[0] + (sa ? j0 : 0), sa,
                                           pb + off[1] + (sb ? j0 : 0), sb, y + r * inner + j0, n);
                           });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_binary_vec(const OpContext& ctx, int kind) {
  if (ctx.inputs[0].dtype != DType::kFloat32 || ctx.inputs[1].dtype != DType::kFloat32) {
    return unsupported("binary_vec takes float32");
  }
  const Shape& out = ctx.outputs[0].shape;
  if (ctx.inputs[0].block || ctx.inputs[1].block || ctx.outputs[0].block) {
    // Channel-blocked: the same layout on every operand of the output's shape (memory order is
    // then element order for all of them: SiLU's x * sigmoid(x) after a convolution), or one
    // element repeated.
    for (const TensorInfo& in : ctx.inputs) {
      if (numel(in.shape) != 1 && (in.shape != out || in.block != ctx.outputs[0].block)) {
        return unsupported("binary_vec: a broadcast on channel-blocked data");
      }
    }
  }
  BinaryVec k;
  k.op = kind;
  k.rows = ops::plan_broadcast(out, {ctx.inputs[0].shape, ctx.inputs[1].shape});
  // An inner stride other than 0 or 1 (a transposed broadcast) is the reference kernel's.
  for (const auto& s : k.rows.in_strides) {
    if (!s.empty() && s.back() != 0 && s.back() != 1) return unsupported("binary_vec: strided");
  }
  k.vec = &vec_ops(effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability)));
  std::string name = str_cat("binary.", k.vec->isa);
  // The output may take the memory of an input of its own shape: element i of both is at the
  // same position.
  for (int i = 0; i < 2; ++i) {
    if (ctx.inputs[static_cast<size_t>(i)].shape == out) {
      return make_elementwise_kernel(std::move(name), std::move(k), run_binary_vec, i);
    }
  }
  return make_kernel(std::move(name), std::move(k), run_binary_vec);
}

template <int Op>
Expected<std::unique_ptr<Kernel>> make_binary_vec(const OpContext& ctx) {
  return make_binary_vec(ctx, Op);
}

}  // namespace

TERN_REGISTRATION void register_cpu_binary_vec(KernelRegistry& r) {
  r.add("Add", "cpu", DType::kFloat32, make_binary_vec<0>);
  r.add("Sub", "cpu", DType::kFloat32, make_binary_vec<1>);
  r.add("Mul", "cpu", DType::kFloat32, make_binary_vec<2>);
  r.add("Div", "cpu", DType::kFloat32, make_binary_vec<3>);
}

}  // namespace tern
