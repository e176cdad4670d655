// FusedConv's epilogue: the element-wise steps a convolution can apply to its output in place
// ("activations" and "activation_params" attributes), and recognising them in a graph.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/graph.h"

namespace tern {

// An element-wise step a FusedConv epilogue can apply: "Relu", "LeakyRelu" (alpha), "Clip" (min,
// max), "Sigmoid", "HardSigmoid" (alpha, beta), "HardSwish", "Tanh", "Affine" (scale, shift:
// a Mul or Add by a float scalar constant).
struct FusedActivation {
  std::string kind;
  std::vector<float> params;
  int input = 0;            // the node's input that carries the data
  size_t operand_rank = 0;  // rank of the constant operand (Affine), which broadcasts
};
// The step node n computes, when it is one of those with constant parameters.
std::optional<FusedActivation> activation_of(const Graph& g, const Node& n);

// Appends a step to FusedConv's "activations" and "activation_params" attributes (an Affine
// right after an Affine merges into it).
void append_fused_activation(Node& conv, const FusedActivation& act);
// Whether a FusedConv already has an epilogue.
bool has_epilogue(const Node& conv);

}  // namespace tern
