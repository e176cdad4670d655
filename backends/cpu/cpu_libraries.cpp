#include "backends/cpu/cpu_libraries.h"

#include <cstdio>

#include "core/status.h"

#if defined(TERN_HAVE_ONEDNN)
#include <dnnl.h>
#endif
#if defined(TERN_HAVE_OPENBLAS)
#include <cblas.h>
#endif
#if defined(TERN_HAVE_OPENMP)
#include <omp.h>
#endif

namespace tern {

bool onednn_native_bf16() {
#if defined(TERN_HAVE_ONEDNN)
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  return isa == dnnl_cpu_isa_avx512_core_bf16 || isa == dnnl_cpu_isa_avx512_core_amx;
#else
  return false;
#endif
}

bool onednn_int8_vnni() {
#if defined(TERN_HAVE_ONEDNN)
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  return isa == dnnl_cpu_isa_avx512_core_vnni || isa == dnnl_cpu_isa_avx512_core_bf16 ||
         isa == dnnl_cpu_isa_avx512_core_amx || isa == dnnl_cpu_isa_avx2_vnni;
#else
  return false;
#endif
}

int64_t onednn_version() {
#if defined(TERN_HAVE_ONEDNN)
  const dnnl_version_t* v = dnnl_version();
  return int64_t{v->major} * 10000 + v->minor * 100 + v->patch;
#else
  return -1;
#endif
}

int64_t openblas_version() {
#if defined(TERN_HAVE_OPENBLAS)
  // "OpenBLAS 0.3.21 ...": the version is the second word of the configuration string.
  int major = 0, minor = 0, patch = 0;
  if (std::sscanf(openblas_get_config(), "OpenBLAS %d.%d.%d", &major, &minor, &patch) >= 2) {
    return int64_t{major} * 10000 + minor * 100 + patch;
  }
  return 0;
#else
  return -1;
#endif
}

int64_t openmp_version() {
#if defined(TERN_HAVE_OPENMP)
  return _OPENMP;
#else
  return -1;
#endif
}

std::string cpu_library_report() {
  std::string r;
#if defined(TERN_HAVE_ONEDNN)
  const dnnl_version_t* v = dnnl_version();
  r += str_cat("oneDNN ", v->major, ".", v->minor, ".", v->patch, " (cpu runtime ",
               v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other", ")");
#else
  r += "oneDNN: not built";
#endif
#if defined(TERN_HAVE_OPENBLAS)
  r += str_cat("; ", openblas_get_config());
#else
  r += "; OpenBLAS: not built";
#endif
#if defined(TERN_HAVE_OPENMP)
  r += str_cat("; OpenMP ", _OPENMP);
#else
  r += "; OpenMP: not built";
#endif
  return r;
}

}  // namespace tern
