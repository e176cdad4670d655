// CPU vector capability: what the CPU has (cpuid / auxv), and what Tern may use once the
// cpu.max_capability flag (env TERN_CPU_CAPABILITY) caps it. Names are PyTorch's.
#pragma once

#include <cstdint>
#include <string>

#include "backends/cpu/vec/vec.h"

namespace tern {

// What the CPU supports: "AVX512" | "AVX2" | "NO AVX" on x86; "SVE256" | "DEFAULT" on aarch64;
// "VSX" on POWER; "Z VECTOR" on s390x; "DEFAULT" elsewhere.
const char* detected_cpu_capability();
// The capability after the cap (the cpu.max_capability flag's enum value; 0 = auto, no cap).
// A cap above what the CPU has changes nothing; a cap naming another architecture's ISA, or
// DEFAULT / NO AVX, leaves the portable code only.
const char* effective_cpu_capability(int64_t cap);
// The ISA level Tern's own kernels dispatch to under that cap.
CpuIsa effective_cpu_isa(int64_t cap);

// The CPU's instructions for int8 and reduced-precision arithmetic (cpuid / auxv), whatever the
// cap: what `tern info` reports and what the int8 / bfloat16 kernels and conversions look for.
struct CpuFeatures {
  // x86-64
  bool f16c = false;         // float16 <-> float32 conversions (every AVX2 CPU)
  bool avx512_vnni = false;  // int8 dot products, 512-bit (VPDPBUSD)
  bool avx_vnni = false;     // the same, 256-bit (AVX-VNNI)
  bool avx512_bf16 = false;  // bfloat16 dot products and conversions (VDPBF16PS, VCVTNEPS2BF16)
  bool avx512_fp16 = false;  // float16 arithmetic
  bool amx_bf16 = false, amx_int8 = false;  // tile matrix multiply
  // aarch64
  bool neon_dotprod = false;  // int8 dot products (SDOT / UDOT)
  bool neon_i8mm = false;     // int8 matrix multiply (SMMLA)
  bool neon_bf16 = false;     // bfloat16 dot products (BFDOT / BFMMLA)
  bool neon_fp16 = false;     // float16 arithmetic
};
const CpuFeatures& cpu_features();
// The features present, by their usual names ("AVX512_VNNI AVX512_BF16"), or "none".
std::string cpu_feature_names();

}  // namespace tern
