// CPU vector capability: what the CPU has (cpuid / auxv), and what Tern may use once the
// cpu.max_capability flag (env TERN_CPU_CAPABILITY) caps it. Names are PyTorch's.
#pragma once

#include <cstdint>

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

}  // namespace tern
