// CPU vector capability detection, with PyTorch's names, and the cap applied to it.
#include "backends/cpu/cpu_capability.h"

#include <cstring>

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#include <sys/prctl.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
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

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = [] {
    CpuFeatures c;
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, cx = 0, d = 0;
    __builtin_cpu_init();
    c.f16c = __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &cx, &d) && (cx >> 29 & 1);
    // AVX-512 and AMX only count with their register state enabled (AVX512 detected above
    // checks the OS through the compiler's own test).
    const bool avx512 = std::strcmp(detected_cpu_capability(), "AVX512") == 0;
    if (__get_cpuid_count(7, 0, &a, &b, &cx, &d)) {
      c.avx512_vnni = avx512 && (cx >> 11 & 1);
      c.avx512_fp16 = avx512 && (d >> 23 & 1);
      c.amx_bf16 = d >> 22 & 1;
      c.amx_int8 = d >> 25 & 1;
    }
    if (__get_cpuid_count(7, 1, &a, &b, &cx, &d)) {
      c.avx_vnni = __builtin_cpu_supports("avx2") && (a >> 4 & 1);
      c.avx512_bf16 = avx512 && (a >> 5 & 1);
    }
#elif defined(__aarch64__) && defined(__linux__)
    const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    c.neon_fp16 = hw >> 9 & 1;      // HWCAP_ASIMDHP
    c.neon_dotprod = hw >> 20 & 1;  // HWCAP_ASIMDDP
    c.neon_i8mm = hw2 >> 13 & 1;    // HWCAP2_I8MM
    c.neon_bf16 = hw2 >> 14 & 1;    // HWCAP2_BF16
#endif
    return c;
  }();
  return f;
}

std::string cpu_feature_names() {
  const CpuFeatures& f = cpu_features();
  const std::pair<bool, const char*> all[] = {{f.f16c, "F16C"},
                                              {f.avx512_vnni, "AVX512_VNNI"},
                                              {f.avx_vnni, "AVX_VNNI"},
                                              {f.avx512_bf16, "AVX512_BF16"},
                                              {f.avx512_fp16, "AVX512_FP16"},
                                              {f.amx_bf16, "AMX_BF16"},
                                              {f.amx_int8, "AMX_INT8"},
                                              {f.neon_dotprod, "DOTPROD"},
                                              {f.neon_i8mm, "I8MM"},
                                              {f.neon_bf16, "BF16"},
                                              {f.neon_fp16, "FP16"}};
  std::string out;
  for (const auto& [have, name] : all) {
    if (!have) continue;
    if (!out.empty()) out += ' ';
    out += name;
  }
  return out.empty() ? "none" : out;
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
