// Graph passes that need no shapes, run once at session creation on the session's copy of the
// graph (after constant folding): Conv+BatchNormalization folding, HardSwish from its
// x * clip(x + 3, 0, 6) / 6 decomposition, Conv + element-wise chain (activations, scalar Mul and
// Add) fusion into FusedConv's epilogue, and
// dead-node elimination. Shape-dependent fusions (a residual Add into FusedConv, attention) are
// made per plan, where shapes are known. Each pass keeps the graph's outputs bit-for-bit the
// function they were (up to float rounding of folded weights).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/graph.h"

namespace tern {

struct OptimizerReport {
  size_t batch_norms_folded = 0;
  size_t hardswish_fused = 0;
  size_t layer_norms_fused = 0;
  size_t gelus_fused = 0;
  size_t matmuls_fused = 0;
  size_t activations_fused = 0;
  size_t dead_nodes_removed = 0;
};

Status fold_batch_norm_into_conv(Graph& g, OptimizerReport* report);
Status fuse_hardswish(Graph& g, OptimizerReport* report);
// The opset-13 decomposition of LayerNormalization over the last axis (ReduceMean, Sub, Pow 2,
// ReduceMean, Add eps, Sqrt, Div, Mul scale, Add bias) becomes one LayerNormalization node.
Status fuse_layer_norm(Graph& g, OptimizerReport* report);
// GELU's erf decomposition, x * (erf(x / sqrt 2) + 1) * 0.5, becomes one Gelu node.
Status fuse_gelu(Graph& g, OptimizerReport* report);
// MatMul by constant 2-D float32 weights, + a constant bias of one value per column, then
// optionally Relu or Gelu, becomes one FusedMatMul node.
Status fuse_matmul_epilogue(Graph& g, OptimizerReport* report);
Status fuse_conv_activation(Graph& g, OptimizerReport* report);
Status remove_dead_nodes(Graph& g, OptimizerReport* report);
// All of the above, in that order (layer norms after HardSwish).
Status optimize_graph(Graph& g, OptimizerReport* report);

// An element-wise step a FusedConv epilogue can apply: "Relu", "LeakyRelu" (alpha), "Clip" (min,
// max), "Sigmoid", "HardSigmoid" (alpha, beta), "HardSwish", "Tanh", "Affine" (scale, shift:
// a Mul or Add by a float scalar constant).
struct FusedActivation {
  std::string kind;
  std::vector<float> params;
  int input = 0;         // the node's input that carries the data
  size_t operand_rank = 0;  // rank of the constant operand (Affine), which broadcasts
};
// The step node n computes, when it is one of those with constant parameters.
std::optional<FusedActivation> activation_of(const Graph& g, const Node& n);

// Appends a step to FusedConv's "activations" and "activation_params" attributes (an Affine
// right after an Affine merges into it).
void append_fused_activation(Node& conv, const FusedActivation& act);
// Whether a FusedConv already has an epilogue.
bool has_epilogue(const Node& conv);

// For every value, the indices of the nodes reading it (a node reading a value twice appears
// twice).
std::vector<std::vector<size_t>> value_consumers(const Graph& g);
// For every value, the node that produces it (-1: graph input, constant or unproduced).
std::vector<int> value_producers(const Graph& g);
// Removes the nodes marked in `removed` (one flag per node), keeping the others' order.
void erase_nodes(Graph& g, const std::vector<bool>& removed);

}  // namespace tern
