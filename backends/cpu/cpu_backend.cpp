#include "backends/cpu/cpu_backend.h"

#include <mutex>

#include "core/kernel_registry.h"
#include "core/op_registry.h"

#if defined(TERN_HAVE_OPENMP)
#include <omp.h>
#endif
#if defined(TERN_HAVE_OPENBLAS)
#include <cblas.h>
#endif

namespace tern {

CpuBackend::CpuBackend() {
  static std::once_flag once;
  std::call_once(once, [] { register_cpu_kernels(KernelRegistry::global()); });
}

bool CpuBackend::supports_op(const std::string& op_type) const {
  if (Backend::supports_op(op_type)) return true;
  const OpSchema* s = OpRegistry::global().find(op_type);
  return s && s->reference;
}

Expected<std::unique_ptr<Kernel>> CpuBackend::prepare(const OpContext& ctx) const {
  auto optimised = Backend::prepare(ctx);
  // An optimised kernel may decline a case (a dtype, an attribute); the portable one then runs.
  if (optimised || optimised.status().code() != Code::kUnsupported) return optimised;
  const OpSchema* s = OpRegistry::global().find(ctx.node->op_type);
  if (!s || !s->reference) return optimised;
  return s->reference(ctx);
}

void CpuBackend::set_num_threads(int n) {
  if (n < 1) n = 1;
#if defined(TERN_HAVE_OPENMP)
  // Per calling thread: OpenMP's pool serves our kernels and oneDNN alike.
  if (omp_get_max_threads() != n) omp_set_num_threads(n);
#endif
#if defined(TERN_HAVE_OPENBLAS)
  openblas_set_num_threads(n);
#endif
}

}  // namespace tern
