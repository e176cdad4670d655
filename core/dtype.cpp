#include "core/dtype.h"

#include <string>

namespace tern {

bool dtype_is_valid(int32_t v) {
  return (v >= 1 && v <= 13) || (v >= 16 && v <= 26);
}

bool dtype_in_c_api(int32_t v) {
  return (v >= 1 && v <= 13) || v == 16;
}

int dtype_file_bits(DType t) {
  switch (t) {
    case DType::kUInt4:
    case DType::kInt4:
    case DType::kFloat4E2M1:
      return 4;
    case DType::kUInt2:
    case DType::kInt2:
      return 2;
    default:
      return static_cast<int>(dtype_size(t) * 8);
  }
}

bool dtype_is_low_float(DType t) {
  switch (t) {
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
    case DType::kFloat4E2M1:
    case DType::kFloat8E8M0:
      return true;
    default:
      return false;
  }
}

bool dtype_is_signed_int(DType t) {
  return t == DType::kInt8 || t == DType::kInt16 || t == DType::kInt32 || t == DType::kInt64 ||
         t == DType::kInt4 || t == DType::kInt2;
}

bool dtype_is_unsigned_int(DType t) {
  return t == DType::kUInt8 || t == DType::kUInt16 || t == DType::kUInt32 || t == DType::kUInt64 ||
         t == DType::kUInt4 || t == DType::kUInt2;
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFloat32:
    case DType::kInt32:
    case DType::kUInt32:
      return 4;
    case DType::kFloat64:
    case DType::kInt64:
    case DType::kUInt64:
      return 8;
    case DType::kInt16:
    case DType::kUInt16:
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kBool:
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
    case DType::kUInt4:
    case DType::kInt4:
    case DType::kFloat4E2M1:
    case DType::kFloat8E8M0:
    case DType::kUInt2:
    case DType::kInt2:
      return 1;
    case DType::kString:
      return sizeof(std::string);
    case DType::kUndefined:
    case DType::kSequence:  // no elements of their own: a payload (core/tensor.h)
    case DType::kOptional:
      return 0;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kSequence:
      return "sequence";
    case DType::kOptional:
      return "optional";
    case DType::kFloat32:
      return "float32";
    case DType::kUInt8:
      return "uint8";
    case DType::kInt8:
      return "int8";
    case DType::kUInt16:
      return "uint16";
    case DType::kInt16:
      return "int16";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kString:
      return "string";
    case DType::kBool:
      return "bool";
    case DType::kFloat16:
      return "float16";
    case DType::kFloat64:
      return "float64";
    case DType::kUInt32:
      return "uint32";
    case DType::kUInt64:
      return "uint64";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat8E4M3FN:
      return "float8e4m3fn";
    case DType::kFloat8E4M3FNUZ:
      return "float8e4m3fnuz";
    case DType::kFloat8E5M2:
      return "float8e5m2";
    case DType::kFloat8E5M2FNUZ:
      return "float8e5m2fnuz";
    case DType::kUInt4:
      return "uint4";
    case DType::kInt4:
      return "int4";
    case DType::kFloat4E2M1:
      return "float4e2m1";
    case DType::kFloat8E8M0:
      return "float8e8m0";
    case DType::kUInt2:
      return "uint2";
    case DType::kInt2:
      return "int2";
    case DType::kUndefined:
      return "undefined";
  }
  return "undefined";
}

bool dtype_is_float(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 ||
         t == DType::kBFloat16;
}

}  // namespace tern
