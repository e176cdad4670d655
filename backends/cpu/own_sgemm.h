// Tern's own single-precision GEMM for builds without OpenBLAS (TERN_MINIMAL, mobile): packed
// panels and a register-tiled micro-kernel, NEON intrinsics on aarch64 and portable loops that the
// compiler vectorises elsewhere.
//
// C[m0:m1, n0:n1] = alpha * op(A) * op(B) + beta * C over a sub-block of the GemmShape, so the
// threaded driver in cpu_gemm.cpp can split the work. Every element is summed in one fixed order
// (K in blocks of kGemmKc, each block front to back) whatever the sub-block it lies in: results do
// not depend on how the driver splits M and N, hence not on the thread count.
#pragma once

#include <cstdint>

#include "backends/cpu/cpu_gemm.h"

namespace tern {

constexpr int64_t kGemmKc = 256;

void own_sgemm(const GemmShape& s, float alpha, const float* a, const float* b, float beta,
               float* c, int64_t m0, int64_t m1, int64_t n0, int64_t n1);

// "own_sgemm(neon)" or "own_sgemm(portable)": which micro-kernel own_sgemm uses in this build.
const char* own_sgemm_kernel_name();

}  // namespace tern
