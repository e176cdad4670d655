// Every second float of a row into a contiguous one: the columns a stride-2 convolution reads,
// packed by Tern's own convolution kernels.
#pragma once

#include <cstdint>

namespace tern {

// dst[j] = src[2 j] for j < n, src holding `avail` readable floats (2 n - 1 at least): 16 floats
// into 8 at a time in AVX2 registers (x86-64 CPUs with AVX2; callers check), the rest one by one.
void copy_stride2_f32(const float* src, int64_t avail, int64_t n, float* dst);

}  // namespace tern
