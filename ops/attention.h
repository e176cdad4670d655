// Attention (ONNX opset 23): scaled-dot-product attention with MHA / GQA / MQA heads, 3-D
// (batch, seq, heads*dim) or 4-D (batch, heads, seq, dim) layouts, an optional boolean or
// additive mask, is_causal (bottom-right aligned after a KV cache), softcap, a KV cache
// (past_key/past_value in, present_key/present_value out), nonpad_kv_seqlen and the
// qk_matmul_output output (the last two in the reference kernel only). A row whose keys are all
// masked gives zeros. Q/K/V/past (and a float mask) may be float32, float16 or bfloat16, all of one
// type; the kernels compute in float32 or wider and round the outputs to that type.
#pragma once

#include <cstdint>

#include <string>

#include "core/kernel.h"

namespace tern::ops {

// A strided view of a (batch, heads, seq, dim) operand; dim is contiguous.
struct HeadView {
  int64_t stride_b = 0, stride_h = 0, stride_s = 0;
  int64_t offset(int64_t b, int64_t h, int64_t s) const {
    return b * stride_b + h * stride_h + s * stride_s;
  }
};

struct AttentionParams {
  int64_t batch = 0, q_heads = 0, kv_heads = 0, seq_q = 0, seq_kv = 0, past = 0;
  int64_t head_dim = 0, v_head_dim = 0;
  bool seq_first = false;  // 3-D Q, K, V and output are (seq, batch, hidden): kAttentionSeqFirst
  HeadView q, k, v, y;     // k and v index the new keys/values only (positions past.. seq_kv)
  DType dtype = DType::kFloat32;  // Q, K, V, past, a float mask, the outputs
  // softmax_precision when it asks for float16 or bfloat16: the scores are rounded to it before
  // the softmax and the probabilities after (kUndefined: float32 or wider, as kernels compute).
  DType softmax_round = DType::kUndefined;
  bool has_past = false;
  bool want_present_key = false, want_present_value = false;
  float scale = 1, softcap = 0;
  bool causal = false;
  // Causal masking is bottom-right aligned: query i sees keys j <= i + causal_offset, where the
  // offset is the number of cached keys before this query block (past length).
  int64_t causal_offset = 0;
  bool nonpad = false;   // nonpad_kv_seqlen given: keys at or past it are padding (reference only)
  bool want_qk = false;  // the qk_matmul_output output (reference only)
  int64_t qk_mode = 0;   // 0 scaled QK, 1 after softcap, 2 + mask, 3 softmax
  enum class Mask { kNone, kBool, kFloat } mask = Mask::kNone;
  int64_t mask_stride[4] = {0, 0, 0, 0};  // over (batch, q head, i, j); 0 where broadcast
  int64_t mask_len = INT64_MAX;           // a mask shorter than seq_kv masks the keys past it

  int64_t group() const { return q_heads / kv_heads; }  // q heads per kv head
  // Whether query i may see key j because of is_causal.
  bool causal_ok(int64_t i, int64_t j) const { return !causal || j <= i + causal_offset; }
};

Expected<AttentionParams> parse_attention(const OpContext& ctx);

// What a scaled-dot-product attention call looks like, for tern_sdp_can_use and kernel choice.
struct SdpCase {
  int64_t batch = 0, heads = 0, seq_q = 0, seq_kv = 0, head_dim = 0;
  DType dtype = DType::kFloat32;
  bool causal = false, mask = false;
  float dropout = 0;
};
SdpCase sdp_case(const AttentionParams& p);

// Copies past and new keys/values into the present outputs (B, kv_heads, seq_kv, dim), when
// they are wanted. Kernels that read through a KV cache read from them.
void write_present(const AttentionParams& p, const KernelArgs& a);
// K/V sources after write_present: the present tensors when there is a past, else the inputs.
struct KvSource {
  const float* k;
  const float* v;
  HeadView kv, vv;
};
KvSource kv_source(const AttentionParams& p, const KernelArgs& a);

// The additive bias of the mask at (b, h, i, j): 0, a float, or -inf for a false boolean.
inline float mask_bias(const AttentionParams& p, const void* mask, int64_t b, int64_t h, int64_t i,
                       int64_t j) {
  if (p.mask == AttentionParams::Mask::kNone) return 0.0f;
  if (j >= p.mask_len) return -__builtin_inff();
  const int64_t off =
      b * p.mask_stride[0] + h * p.mask_stride[1] + i * p.mask_stride[2] + j * p.mask_stride[3];
  if (p.mask == AttentionParams::Mask::kBool) {
    return static_cast<const bool*>(mask)[off] ? 0.0f : -__builtin_inff();
  }
  return static_cast<const float*>(mask)[off];
}

}  // namespace tern::ops
