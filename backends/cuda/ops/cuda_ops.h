// Helpers of the CUDA kernel factories (backends/cuda/ops/*.cpp).
#pragma once

#include <string>

#include "backends/cuda/cuda_common.h"
#include "ops/common/op_utils.h"

namespace tern::cuda {

// A launch's status, named after the kernel.
inline Status launched(cudaError_t e, const char* kernel) {
  return check(e, kernel);
}

// Row-major element strides of a shape.
Shape contiguous_strides(const Shape& s);
// The broadcast description of y = f(a, b) (shapes numpy-broadcast to y), or UNSUPPORTED past
// kMaxDims dims.
Expected<Broadcast> make_broadcast(const Shape& a, const Shape& b, const Shape& y);
// A strided-copy description from an output shape, source strides and offset.
Expected<Strided> make_strided(const Shape& out, const Shape& strides, int64_t offset);

// The dtype's kernel element, or UNSUPPORTED naming the op.
Expected<Elem> elem_for(const OpContext& ctx, DType t, const char* what);

// A float32 constant input's host values (scalars and small vectors read at prepare time).
Expected<float> constant_scalar(const OpContext& ctx, size_t i);

}  // namespace tern::cuda
