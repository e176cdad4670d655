// Helpers shared by op schemas and reference kernels: axes, broadcasting, dtype dispatch.
#pragma once

#include <cstdint>
#include <vector>

#include "core/kernel.h"
#include "core/op_registry.h"

namespace tern::ops {

// Maps axis from [-rank, rank) to [0, rank); `what` names it in the error.
Expected<int64_t> normalize_axis(int64_t axis, int64_t rank, const char* what = "axis");
// Numpy-style broadcast of two shapes.
Expected<Shape> broadcast_shapes(const Shape& a, const Shape& b);
// Integer values of a known int32/int64 tensor.
std::vector<int64_t> read_ints(const Tensor& t);
// Output tensor of a known-value shape computation.
Tensor make_int64_tensor(const std::vector<int64_t>& v, Shape shape);

// Calls fn(T{}) for the C++ type of dt; returns false for dtypes outside the list.
template <class Fn>
bool visit_numeric(DType dt, Fn&& fn) {
  switch (dt) {
    case DType::kFloat32:
      fn(float{});
      return true;
    case DType::kFloat64:
      fn(double{});
      return true;
    case DType::kInt8:
      fn(int8_t{});
      return true;
    case DType::kUInt8:
      fn(uint8_t{});
      return true;
    case DType::kInt16:
      fn(int16_t{});
      return true;
    case DType::kUInt16:
      fn(uint16_t{});
      return true;
    case DType::kInt32:
      fn(int32_t{});
      return true;
    case DType::kUInt32:
      fn(uint32_t{});
      return true;
    case DType::kInt64:
      fn(int64_t{});
      return true;
    case DType::kUInt64:
      fn(uint64_t{});
      return true;
    default:
      return false;
  }
}

template <class Fn>
bool visit_float(DType dt, Fn&& fn) {
  switch (dt) {
    case DType::kFloat32:
      fn(float{});
      return true;
    case DType::kFloat64:
      fn(double{});
      return true;
    default:
      return false;
  }
}

// Broadcast iteration: the output is walked as rows of `inner` contiguous elements; each input
// advances by its own stride (0 when broadcast) along the row. Adjacent dims are merged so a
// per-channel or scalar broadcast still gets long rows.
struct BroadcastRows {
  int64_t rows = 0, inner = 0;
  std::vector<int64_t> out_dims;                 // merged dims, last one is `inner`
  std::vector<std::vector<int64_t>> in_strides;  // per input, per merged dim
  // Offset of each input at the start of row r.
  void row_offsets(int64_t r, int64_t* offsets) const;
};
BroadcastRows plan_broadcast(const Shape& out, const std::vector<Shape>& ins);

Status dtype_error(const OpContext& ctx, size_t input, const char* allowed);
Status require_same_dtype(const OpContext& ctx, size_t a, size_t b);

}  // namespace tern::ops
