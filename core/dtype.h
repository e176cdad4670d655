// Element types. Values are ONNX's TensorProto.DataType numbers, the same as tern_dtype.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tern {

enum class DType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kBFloat16 = 16,
  // The 8-, 4- and 2-bit types of ONNX's quantization ops. Inside Tern every element of these
  // takes one byte (4- and 2-bit values unpacked, in the low bits); files pack them.
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUInt4 = 21,
  kInt4 = 22,
  kFloat4E2M1 = 23,
  kFloat8E8M0 = 24,
  kUInt2 = 25,
  kInt2 = 26,
  // Not element types: the kinds of value a graph passes besides tensors (ONNX's sequence and
  // optional types). Such a value is a rank-0 Tensor whose payload holds the elements
  // (Tensor::sequence, Tensor::optional). Never in files as constants, never in tern_dtype.
  kSequence = 0x1001,
  kOptional = 0x1002,
};

// The element types this build has kernels for: bit N for the dtype numbered N. Every type,
// except in a selective build given TERN_SELECTED_DTYPES or ONNX models (README, mobile). The
// generated registration (register_ops.cpp) defines it, so a selective library linked from the
// same objects has its own, and link-time optimisation folds it into the kernels' dtype dispatch
// (ops/common/op_utils.h): the other types' instantiations are dropped.
extern const uint64_t kBuiltDTypes;
// False for a tensor dtype a selective build left out (values that are not tensors: true).
[[gnu::always_inline]] inline bool dtype_built(DType t, uint64_t built = kBuiltDTypes) {
  const auto v = static_cast<uint32_t>(t);
  return v == 0 || v >= 64 || ((built >> v) & 1) != 0;
}

// True for the values listed above other than kUndefined.
bool dtype_is_valid(int32_t value);
// True for the types of tern_dtype in the C API (float32 ... uint64, bfloat16).
bool dtype_in_c_api(int32_t value);
// kSequence or kOptional: a value that is not a tensor.
inline bool dtype_is_composite(DType t) {
  return t == DType::kSequence || t == DType::kOptional;
}
// Bytes per element in memory; 0 for kUndefined. kString elements are std::string objects.
size_t dtype_size(DType t);
// Bits per element in files (4 and 2 for the packed types, 8 * dtype_size otherwise).
int dtype_file_bits(DType t);
// "float32", "int64", ...; "undefined(N)" for values outside the enum.
const char* dtype_name(DType t);
bool dtype_is_float(DType t);      // float32/64, float16, bfloat16
bool dtype_is_low_float(DType t);  // the float8 and float4 types
bool dtype_is_signed_int(DType t);
bool dtype_is_unsigned_int(DType t);  // bool excluded

template <class T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kFloat32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::kFloat64;
};
template <>
struct DTypeOf<int8_t> {
  static constexpr DType value = DType::kInt8;
};
template <>
struct DTypeOf<uint8_t> {
  static constexpr DType value = DType::kUInt8;
};
template <>
struct DTypeOf<int16_t> {
  static constexpr DType value = DType::kInt16;
};
template <>
struct DTypeOf<uint16_t> {
  static constexpr DType value = DType::kUInt16;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::kInt32;
};
template <>
struct DTypeOf<uint32_t> {
  static constexpr DType value = DType::kUInt32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kInt64;
};
template <>
struct DTypeOf<uint64_t> {
  static constexpr DType value = DType::kUInt64;
};
template <>
struct DTypeOf<bool> {
  static constexpr DType value = DType::kBool;
};

}  // namespace tern
