// MatMul (numpy semantics: 1-D promotion, broadcast batch dims) and Gemm: params, shape inference
// and naive references that accumulate in double.
#pragma once

#include "core/kernel.h"

namespace tern::ops {

struct MatMulParams {
  int64_t M = 0, N = 0, K = 0;
  Shape out;
  // One entry per output matrix: element offsets of its A and B matrices.
  std::vector<int64_t> a_offsets, b_offsets;
};
Expected<MatMulParams> parse_matmul(const OpContext& ctx);
void matmul_reference(const MatMulParams& p, const float* a, const float* b, float* y);

struct GemmParams {
  int64_t M = 0, N = 0, K = 0;
  bool trans_a = false, trans_b = false;
  float alpha = 1, beta = 1;
  Shape c_shape;  // empty when C is absent; broadcast to [M, N]
};
Expected<GemmParams> parse_gemm(const OpContext& ctx);
// Writes beta * C (broadcast) into y, for kernels that accumulate alpha * A * B onto it.
void gemm_fill_bias(const GemmParams& p, const float* c, float* y);
void gemm_reference(const GemmParams& p, const float* a, const float* b, const float* c, float* y);

}  // namespace tern::ops
