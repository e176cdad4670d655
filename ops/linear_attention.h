// LinearAttention (ONNX opset 27): a recurrent state S (d_k x d_v) per batch and KV head, updated
// token by token and read by every query head of its group (GQA / MQA):
//   linear       S = S + k vᵀ
//   gated        S = exp(g) S + k vᵀ                         (g per head or per key dim)
//   delta        S = S + β k (v - Sᵀk)ᵀ
//   gated_delta  S' = exp(g) S;  S = S' + β k (v - S'ᵀk)ᵀ
//   o = scale * Sᵀ q                                             (after the update)
// Q/K/V/decay/beta are packed (B, T, heads * dim); past_state and present_state are
// (B, H_kv, d_k, d_v), in their own float type. The parameters the reference kernel
// (ops/linear_attention.cpp) and the CPU kernel share.
#pragma once

#include <cstdint>

#include "core/kernel.h"

namespace tern::ops {

struct LinearAttentionParams {
  enum class Rule { kLinear, kGated, kDelta, kGatedDelta } rule = Rule::kGatedDelta;
  int64_t batch = 0, seq = 0, q_heads = 0, kv_heads = 0, dk = 0, dv = 0;
  float scale = 1;
  bool has_past = false;
  bool decay_per_key = false;     // decay is (B, T, H_kv * d_k); else (B, T, H_kv), one per head
  int64_t beta_heads = 0;         // beta's last dim: H_kv, or 1 shared by all heads
  DType dtype = DType::kFloat32;  // query, key, value, decay, beta, output
  DType state_dtype = DType::kFloat32;  // past_state / present_state

  bool gated() const { return rule == Rule::kGated || rule == Rule::kGatedDelta; }
  bool delta() const { return rule == Rule::kDelta || rule == Rule::kGatedDelta; }
  int64_t group() const { return q_heads / kv_heads; }  // query heads per KV head
  int64_t decay_width() const { return decay_per_key ? dk : 1; }
};

// Attributes, shapes and dtypes: INVALID_ARGUMENT / INVALID_MODEL naming the node for inputs
// that do not fit the update rule or each other.
Expected<LinearAttentionParams> parse_linear_attention(const OpContext& ctx);

}  // namespace tern::ops
