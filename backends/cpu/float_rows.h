// Rows of float16 / bfloat16 tensors read as float32 and written back from float32, for CPU
// kernels that keep their arithmetic in float32 whatever the tensors' float type (LinearAttention,
// CausalConvWithState, Attention). Round to nearest even on the way back.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/half.h"
#include "core/tensor.h"

namespace tern {

// n elements of the float32/float16/bfloat16 tensor t from `offset`, as float32: a pointer into t
// when it is float32, else the elements widened into buf (n floats).
inline const float* read_f32(const Tensor& t, int64_t offset, int64_t n, float* buf) {
  if (t.dtype() == DType::kFloat32) return t.data<float>() + offset;
  const uint16_t* s = t.data<uint16_t>() + offset;
  if (t.dtype() == DType::kFloat16) {
    for (int64_t i = 0; i < n; ++i) buf[i] = half_to_float(s[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) buf[i] = bfloat16_to_float(s[i]);
  }
  return buf;
}

// Stores n float32 values into the float32/float16/bfloat16 tensor t from `offset`.
inline void write_f32(const float* x, int64_t n, Tensor& t, int64_t offset) {
  if (t.dtype() == DType::kFloat32) {
    std::copy(x, x + n, t.data<float>() + offset);
    return;
  }
  uint16_t* d = t.data<uint16_t>() + offset;
  if (t.dtype() == DType::kFloat16) {
    for (int64_t i = 0; i < n; ++i) d[i] = float_to_half(x[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = float_to_bfloat16(x[i]);
  }
}

}  // namespace tern
