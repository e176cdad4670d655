#include "backends/cpu/cpu_libraries.h"

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

bool onednn_available() {
#if defined(TERN_HAVE_ONEDNN)
  return true;
#else
  return false;
#endif
}

bool openblas_available() {
#if defined(TERN_HAVE_OPENBLAS)
  return true;
#else
  return false;
#endif
}

bool openmp_available() {
#if defined(TERN_HAVE_OPENMP)
  return true;
#else
  return false;
#endif
}

std::string cpu_library_report() {
  std::string r;
#if defined(TERN_HAVE_ONEDNN)
  const dnnl_version_t* v = dnnl_version();
  r += str_cat("  oneDNN ", v->major, ".", v->minor, ".", v->patch, " (cpu runtime ",
               v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other", ")\n");
#else
  r += "  oneDNN: not built\n";
#endif
#if defined(TERN_HAVE_OPENBLAS)
  r += str_cat("  OpenBLAS: ", openblas_get_config(), "\n");
#else
  r += "  OpenBLAS: not built\n";
#endif
#if defined(TERN_HAVE_OPENMP)
  r += str_cat("  OpenMP ", _OPENMP, "\n");
#else
  r += "  OpenMP: not built\n";
#endif
  return r;
}

}  // namespace tern
