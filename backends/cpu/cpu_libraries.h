// What the CPU backend was built with, for tern_config_show and the availability queries.
#pragma once

#include <cstdint>
#include <string>

namespace tern {

// Version numbers of the libraries the CPU backend runs on, -1 when not built: oneDNN's
// major*10000 + minor*100 + patch (20603), OpenBLAS's likewise, OpenMP's _OPENMP (201511).
int64_t onednn_version();
int64_t openblas_version();
int64_t openmp_version();
// The libraries with their versions and configurations, "; " between them.
std::string cpu_library_report();
// Whether oneDNN runs bfloat16 convolutions and matmuls on the CPU's own bf16 instructions
// (AVX-512 BF16 or AMX, under cpu.max_capability); false without oneDNN. Call after the CPU
// backend is made: the first query fixes oneDNN's ISA cap.
bool onednn_native_bf16();
// Whether oneDNN's uint8 x int8 kernels sum exactly in int32 here (VNNI under the cap; without it
// they saturate 16-bit pair sums). Same call-after-the-backend rule.
bool onednn_int8_vnni();

}  // namespace tern
