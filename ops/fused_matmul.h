// FusedMatMul (Tern-internal, made by the graph optimizer, never read from files):
//   Y = activation(MatMul(A, B) + bias)
// A [..., M, K] and a 2-D B [K, N]; bias (optional input 2) holds N values (shape [N] or with
// leading 1s); the string attribute "activation" is "" (none), "Relu" or "Gelu" (the exact,
// erf form). The projections of transformer encoders: MatMul + bias Add (+ GELU) in one step.
#pragma once

#include "ops/matmul.h"

namespace tern::ops {

enum class MatMulAct { kNone, kRelu, kGelu };

struct FusedMatMulParams {
  MatMulParams mm;
  bool has_bias = false;
  MatMulAct act = MatMulAct::kNone;
};

// any_float: float16/bfloat16 too (shape inference, kernels of those types); kernels keep the
// default (float32).
Expected<FusedMatMulParams> parse_fused_matmul(const OpContext& ctx, bool any_float = false);
// y[r, n] = act(y[r, n] + bias[n]) over `rows` rows of N.
void apply_bias_activation(const FusedMatMulParams& p, const float* bias, float* y, int64_t rows);

}  // namespace tern::ops
