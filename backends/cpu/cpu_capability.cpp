// CPU vector capability detection, with PyTorch's names, and the cap applied to it.
#include "backends/cpu/cpu_capability.h"

#include <cstring>

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#include <sys/prctl.h>
#endif

namespace tern {

namespace {
// Order of the cpu.max_capability choices (core/flags.cpp).
enum Cap { kAuto = 0, kAvx512, kAvx2, kNoAvx, kDefault, kVsx, kZVector, kSve256 };
}  // namespace

const char* detected_cpu_capability() {
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

CpuIsa effective_cpu_isa(int64_t cap) {
#if defined(__x86_64__)
  const char* have = detected_cpu_capability();
  CpuIsa isa = std::strcmp(have, "AVX512") == 0 ? CpuIsa::kAvx512
               : std::strcmp(have, "AVX2") == 0 ? CpuIsa::kAvx2
                                                : CpuIsa::kScalar;
  CpuIsa limit = cap == kAuto || cap == kAvx512 ? CpuIsa::kAvx512
                 : cap == kAvx2                 ? CpuIsa::kAvx2
                                                : CpuIsa::kScalar;
  return static_cast<int>(isa) < static_cast<int>(limit) ? isa : limit;
#else
  (void)cap;
  return CpuIsa::kScalar;  // only portable code on other architectures so far
#endif
}

const char* effective_cpu_capability(int64_t cap) {
#if defined(__x86_64__)
  switch (effective_cpu_isa(cap)) {
    case CpuIsa::kAvx512:
      return "AVX512";
    case CpuIsa::kAvx2:
      return "AVX2";
    case CpuIsa::kScalar:
      return "NO AVX";
  }
  return "NO AVX";
#else
  const char* have = detected_cpu_capability();
  if (cap == kAuto) return have;
  if (std::strcmp(have, "SVE256") == 0 && cap == kSve256) return have;
  if (std::strcmp(have, "VSX") == 0 && cap == kVsx) return have;
  if (std::strcmp(have, "Z VECTOR") == 0 && cap == kZVector) return have;
  return "DEFAULT";
#endif
}

}  // namespace tern
