// Helpers shared by op schemas and reference kernels: axes, broadcasting, dtype dispatch.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "core/half.h"
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

// fn(T{}) for the dtype `dt` of one case of the visitors below, or false where a selective build
// left `dt` out (core/dtype.h, dtype_built): with `dt` a constant the check folds, and link-time
// optimisation drops the instantiations of the types left out.
template <class T, class Fn>
[[gnu::always_inline]] inline bool visit_as(DType dt, Fn& fn) {
  if (!dtype_built(dt)) return false;
  fn(T{});
  return true;
}

// Calls fn(T{}) for the C++ type of dt; returns false for dtypes outside the list.
template <class Fn>
bool visit_numeric(DType dt, Fn&& fn) {
  switch (dt) {
    case DType::kFloat32:
      return visit_as<float>(DType::kFloat32, fn);
    case DType::kFloat64:
      return visit_as<double>(DType::kFloat64, fn);
    case DType::kInt8:
      return visit_as<int8_t>(DType::kInt8, fn);
    case DType::kUInt8:
      return visit_as<uint8_t>(DType::kUInt8, fn);
    case DType::kInt16:
      return visit_as<int16_t>(DType::kInt16, fn);
    case DType::kUInt16:
      return visit_as<uint16_t>(DType::kUInt16, fn);
    case DType::kInt32:
      return visit_as<int32_t>(DType::kInt32, fn);
    case DType::kUInt32:
      return visit_as<uint32_t>(DType::kUInt32, fn);
    case DType::kInt64:
      return visit_as<int64_t>(DType::kInt64, fn);
    case DType::kUInt64:
      return visit_as<uint64_t>(DType::kUInt64, fn);
    default:
      return false;
  }
}

template <class Fn>
bool visit_float(DType dt, Fn&& fn);

// float16 / bfloat16 elements as value types: arithmetic happens in float through the implicit
// conversions, and assigning a float rounds to nearest even.
struct Float16 {
  uint16_t bits = 0;
  Float16() = default;
  Float16(float f) : bits(float_to_half(f)) {}  // NOLINT: implicit on purpose
  operator float() const { return half_to_float(bits); }
};
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) : bits(float_to_bfloat16(f)) {}  // NOLINT: implicit on purpose
  operator float() const { return bfloat16_to_float(bits); }
};
static_assert(sizeof(Float16) == 2 && sizeof(BFloat16) == 2);

// f rounded to the float type t as a tensor of t would store it (float32 and wider: unchanged).
inline float round_to(DType t, float f) {
  if (t == DType::kFloat16) return half_to_float(float_to_half(f));
  if (t == DType::kBFloat16) return bfloat16_to_float(float_to_bfloat16(f));
  return f;
}

template <class T>
inline constexpr bool is_float_like_v =
    std::is_floating_point_v<T> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

// Any numeric element as a double (float16/bfloat16 through float).
template <class T>
double as_double(T v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return static_cast<float>(v);
  } else {
    return static_cast<double>(v);
  }
}
// A double rounded to T (float16/bfloat16 through float).
template <class T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// float32, float64, float16, bfloat16.
template <class Fn>
bool visit_any_float(DType dt, Fn&& fn) {
  switch (dt) {
    case DType::kFloat16:
      return visit_as<Float16>(DType::kFloat16, fn);
    case DType::kBFloat16:
      return visit_as<BFloat16>(DType::kBFloat16, fn);
    default:
      return visit_float(dt, fn);
  }
}

// Every numeric type including float16 and bfloat16 (not bool, string or the 8/4/2-bit types).
template <class Fn>
bool visit_all_numeric(DType dt, Fn&& fn) {
  switch (dt) {
    case DType::kFloat16:
      return visit_as<Float16>(DType::kFloat16, fn);
    case DType::kBFloat16:
      return visit_as<BFloat16>(DType::kBFloat16, fn);
    default:
      return visit_numeric(dt, fn);
  }
}

// Every fixed-width type by element size (for ops that only move elements), strings apart.
template <class Fn>
bool visit_by_size(DType dt, Fn&& fn) {
  if (dt == DType::kString) {
    fn(std::string{});
    return true;
  }
  switch (dtype_size(dt)) {
    case 1:
      fn(uint8_t{});
      return true;
    case 2:
      fn(uint16_t{});
      return true;
    case 4:
      fn(uint32_t{});
      return true;
    case 8:
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
      return visit_as<float>(DType::kFloat32, fn);
    case DType::kFloat64:
      return visit_as<double>(DType::kFloat64, fn);
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

// Row-major element strides of a shape.
Shape contiguous_strides(const Shape& s);

// Walks every index of `shape` in row-major order: fn(flat index, position per dim).
template <class Fn>
void for_each_index(const Shape& shape, Fn&& fn) {
  const int64_t n = numel(shape);
  std::vector<int64_t> pos(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    fn(i, static_cast<const std::vector<int64_t>&>(pos));
    for (size_t d = shape.size(); d-- > 0;) {
      if (++pos[d] < shape[d]) break;
      pos[d] = 0;
    }
  }
}

Status dtype_error(const OpContext& ctx, size_t input, const char* allowed);
// Input `input` is float32, or, for shape inference (any_float), float32, float16 or bfloat16:
// the CPU computes half nodes without kernels of their own in float32 (widened kernels).
Status require_f32_or_half(const OpContext& ctx, size_t input, bool any_float);
// Float tensors of any float type as float32 (a reference computes in float32 or wider, then
// stores back with from_float32).
std::vector<float> to_float32(const Tensor& t);
void from_float32(const std::vector<float>& v, Tensor& t);
// Copies n elements of any type (strings by value).
void copy_elements(DType dt, const void* src, int64_t src_index, void* dst, int64_t dst_index,
                   int64_t n);
// The known value of input i as int64s, or INVALID_MODEL naming it when absent.
Expected<std::vector<int64_t>> input_ints(const OpContext& ctx, size_t i);
Status require_same_dtype(const OpContext& ctx, size_t a, size_t b);

// UNSUPPORTED when the planner gave any input or output a channel-blocked layout: for kernels
// that only read plain tensors.
Status require_plain_layout(const OpContext& ctx);
// A kernel whose output holds its input's bytes unchanged (Reshape, Identity, a Transpose that
// only moves dims of size 1): the planner gives the output the input's buffer where it can
// (Kernel::inplace_input), and the copy is then skipped.
std::unique_ptr<Kernel> make_bytes_copy();

}  // namespace tern::ops
