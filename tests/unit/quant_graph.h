// Helpers of the int8 suites: one-value scales and zero points, and QuantizeLinear ->
// DequantizeLinear pairs in test graphs (values rounded to a quantised grid, as QDQ models write
// them).
#pragma once

#include <string>

#include "core/tensor.h"
#include "graph_builder.h"

namespace tern_test {

inline tern::Tensor scalar_f32(float v) {
  tern::Tensor t = tern::Tensor::allocate(tern::DType::kFloat32, {}).value();
  t.data<float>()[0] = v;
  return t;
}

// A uint8 or int8 zero point.
inline tern::Tensor scalar_q(tern::DType dt, int64_t v) {
  tern::Tensor t = tern::Tensor::allocate(dt, {}).value();
  if (dt == tern::DType::kUInt8) {
    t.data<uint8_t>()[0] = static_cast<uint8_t>(v);
  } else {
    t.data<int8_t>()[0] = static_cast<int8_t>(v);
  }
  return t;
}

// DequantizeLinear(QuantizeLinear(v, s, z), s, z); returns its id.
inline int fake_quant(GraphMaker& g, int v, const tern::Tensor& s, const tern::Tensor& z) {
  const std::string at = std::to_string(g.g.nodes.size());
  const int q = g.node("QuantizeLinear", {v, g.constant("qs" + at, s), g.constant("qz" + at, z)});
  return g.node("DequantizeLinear", {q, g.constant("dqs" + at, s), g.constant("dqz" + at, z)});
}

// Ends g with fake_quant(v, s, z), the graph's output; returns its id.
inline int end_with_qdq(GraphMaker& g, int v, const tern::Tensor& s, const tern::Tensor& z) {
  const int y = fake_quant(g, v, s, z);
  g.g.outputs.push_back(y);
  return y;
}

}  // namespace tern_test
