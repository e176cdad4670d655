// Tern's own single-precision GEMM on panel-packed B: B (K x N) is packed into panels of 16
// columns, [ceil(N/16)][K][16] with the columns past N zero, and a tile of up to 6 rows of A x 4
// panels (AVX-512; 6 x 1 on AVX2; plain loops elsewhere) stays in registers across all of K, each
// A element broadcast into the FMAs. Small tiles keep two accumulator sets over even and odd k to
// hide the FMA latency. Each output element is summed in one fixed order whatever the tiling, so
// results do not depend on how callers split the work.
//
// The kernels that multiply by constant weights pack them once per session (packed_gemm.cpp);
// attention packs Kᵀ and V per head at run time (kernels/attention.cpp).
#pragma once

#include <cstdint>

#include "backends/cpu/vec/vec.h"

namespace tern::panel {

constexpr int64_t kPanel = 16;  // columns per panel
constexpr int kTileRows = 6;    // rows of A per tile

// Floats the packed form of a K x N matrix takes.
inline int64_t packed_floats(int64_t k, int64_t n) {
  return (n + kPanel - 1) / kPanel * k * kPanel;
}
// Packs B, whose element (k, n) is b[k * k_stride + n * n_stride], into `out`
// (packed_floats(k, n) floats, 64-byte aligned).
void pack(const float* b, int64_t k, int64_t n, int64_t k_stride, int64_t n_stride, float* out);

// What a tile applies before it stores: C = alpha * (A B) + bias (one value per column; null:
// none) + Z (a residual of C's shape, row stride ldz; null: none), then Relu when asked.
struct Epilogue {
  const float* bias = nullptr;  // at column 0
  float alpha = 1.0f;
  bool relu = false;
  const float* z = nullptr;  // at row 0, column 0
  int64_t ldz = 0;
};

// C[r0:r1, 16*p0 : min(16*p1, n)] of C = A B for A (rows x k, row stride lda) and packed B (k x n),
// C with row stride ldc, on the calling thread, with the tile kernels of `isa`.
void multiply(CpuIsa isa, const float* a, int64_t lda, const float* packed, int64_t k, int64_t n,
              float* c, int64_t ldc, const Epilogue& e, int64_t r0, int64_t r1, int64_t p0,
              int64_t p1);

// Panels one tile of `isa` covers: work split across threads in multiples of it.
int64_t panels_per_tile(CpuIsa isa);

}  // namespace tern::panel
