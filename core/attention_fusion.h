// The mha fastpath pass: finds scaled-dot-product attention written out as ops,
//   MatMul(Q, Transpose(K)) -> [Div|Mul by a scalar] -> [Add mask] -> Softmax(last axis)
//     -> MatMul(., V)
// so the session can run it as one Attention kernel (which never materialises the scores with the
// FLASH kernel). Matching is structural here; the session checks shapes and dtypes per plan and
// runs the original nodes when they do not fit.
#pragma once

#include <vector>

#include "core/graph.h"

namespace tern {

struct AttentionMatch {
  size_t transpose = 0, matmul_qk = 0, softmax = 0, matmul_v = 0;
  int scale_node = -1;          // Div or Mul node, -1 when absent
  int scale_value = -1;         // the scalar operand's value id
  bool scale_divides = false;   // Div: scores / s
  int add_node = -1;            // -1 when there is no mask
  int mask = -1;                // value id of the additive mask
  int q = -1, k = -1, v = -1;   // value ids; k is Transpose's input
  bool keep_transpose = false;  // its output has other readers
  std::vector<size_t> removed;  // nodes the fused step replaces
};

// `constant[v]` tells whether value v is known before any run (an initializer or folded).
std::vector<AttentionMatch> find_attention_patterns(const Graph& g,
                                                    const std::vector<bool>& constant);

}  // namespace tern
