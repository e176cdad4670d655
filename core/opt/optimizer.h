// The optimizer: every graph rewrite, one pass per file, run in one place.
//
// Shape-free passes run once at session creation on the session's copy of the graph, in this
// order (optimize_graph, after the QDQ fusions, constant folding and, on CPU-only sessions,
// widen_float16):
//   constant_folding        nodes whose inputs are all constant are computed and become constants
//   batch_norm_folding      Conv -> BatchNormalization becomes one Conv
//   hardswish_fusion        x * clip(x + 3, 0, 6) / 6 becomes HardSwish
//   layer_norm_fusion       LayerNormalization's decomposition becomes one node
//   group_norm_fusion       Reshape -> InstanceNormalization -> Reshape (GroupNorm before opset
//                           18) becomes one GroupNormalization node
//   gelu_fusion             GELU's erf decomposition becomes one Gelu node
//   matmul_epilogue_fusion  MatMul by constant weights + bias (+ Relu/Gelu) becomes FusedMatMul
//   conv_activation_fusion  a convolution's element-wise tail joins FusedConv's epilogue
//   key_transpose_split     attention's K^T from [B, S, H, D] in two Transposes, the last the
//                           form the mha fastpath matches
//   dead_node_removal       nodes nothing reads go
// Shape-aware passes run per plan, once shapes are known, on the plan's PlanGraph
// (optimize_plan_graph): attention_fusion (the mha fastpath), then residual_fusion.
// Each pass keeps the graph's outputs the function they were (up to float rounding of folded
// weights).
#pragma once

#include <functional>
#include <vector>

#include "core/backend.h"
#include "core/graph.h"
#include "core/opt/attention_fusion.h"
#include "core/plan_graph.h"

namespace tern {

struct OptimizerReport {
  size_t constants_folded = 0;
  size_t batch_norms_folded = 0;
  size_t hardswish_fused = 0;
  size_t swish_fused = 0;  // x * Sigmoid(x) into Swish
  size_t layer_norms_fused = 0;
  size_t group_norms_fused = 0;
  size_t gelus_fused = 0;
  size_t matmuls_fused = 0;
  size_t activations_fused = 0;
  size_t key_transposes_split = 0;
  size_t dead_nodes_removed = 0;
  size_t identities_bypassed = 0;  // Identity nodes whose readers now read the input
  size_t pads_folded = 0;  // Pads into Conv/AveragePool, no-op Pads and Dropouts to Identity
  // DequantizeLinear -> Conv [-> Relu] -> QuantizeLinear into (Fused)QLinearConv, and
  // DequantizeLinear -> MatMul -> QuantizeLinear into QLinearMatMul
  size_t qdq_convs_fused = 0;
  size_t qdq_matmuls_fused = 0;
  // DequantizeLinear(s) -> Add [-> Relu] -> QuantizeLinear into QLinearAdd
  size_t qdq_adds_fused = 0;
  // DequantizeLinear -> Reshape / Transpose / MaxPool ... -> QuantizeLinear of the same scale and
  // zero point: the ops move the quantised values themselves
  size_t qdq_moves_folded = 0;
  size_t float16_values_widened = 0;  // float16 values computed in float32 (widen_float16)
  size_t float16_casts_added = 0;     // the Casts at their float16 edges
};

// Computes every node whose inputs are all constant (random ops excepted) with the host backends
// in `backends` under `flags`, and stores its outputs as constants.
Status fold_constants(Graph& g, const std::vector<Backend*>& backends, const FlagValues& flags,
                      OptimizerReport* report);
// Zero constant Pads of the spatial dims read only by a Conv or AveragePool become its padding;
// Pads of nothing and inference Dropouts (mask unread) become Identity nodes.
Status fold_pads(Graph& g, OptimizerReport* report);
// QDQ convolutions (DequantizeLinear -> Conv [-> Relu] -> QuantizeLinear, constant int8 weights)
// become QLinearConv (core/opt/qdq_fusion.cpp); before constant folding.
Status fuse_qdq_conv(Graph& g, OptimizerReport* report);
// DequantizeLinear(a) x DequantizeLinear(constant int8 B) -> QuantizeLinear becomes QLinearMatMul.
// Activations on both sides: DequantizeLinear(a) x DequantizeLinear(b) -> QuantizeLinear too.
Status fuse_qdq_matmul(Graph& g, OptimizerReport* report);
// DequantizeLinear(a) + DequantizeLinear(b) or a float32 constant [-> Relu] -> QuantizeLinear
// becomes QLinearAdd (ops/qlinear_add.cpp).
Status fuse_qdq_add(Graph& g, OptimizerReport* report);
// DequantizeLinear -> ops that only move elements (Reshape, Transpose, MaxPool...) ->
// QuantizeLinear with the same scale and zero point: the ops run on the quantised values.
Status fold_qdq_moves(Graph& g, OptimizerReport* report);
// A float16 model computes in float32 (run by optimize_graph for CPU-only sessions while the flag
// cpu.float16_in_float32 is on). The CPU has no float16 arithmetic kernels of its own: each
// float16 node would widen its inputs, run its float32 kernel in plain layouts and round its
// outputs back (backends/cpu/widened_kernel.h). Instead every float16 value becomes float32
// (constants widened once: the session holds a float32 copy beside the model's float16 one)
// except the graph's inputs and outputs and what the model's Casts to float16 write; a Cast joins
// each float16 edge, so the graph's interface is unchanged. What the graph computes between its
// edges is no longer rounded to float16 after each node (ONNX Runtime's CPU provider computes such
// models in float32 too): CastLike to a float16 target, QuantizeLinear's float16 division and
// Range's float16 arithmetic included; the model's Casts to float16 still round. Graphs with
// If/Loop/Scan or BitCast, with float16 sequences or optionals at their edges, or with float16
// inputs that carry initializers are left as they are.
Status widen_float16(Graph& g, OptimizerReport* report);
Status fold_batch_norm_into_conv(Graph& g, OptimizerReport* report);
Status fuse_hardswish(Graph& g, OptimizerReport* report);
// x * Sigmoid(x) becomes one Swish node (alpha 1).
Status fuse_swish(Graph& g, OptimizerReport* report);
// The opset-13 decomposition of LayerNormalization over the last axis (ReduceMean, Sub, Pow 2,
// ReduceMean, Add eps, Sqrt, Div, Mul scale, Add bias) becomes one LayerNormalization node.
Status fuse_layer_norm(Graph& g, OptimizerReport* report);
// Reshape(x, [0, G, -1]) -> InstanceNormalization (G scales and biases) -> Reshape(., Shape(x))
// becomes GroupNormalization(x) with num_groups G and the per-group scale and bias.
Status fuse_group_norm(Graph& g, OptimizerReport* report);
// GELU's erf decomposition, x * (erf(x / sqrt 2) + 1) * 0.5, becomes one Gelu node.
Status fuse_gelu(Graph& g, OptimizerReport* report);
// MatMul by constant 2-D float32 weights, + a constant bias of one value per column, then
// optionally Relu or Gelu, becomes one FusedMatMul node.
Status fuse_matmul_epilogue(Graph& g, OptimizerReport* report);
Status fuse_conv_activation(Graph& g, OptimizerReport* report);
// An inference BatchNormalization and its only reader, a Relu, become one
// FusedBatchNormalization: run by optimize_graph for CPU-only sessions (the device backends have
// no kernel for it).
Status fuse_batch_norm_activation(Graph& g, OptimizerReport* report);
Status split_key_transposes(Graph& g, OptimizerReport* report);
// Readers of an Identity's output read its input instead, and the Identity goes (one whose output
// is a graph output stays).
Status bypass_identities(Graph& g, OptimizerReport* report);
Status remove_dead_nodes(Graph& g, OptimizerReport* report);

// The shape-free passes after constant folding, in the order above.
Status optimize_graph(Graph& g, OptimizerReport* report);
// Constant folding, then optimize_graph.
Status optimize_graph(Graph& g, const std::vector<Backend*>& backends, const FlagValues& flags,
                      OptimizerReport* report);

// The shape-aware passes on one plan's graph: the attention matches found at session creation
// (fused where `runnable` accepts the Attention node, and the mha fastpath flag is on), then
// residual Adds into convolutions.
void optimize_plan_graph(PlanGraph& pg, const std::vector<AttentionMatch>& attention,
                         const std::function<bool(const OpContext&)>& runnable);

}  // namespace tern
