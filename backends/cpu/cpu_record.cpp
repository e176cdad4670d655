// The CPU backend's record (backends/registry.h): always built, one device; its report names the
// vector ISA it dispatches to and the libraries under it, and its threads report is
// tern_parallel_info's text.
#include <thread>

#include "backends/cpu/cpu_affinity.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/cpu_libraries.h"
#include "backends/cpu/kernels/attention.h"
#include "backends/registry.h"
#include "core/intra_op_pool.h"
#include "core/thread_budget.h"
#include "core/thread_pool.h"
#include "core/threading.h"

#if defined(TERN_HAVE_OPENMP)
#include <omp.h>
#endif

namespace tern::backends {

namespace {

std::string env_text(const char* name) {
  const char* v = std::getenv(name);
  return v ? str_cat("'", v, "'") : "[not set]";
}

class CpuRecord final : public Record {
 public:
  const char* name() const override { return "cpu"; }
  bool is_built() const override { return true; }
  int device_count() const override { return 1; }
  std::string report() const override {
    // bfloat16: whether oneDNN's bf16 kernels run them (AVX-512 BF16 / AMX under the cap).
    (void)device(0);  // the CPU backend sets oneDNN's ISA cap before the query below
    const bool native_bf16 = onednn_native_bf16();
    return str_cat(cpu_capability(), " (detected ", detected_cpu_capability(),
                   "; int8/reduced precision: ", cpu_feature_names(),
                   "; bfloat16 Conv/MatMul: ", native_bf16 ? "oneDNN bf16" : "widened to float32",
                   "); ", cpu_library_report());
  }
  Expected<Backend*> device(int index) const override {
    if (index != 0) {
      return invalid_argument("backend 'cpu:", index, "': the CPU is one device, named 'cpu'");
    }
    static CpuBackend cpu;
    return static_cast<Backend*>(&cpu);
  }
  int64_t library_version(std::string_view lib) const override {
    return lib == "onednn"     ? onednn_version()
           : lib == "openblas" ? openblas_version()
           : lib == "openmp"   ? openmp_version()
                               : -1;
  }
  bool has_attention() const override { return true; }
  std::string sdp_refusal(int sdp, const ops::SdpCase& c) const override {
    if (sdp == 0) return cpu_sdp_refusal(CpuSdp::kMath, c);
    if (sdp == 1) return cpu_sdp_refusal(CpuSdp::kFlash, c);
    return Record::sdp_refusal(sdp, c);
  }
  const char* capability() const override { return cpu_capability(); }
  std::string threads_report(int intra, const std::string& intra_source, int interop,
                             const std::string& interop_source) const override;
};

std::string CpuRecord::threads_report(int intra, const std::string& intra_source, int interop,
                                      const std::string& interop_source) const {
  const CpuThreadReport r = cpu_thread_report();
  std::string text;
  text += str_cat("  intra-op threads (tern_get_num_threads): ", intra, "  [source: ", intra_source,
                  "]\n");
  text += str_cat("  inter-op threads (tern_get_num_interop_threads): ", interop,
                  "  [source: ", interop_source, "]\n");
  text +=
      "  precedence: API > MKL_NUM_THREADS > OMP_NUM_THREADS > default (physical cores within the "
      "affinity mask, at most the cgroup CPU quota rounded up)\n";
  const ThreadDefault& d = default_thread_choice();
  text += str_cat("  default threads: ", d.threads, " (", d.reason, ")\n");
  const Flags& flags = Flags::global();
  text += str_cat("  cpu.affinity: ", flags.text(FlagId::kCpuAffinity), " [",
                  flag_source_name(flags.source(FlagId::kCpuAffinity)),
                  "; sessions may set their own]; ", cpu_affinity_report(), "\n");
  text += str_cat("  latest run's intra-op threads: ",
                  r.last_run_threads ? std::to_string(r.last_run_threads) : "no run yet", "\n");
  text += str_cat("  thread budget (cpu.thread_budget, all runs of all sessions): ",
                  ThreadBudget::global().report(), "; when none is free a run ",
                  flags.get(FlagId::kCpuThreadBudgetWait) ? "waits (cpu.thread_budget_wait)"
                                                          : "runs on its calling thread alone",
                  "\n");
  text += str_cat("  cpu.adaptive_threads: ",
                  flags.get(FlagId::kCpuAdaptiveThreads)
                      ? "on (sessions use fewer intra-op threads while that is measured faster)"
                      : "off",
                  "\n");
#if defined(TERN_HAVE_OPENMP)
  text += str_cat("  OpenMP ", _OPENMP, " (the intra-op pool)\n");
  text += str_cat("    omp_get_max_threads() on this thread: ", omp_get_max_threads(), "\n");
  text += str_cat(
      "    idle policy: OMP_WAIT_POLICY=", env_text("OMP_WAIT_POLICY"),
      ", GOMP_SPINCOUNT=", env_text("GOMP_SPINCOUNT"),
      " (unset: spin a bounded time, then sleep); cpu.spin_us=", flags.get(FlagId::kCpuSpinUs),
      flags.get(FlagId::kCpuSpinUs) == 0 ? " (teams released after each run)" : "", "\n");
#else
  text += str_cat(
      "  OpenMP: not built; the intra-op pool is Tern's own: ", IntraOpPool::global().size(),
      " threads started, idle ones spin cpu.spin_us=", flags.get(FlagId::kCpuSpinUs),
      " us, then sleep\n");
#endif
  if (onednn_version() >= 0) {
    text += str_cat(
        "  oneDNN: runs on the OpenMP pool with the run's intra-op threads; max ISA given: ",
        r.onednn_max_isa.empty() ? "none yet (set at first session)" : r.onednn_max_isa,
        "; effective ISA: ", r.onednn_effective, "\n");
  } else {
    text += "  oneDNN: not built\n";
  }
  if (openblas_version() >= 0) {
    text += str_cat("  OpenBLAS: openblas_get_num_threads() = ", r.openblas_threads,
                    " per call; Tern splits each GEMM over the intra-op threads "
                    "(its own pthread pool stays asleep)\n");
  } else {
    text += "  OpenBLAS: not built\n";
  }
  text += str_cat("  inter-op pool threads started: ", InterOpPool::global().size(),
                  " (idle ones block on a condition variable)\n");
  text += str_cat("  std::thread::hardware_concurrency(): ", std::thread::hardware_concurrency(),
                  "; physical cores: ", physical_core_count(),
                  "; this process's affinity mask: ", cpu_list_text(process_cpu_affinity()), "\n");
  text += "  Environment variables:\n";
  for (const char* v :
       {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "TERN_NUM_INTEROP_THREADS", "OPENBLAS_NUM_THREADS",
        "TERN_CPU_CAPABILITY", "TERN_CPU_AFFINITY", "OMP_PROC_BIND", "OMP_PLACES"}) {
    text += str_cat("    ", v, ": ", env_text(v), "\n");
  }
  return text;
}

}  // namespace

const Record& cpu_record() {
  static const CpuRecord r;
  return r;
}

}  // namespace tern::backends
