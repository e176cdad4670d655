// Einsum (ONNX opset 12): parsing, shape inference, the contraction-path search behind the
// opt_einsum flags, and the naive reference. Letters only (no ellipsis, no repeated letter within
// one operand).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/kernel.h"

namespace tern::ops {

struct EinsumSpec {
  std::vector<std::string> inputs;  // subscripts per operand
  std::string output;
  int64_t dim[128] = {};  // size per letter
};

Expected<EinsumSpec> parse_einsum(const std::string& equation, const std::vector<Shape>& shapes);

enum class EinsumStrategy { kLeftToRight, kGreedy, kOptimal };

// A contraction order: each step contracts two operands (ids: 0..n-1 are the inputs, n, n+1, ...
// the results in step order). cost is the multiply-add count of the whole path under the
// usual model (product of the sizes of every letter a step touches).
struct EinsumPath {
  std::vector<std::pair<int, int>> steps;
  double cost = 0;
  std::string describe() const;  // "(1,2)(0,3)"
};

// opt_einsum's choice: disabled -> left to right; "auto" -> optimal up to 4 operands, else
// greedy; "greedy"; "optimal".
EinsumStrategy einsum_strategy(bool enabled, int64_t strategy_flag, size_t operands);
EinsumPath einsum_path(const EinsumSpec& spec, EinsumStrategy strategy);

void einsum_reference(const EinsumSpec& spec, const std::vector<const float*>& in, float* out);

}  // namespace tern::ops
