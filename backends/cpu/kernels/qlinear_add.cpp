// QLinearAdd (ops/qlinear_add.cpp; QDQ fusion's residual and bias additions of quantized models)
// vectorised: the broadcast merged into rows of a contiguous inner run (as binary_vec), each run
// taken in spans of kSpan elements through float32 buffers on the stack: both operands
// dequantised with the QuantizeLinear kernels' per-ISA rows (a float32 B read as it is), added
// with VecOps, Relu where fused, quantised back. The same float32 operations as the unfused
// DequantizeLinear -> Add -> QuantizeLinear, so the results equal the reference bit for bit.
// Operands of the output's shape may share a channels-last / blocked layout (int8 activations
// between int8 convolutions); a broadcast takes plain data.
#include <algorithm>

#include "backends/cpu/broadcast_parts.h"
#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/quantize_rows.h"
#include "core/kernel_registry.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

constexpr int64_t kSpan = 512;

bool int8_type(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8;
}

struct QAddVec {
  ops::BroadcastRows rows;
  DType a_type = DType::kUndefined, b_type = DType::kUndefined, c_type = DType::kUndefined;
  bool relu = false;
  const QuantizeRows* q = nullptr;
  const VecOps* vec = nullptr;
};

float scalar(const KernelArgs& a, size_t i) {
  return i < a.inputs.size() && a.inputs[i] ? static_cast<float>(a.inputs[i]->float_at(0)) : 0.0f;
}

// Operand span [j, j + n) of a row at element offset `off`: dequantised into `buf`, or a float32
// operand read in place; one element when the operand repeats along the row (step 0).
const float* operand(const QAddVec& k, const void* base, DType type, int64_t off, bool walks,
                     int64_t j, int64_t n, float scale, float zero, float* buf) {
  const int64_t at = off + (walks ? j : 0);
  if (type == DType::kFloat32) return static_cast<const float*>(base) + at;
  dequantize_row(*k.q, static_cast<const uint8_t*>(base) + at, type, buf, walks ? n : 1, scale,
                 zero);
  return buf;
}

Status run_qadd_vec(const QAddVec& k, const KernelArgs& a, const ExecContext& exec) {
  const void* pa = a.inputs[0]->raw();
  const void* pb = a.inputs[3]->raw();
  uint8_t* pc = static_cast<uint8_t*>(a.outputs[0]->raw());
  const float as = scalar(a, 1), az = scalar(a, 2), bs = scalar(a, 4), bz = scalar(a, 5);
  const float cs = scalar(a, 6), cz = scalar(a, 7);
  const ops::BroadcastRows& br = k.rows;
  const int64_t inner = br.inner;
  const bool wa = br.in_strides[0].back() != 0, wb = br.in_strides[1].back() != 0;
  parallel_broadcast_parts(
      br, exec.num_threads, [&](int64_t r, int64_t j0, int64_t len, const int64_t* off) {
        float fa[kSpan], fb[kSpan], fc[kSpan];
        for (int64_t j = j0; j < j0 + len; j += kSpan) {
          const int64_t n = std::min(kSpan, j0 + len - j);
          const float* x = operand(k, pa, k.a_type, off[0], wa, j, n, as, az, fa);
          const float* y = operand(k, pb, k.b_type, off[1], wb, j, n, bs, bz, fb);
          k.vec->binary(0, x, wa, y, wb, fc, n);
          if (k.relu) k.vec->activation(static_cast<int>(Activation::kRelu), 0, fc, fc, n);
          quantize_row(*k.q, fc, pc + r * inner + j, k.c_type, n, cs, cz);
        }
      });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_qadd_vec(const OpContext& ctx) {
  QAddVec k;
  k.a_type = ctx.inputs[0].dtype;
  k.b_type = ctx.inputs[3].dtype;
  k.c_type = ctx.outputs[0].dtype;
  if (!int8_type(k.a_type) || (!int8_type(k.b_type) && k.b_type != DType::kFloat32) ||
      !int8_type(k.c_type)) {
    return unsupported("qadd_vec: uint8/int8 operands (B may be float32) and result");
  }
  const Shape& out = ctx.outputs[0].shape;
  if (ctx.inputs[0].block || ctx.inputs[3].block || ctx.outputs[0].block) {
    for (size_t i : {size_t{0}, size_t{3}}) {
      if (numel(ctx.inputs[i].shape) != 1 &&
          (ctx.inputs[i].shape != out || ctx.inputs[i].block != ctx.outputs[0].block)) {
        return unsupported("qadd_vec: a broadcast on channel-blocked data");
      }
    }
  }
  k.rows = ops::plan_broadcast(out, {ctx.inputs[0].shape, ctx.inputs[3].shape});
  for (const auto& s : k.rows.in_strides) {
    if (!s.empty() && s.back() != 0 && s.back() != 1) return unsupported("qadd_vec: strided");
  }
  std::string act;
  TERN_ASSIGN_OR_RETURN(act, ctx.attrs().get_string("activation", ""));
  k.relu = act == "Relu";
  const CpuIsa isa = effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability));
  k.q = &quantize_rows(isa);
  k.vec = &vec_ops(isa);
  std::string name = str_cat("qadd_vec.", k.vec->isa);
  // The result may take the memory of an operand of its own shape and type: each span is read
  // into the buffers before its results are written.
  for (size_t i : {size_t{0}, size_t{3}}) {
    if (ctx.inputs[i].shape == out && ctx.inputs[i].dtype == k.c_type) {
      return make_elementwise_kernel(std::move(name), std::move(k), run_qadd_vec,
                                     static_cast<int>(i));
    }
  }
  return make_kernel(std::move(name), std::move(k), run_qadd_vec);
}

}  // namespace

TERN_REGISTRATION void register_cpu_qlinear_add(KernelRegistry& r) {
  for (DType t : {DType::kUInt8, DType::kInt8}) r.add("QLinearAdd", "cpu", t, make_qadd_vec);
}

}  // namespace tern
