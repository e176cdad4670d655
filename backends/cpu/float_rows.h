// Rows of float16 / bfloat16 tensors read as float32 and written back from float32, for CPU
// kernels that keep their arithmetic in float32 whatever the tensors' float type (LinearAttention,
// CausalConvWithState, Attention) or convert around a float32 kernel (widened_kernel.h). Round to
// nearest even on the way back.
#pragma once

#include <algorithm>
#include <cstdint>

#include "backends/cpu/vec/vec.h"
#include "core/half.h"
#include "core/tensor.h"

namespace tern {

// n float16 (`from` kFloat16) or bfloat16 elements as float32, and back; through v's vector
// conversions when given, else the portable ones.
inline void widen_row(const VecOps* v, DType from, const uint16_t* s, float* d, int64_t n) {
  if (v) {
    (from == DType::kFloat16 ? v->half_to_float : v->bfloat16_to_float)(s, d, n);
  } else if (from == DType::kFloat16) {
    for (int64_t i = 0; i < n; ++i) d[i] = half_to_float(s[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = bfloat16_to_float(s[i]);
  }
}
inline void narrow_row(const VecOps* v, DType to, const float* s, uint16_t* d, int64_t n) {
  if (v) {
    (to == DType::kFloat16 ? v->float_to_half : v->float_to_bfloat16)(s, d, n);
  } else if (to == DType::kFloat16) {
    for (int64_t i = 0; i < n; ++i) d[i] = float_to_half(s[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = float_to_bfloat16(s[i]);
  }
}

// n elements of the float32/float16/bfloat16 tensor t from `offset`, as float32: a pointer into t
// when it is float32, else the elements widened into buf (n floats).
inline const float* read_f32(const Tensor& t, int64_t offset, int64_t n, float* buf) {
  if (t.dtype() == DType::kFloat32) return t.data<float>() + offset;
  widen_row(nullptr, t.dtype(), t.data<uint16_t>() + offset, buf, n);
  return buf;
}

// Stores n float32 values into the float32/float16/bfloat16 tensor t from `offset`.
inline void write_f32(const float* x, int64_t n, Tensor& t, int64_t offset) {
  if (t.dtype() == DType::kFloat32) {
    std::copy(x, x + n, t.data<float>() + offset);
    return;
  }
  narrow_row(nullptr, t.dtype(), x, t.data<uint16_t>() + offset, n);
}

}  // namespace tern
