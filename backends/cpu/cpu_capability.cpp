// CPU vector capability detection, with PyTorch's names.
#include "backends/cpu/cpu_backend.h"

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#include <sys/prctl.h>
#endif

namespace tern {

const char* cpu_capability() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    return "AVX512";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "AVX2";
  return "NO AVX";
#elif defined(__aarch64__) && defined(__linux__)
#ifndef HWCAP_SVE
#define HWCAP_SVE (1 << 22)
#endif
#ifndef PR_SVE_GET_VL
#define PR_SVE_GET_VL 51
#endif
  if (getauxval(AT_HWCAP) & HWCAP_SVE) {
    int vl = prctl(PR_SVE_GET_VL);
    if (vl > 0 && (vl & 0xffff) * 8 >= 256) return "SVE256";
  }
  return "DEFAULT";
#elif defined(__powerpc64__)
  return "VSX";
#elif defined(__s390x__)
  return "Z VECTOR";
#else
  return "DEFAULT";
#endif
}

}  // namespace tern
