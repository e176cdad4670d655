// The float8 / float4 / e8m0 element types of ONNX (stored one per byte): decoding to float and
// encoding with round-to-nearest-even, saturating or not as ONNX's Cast defines.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tern {

// Decodes one element of a low-precision float type.
float low_float_to_float(DType t, uint8_t code);
// Encodes x. saturate: out-of-range values (and infinities) become the largest finite value of
// the same sign; otherwise they become infinity where the type has one, else NaN.
uint8_t float_to_low_float(DType t, float x, bool saturate = true);
// The largest finite value of a low-precision float type.
float low_float_max(DType t);

}  // namespace tern
