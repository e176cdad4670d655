// The mha fastpath pass (shape-aware): scaled-dot-product attention written out as ops,
//   MatMul([Div|Mul](Q, scalar), Transpose(K)) -> [Div|Mul by a scalar] -> [Add mask]
//     -> Softmax(last axis) -> MatMul(., V)
// runs as one Attention kernel (which never materialises the scores with the FLASH kernel), in the
// 3-D or the sequence-first form (AttentionMatch) where the graph has one.
// Matching is structural and done once per session (find_attention_patterns); each plan checks
// shapes and dtypes (fuse_attention) and keeps the original nodes where they do not fit.
#pragma once

#include <functional>
#include <vector>

#include "core/graph.h"
#include "core/plan_graph.h"

namespace tern {

// Not an ONNX attribute: set only by this pass on the Attention node it makes of a sequence-first
// export (AttentionMatch::qs), whose 3-D Q, K, V and output are (seq, batch, hidden) instead of
// (batch, seq, hidden). A model's node with it is refused on import (check_attributes).
inline constexpr const char* kAttentionSeqFirst = "tern_seq_first";

struct AttentionMatch {
  size_t transpose = 0, matmul_qk = 0, softmax = 0, matmul_v = 0;
  int scale_node = -1;         // Div or Mul node, -1 when absent
  int scale_value = -1;        // the scalar operand's value id
  bool scale_divides = false;  // Div: scores / s
  int add_node = -1;           // -1 when there is no mask
  int mask = -1;               // value id of the additive mask
  int q = -1, k = -1, v = -1;  // value ids; k is Transpose's input
  // Q scaled by a scalar before MatMul(Q, K^T) (torch's export divides Q by sqrt(dim)): the
  // same as scaling the scores. -1 when absent.
  int q_scale_node = -1, q_scale_value = -1;
  bool q_scale_divides = false;
  bool keep_transpose = false;  // its output has other readers
  std::vector<size_t> removed;  // nodes the fused step replaces
  // The (batch, seq, heads * dim) form, when q, k and v are each a projection x3 split into heads
  // (Reshape to [b, s, h, d], Transpose [0, 2, 1, 3]) and the result is merged back (Transpose
  // [0, 2, 1, 3], Reshape to [b, s, h * d]), as exported encoders and decoders write it: the
  // Attention node then reads the projections and writes the merged value itself, with no copy
  // in between. -1 when the match has no such form; each plan checks the shapes.
  int q3 = -1, k3 = -1, v3 = -1, y3 = -1;
  int q_heads = -1, k_heads = -1, v_heads = -1, y_heads = -1;  // the [b, s, h, d] values
  // The sequence-first form (torch's nn.MultiheadAttention export, 3-D): q, k and v are each a
  // Transpose [1, 0, 2] of a (seq, batch * heads, dim) value, and the result is transposed back
  // the same way; the Attention node (kAttentionSeqFirst, one head per batch * heads entry) reads
  // those values and writes the transposed-back one. -1 when the match has no such form.
  int qs = -1, ks = -1, vs = -1, ys = -1;
  // The nodes the match's 3-D form (the splits and the merge) or its sequence-first form (the
  // four Transposes) replaces too; a match has at most one of the two.
  std::vector<size_t> removed3;
};

// `constant[v]` tells whether value v is known before any run (an initializer or folded).
std::vector<AttentionMatch> find_attention_patterns(const Graph& g,
                                                    const std::vector<bool>& constant);

// Per plan: each match whose shapes and dtypes fit, and whose Attention node `runnable` accepts
// (some backend has a kernel for that context), becomes one Attention node at matmul_v's place in
// `pg`, in the 3-D form where that fits; the nodes it replaces are marked removed. Returns how
// many were fused.
size_t fuse_attention(PlanGraph& pg, const std::vector<AttentionMatch>& matches,
                      const std::function<bool(const OpContext&)>& runnable);

// Marks the values no step writes any more, the outputs of removed nodes and of `fusions`'
// anchors that no fused node writes, as never materialised.
void drop_unwritten_values(PlanGraph& pg, const std::vector<FusionRecord>& fusions);

// For a plan of other shapes that keeps an earlier plan's fusion of match m into `fused`: whether
// its conditions still hold (the same form, scale, shapes and dtypes the kernel takes); when they
// do, fills ctx, fused's context, and marks the nodes it replaces removed.
bool refit_attention(PlanGraph& pg, const AttentionMatch& m, const Node& fused, OpContext* ctx);

}  // namespace tern
