// A float matrix transposed between two strided places: the plain (NCHW) <-> channels-last
// conversions inside Tern's own convolution kernels.
#pragma once

#include <cstdint>

namespace tern {

// dst[c * ldd + r] = src[r * lds + c] for r < rows, c < cols: 8 x 8 blocks in AVX2 registers
// (x86-64 CPUs with AVX2; callers check), the edges one by one.
void transpose_f32(const float* src, int64_t lds, int64_t rows, int64_t cols, float* dst,
                   int64_t ldd);

}  // namespace tern
