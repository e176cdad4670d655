// QuantizeLinear (float32 -> uint8 / int8) and DequantizeLinear (uint8 / int8 / int32 -> float32)
// with one scale and zero point per tensor: the QDQ pairs left around the float ops of a
// quantized model (Add, pooling, the model's ends) after QDQ fusion. The same arithmetic as the
// reference kernels in ops/quantize.cpp: x / scale in float32, rounded half to even, the zero point
// added, saturated (NaN to the type's lowest value, as the reference); (x - zero point) * scale.
// Loops the compiler vectorises (rounding by adding and subtracting 1.5 * 2^23, exact for the
// clamped range), compiled for each x86 ISA level and chosen under cpu.max_capability, on the
// session's threads. Per-axis and blocked forms, other types and float8
// keep the reference kernels (plain layout only).
#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/quantize_rows.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "ops/common/op_utils.h"

// GCC keeps float comparisons that select a value as branches unless told that floating-point
// operations do not trap (nothing here reads the exception flags): then the loops vectorise
// (3.4x on quantize). Clang does so by default.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

namespace tern {
namespace {

constexpr int64_t kGrain = 1 << 14;

// Per-tensor quantisation maps each element alone: any layout, as long as input and output share
// it (the planner keeps channels-last / blocked int8 activations between convolutions).
Status same_layout(const OpContext& ctx) {
  if (ctx.inputs[0].block != ctx.outputs[0].block) {
    return unsupported("quantize_vec: input and output in different layouts");
  }
  return Status::ok();
}

bool per_tensor(const OpContext& ctx) {
  for (size_t i : {size_t{1}, size_t{2}}) {
    if (ctx.has_input(i) && numel(ctx.inputs[i].shape) != 1) return false;
  }
  auto block = ctx.attrs().get_int("block_size", 0);
  return block && *block == 0 && ctx.inputs[1].dtype == DType::kFloat32;
}

// One span, arguments by value and restrict: a uint8 store may alias anything, so a loop reading
// a lambda's captures would reload them after every store and not vectorise. Inlined into a
// function per ISA level (below), each vectorised for its registers.
template <class T>
[[gnu::always_inline]] inline void quantize_span(const float* __restrict x, T* __restrict y,
                                                 int64_t n, float s, float z, float below,
                                                 float above) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23: v + kMagic - kMagic rounds half to even
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] / s;
    v = v >= below ? v : below;  // NaN fails the comparison: the lowest value, as the reference
    v = v <= above ? v : above;
    v = (v + kMagic) - kMagic;
    y[i] = static_cast<T>(static_cast<int32_t>(v + z));
  }
}

template <class T>
[[gnu::always_inline]] inline void dequantize_span(const T* __restrict x, float* __restrict y,
                                                   int64_t n, float s, float z) {
  for (int64_t i = 0; i < n; ++i) y[i] = (static_cast<float>(x[i]) - z) * s;
}

#define TERN_QUANTIZE_SPANS(NAME, ATTR)                                                   \
  ATTR void NAME##_q_u8(const float* x, uint8_t* y, int64_t n, float s, float z, float b, \
                        float a) {                                                        \
    quantize_span(x, y, n, s, z, b, a);                                                   \
  }                                                                                       \
  ATTR void NAME##_q_s8(const float* x, int8_t* y, int64_t n, float s, float z, float b,  \
                        float a) {                                                        \
    quantize_span(x, y, n, s, z, b, a);                                                   \
  }                                                                                       \
  ATTR void NAME##_dq_u8(const uint8_t* x, float* y, int64_t n, float s, float z) {       \
    dequantize_span(x, y, n, s, z);                                                       \
  }                                                                                       \
  ATTR void NAME##_dq_s8(const int8_t* x, float* y, int64_t n, float s, float z) {        \
    dequantize_span(x, y, n, s, z);                                                       \
  }                                                                                       \
  const QuantizeRows k##NAME = {#NAME, NAME##_q_u8, NAME##_q_s8, NAME##_dq_u8, NAME##_dq_s8};

TERN_QUANTIZE_SPANS(baseline, )
#if defined(__x86_64__)
TERN_QUANTIZE_SPANS(avx2, __attribute__((target("avx2,fma"))))
TERN_QUANTIZE_SPANS(avx512, __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma"))))
#endif
#undef TERN_QUANTIZE_SPANS

}  // namespace

const QuantizeRows& quantize_rows(CpuIsa isa) {
#if defined(__x86_64__)
  if (isa == CpuIsa::kAvx512) return kavx512;
  if (isa == CpuIsa::kAvx2) return kavx2;
#else
  (void)isa;
#endif
  return kbaseline;
}

const char* quantize_rows_isa(const QuantizeRows& rows) {
  return rows.isa;
}

void quantize_row(const QuantizeRows& rows, const float* x, void* y, DType to, int64_t n,
                  float scale, float zero) {
  if (to == DType::kUInt8) {
    rows.q_u8(x, static_cast<uint8_t*>(y), n, scale, zero, 0.0f - zero, 255.0f - zero);
  } else {
    rows.q_s8(x, static_cast<int8_t*>(y), n, scale, zero, -128.0f - zero, 127.0f - zero);
  }
}

void dequantize_row(const QuantizeRows& rows, const void* x, DType from, float* y, int64_t n,
                    float scale, float zero) {
  if (from == DType::kUInt8) {
    rows.dq_u8(static_cast<const uint8_t*>(x), y, n, scale, zero);
  } else {
    rows.dq_s8(static_cast<const int8_t*>(x), y, n, scale, zero);
  }
}

void quantize_tensor(const QuantizeRows& rows, const float* x, void* y, DType to, int64_t n,
                     float scale, float zero, int threads) {
  const size_t size = dtype_size(to);
  parallel_for(n, kGrain, threads, [&](int64_t b, int64_t e) {
    quantize_row(rows, x + b, static_cast<uint8_t*>(y) + b * size, to, e - b, scale, zero);
  });
}

void dequantize_tensor(const QuantizeRows& rows, const void* x, DType from, float* y, int64_t n,
                       float scale, float zero, int threads) {
  const size_t size = dtype_size(from);
  parallel_for(n, kGrain, threads, [&](int64_t b, int64_t e) {
    dequantize_row(rows, static_cast<const uint8_t*>(x) + b * size, from, y + b, e - b, scale,
                   zero);
  });
}

namespace {

const QuantizeRows& rows_for(const OpContext& ctx) {
  return quantize_rows(effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability)));
}

struct Q {
  DType type;  // quantize: the output's; dequantize: the input's
  const QuantizeRows* rows;
};

Status run_quantize(const Q& p, const KernelArgs& a, const ExecContext& exec) {
  const float s = static_cast<float>(a.inputs[1]->float_at(0));
  const Tensor* zt = a.inputs.size() > 2 ? a.inputs[2] : nullptr;
  const float z = zt ? static_cast<float>(zt->int_at(0)) : 0.0f;
  quantize_tensor(*p.rows, a.inputs[0]->data<float>(), a.outputs[0]->raw(), p.type,
                  a.inputs[0]->numel(), s, z, exec.num_threads);
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_quantize(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(same_layout(ctx));
  const DType to = ctx.outputs[0].dtype;
  if (ctx.inputs[0].dtype != DType::kFloat32 || !per_tensor(ctx) ||
      (to != DType::kUInt8 && to != DType::kInt8)) {
    return unsupported("quantize_vec: float32 to uint8/int8 with one scale and zero point");
  }
  const QuantizeRows& rows = rows_for(ctx);
  return make_kernel(str_cat("quantize_vec.", rows.isa), Q{to, &rows}, run_quantize);
}

Status run_dequantize(const Q& p, const KernelArgs& a, const ExecContext& exec) {
  const float s = static_cast<float>(a.inputs[1]->float_at(0));
  const Tensor* zt = a.inputs.size() > 2 ? a.inputs[2] : nullptr;
  const float z = zt ? static_cast<float>(zt->int_at(0)) : 0.0f;
  const Tensor& x = *a.inputs[0];
  float* y = a.outputs[0]->data<float>();
  const int64_t n = x.numel();
  if (p.type == DType::kInt32) {
    // int32: (x - z) in float32 is exact below 2^24 only; the product rounds once more than the
    // reference's double above it, so int32 goes through double.
    const int32_t* xi = x.data<int32_t>();
    const double zd = zt ? static_cast<double>(zt->int_at(0)) : 0.0;
    parallel_for(n, kGrain, exec.num_threads, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) y[i] = static_cast<float>((xi[i] - zd) * s);
    });
    return Status::ok();
  }
  dequantize_tensor(*p.rows, x.raw(), p.type, y, n, s, z, exec.num_threads);
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_dequantize(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(same_layout(ctx));
  const DType from = ctx.inputs[0].dtype;
  if (ctx.outputs[0].dtype != DType::kFloat32 || !per_tensor(ctx) ||
      (from != DType::kUInt8 && from != DType::kInt8 && from != DType::kInt32)) {
    return unsupported("dequantize_vec: uint8/int8/int32 to float32 with one scale and zero point");
  }
  const QuantizeRows& rows = rows_for(ctx);
  return make_kernel(str_cat("dequantize_vec.", rows.isa), Q{from, &rows}, run_dequantize);
}

}  // namespace

TERN_REGISTRATION void register_cpu_quantize_vec(KernelRegistry& r) {
  r.add("QuantizeLinear", "cpu", DType::kFloat32, make_quantize);
  for (DType t : {DType::kUInt8, DType::kInt8, DType::kInt32}) {
    r.add("DequantizeLinear", "cpu", t, make_dequantize);
  }
}

}  // namespace tern
