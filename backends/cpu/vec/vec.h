// Tern's own vectorised primitives, compiled once per x86 ISA level (scalar, AVX2, AVX-512) from
// one source (vec_impl.inc) and chosen at run time; on aarch64 written with NEON intrinsics
// (vec_neon.cpp). Which table a kernel gets follows the CPU's
// capability capped by the cpu.max_capability flag (env TERN_CPU_CAPABILITY), so the dispatch can
// be observed and tested: kernels put VecOps::isa into their names.
#pragma once

#include <cstdint>

namespace tern {

enum class CpuIsa : int { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

struct VecOps {
  const char* isa;  // "scalar" (x86 baseline) | "avx2" | "avx512" | "neon" (aarch64 baseline)
  // y[i] *= a
  void (*scale)(float* y, float a, int64_t n);
  // max(x[i]) over the numbers (each NaN skipped); -inf for n == 0
  float (*max)(const float* x, int64_t n);
  // y[i] = exp(x[i] - sub) (0 where x[i] - sub < -87.3, e.g. -inf), returns sum(y) in double
  double (*exp_sum)(const float* x, float sub, float* y, int64_t n);
  // y[i] = erf(x[i]), absolute error below 5e-7 (y may be x)
  void (*erf)(const float* x, float* y, int64_t n);
  // y[i] = 1 / (1 + exp(-x[i])), relative error about 3e-7 (y may be x)
  void (*sigmoid)(const float* x, float* y, int64_t n);
  // y[i] = tanh(x[i]), absolute and relative error below 4e-7, also near 0 (y may be x)
  void (*tanh)(const float* x, float* y, int64_t n);
  // One row of LayerNormalization: y = (x - mean) / sqrt(var + eps) * scale (+ bias when not
  // null), the mean and then the variance of the deviations summed in 16 lanes (y may be x).
  void (*layer_norm)(const float* x, const float* scale, const float* bias, float eps, float* y,
                     int64_t n);
  // y[i] = act(x[i]) for an Activation below, with parameter alpha (y may be x).
  void (*activation)(int act, float alpha, const float* x, float* y, int64_t n);
  // The mean of x and 1 / sqrt(variance + eps) (the deviations' squares summed in 16 lanes, as
  // layer_norm does): InstanceNormalization's and GroupNorm's statistics per plane.
  void (*moments)(const float* x, int64_t n, float eps, float* mean, float* inv_std);
  // y[i] = x[i] * a + b (y may be x).
  void (*affine)(const float* x, float a, float b, float* y, int64_t n);
  // y[i] = a[i] op b[i], op 0..3 = + - * /; a step of 0 repeats element 0 (y may be a or b).
  void (*binary)(int op, const float* a, int a_step, const float* b, int b_step, float* y,
                 int64_t n);
  // IEEE half <-> float, round to nearest even (F16C / AVX-512F / NEON conversions).
  void (*half_to_float)(const uint16_t* x, float* y, int64_t n);
  void (*float_to_half)(const float* x, uint16_t* y, int64_t n);
  // bfloat16 <-> float, round to nearest even, NaN kept quiet. Where the CPU has AVX-512 BF16 the
  // AVX-512 table narrows with VCVTNEPS2BF16, which reads float32 subnormals (below 1.2e-38) as
  // zero, as oneDNN's bf16 kernels do; elsewhere integer rounding of the bits, subnormals kept.
  void (*bfloat16_to_float)(const uint16_t* x, float* y, int64_t n);
  void (*float_to_bfloat16)(const float* x, uint16_t* y, int64_t n);
};

// VecOps::activation's functions; errors those of erf and tanh (GELU's two forms use them).
enum class Activation : int {
  kGelu = 0,       // x / 2 * (1 + erf(x / sqrt 2))
  kGeluTanh = 1,   // x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))
  kLeakyRelu = 2,  // x < 0 ? alpha x : x
  kElu = 3,        // x < 0 ? alpha (exp(x) - 1) : x
  kTanh = 4,
  kRelu = 5,   // x < 0 ? 0 : x (NaN stays NaN)
  kSwish = 6,  // x * sigmoid(alpha x)
};

// The table for an ISA level (levels the build or the CPU lack fall back to a lower one).
const VecOps& vec_ops(CpuIsa isa);

namespace vec_detail {
extern const VecOps kScalarOps;
extern const VecOps kAvx2Ops;    // only on x86-64
extern const VecOps kAvx512Ops;  // only on x86-64
extern const VecOps kNeonOps;    // only on aarch64
// kAvx512Ops' float_to_bfloat16 on AVX-512 BF16 (VCVTNEPS2BF16), where the CPU has it.
extern void (*const kAvx512Bf16Narrow)(const float* x, uint16_t* y, int64_t n);
}  // namespace vec_detail

}  // namespace tern
