// The CPU backend: always built. Optimised kernels (oneDNN, OpenBLAS, Tern's own vectorised ones)
// come from the kernel registry; every other op runs its portable kernel from ops/.
//
// Threads: one intra-op pool per process, OpenMP's. Our kernels and oneDNN run on it; OpenBLAS is
// held at one thread and Tern splits each GEMM across the OpenMP threads itself, because
// Debian's OpenBLAS is the pthreads build whose own pool would ignore OpenMP's count and spin
// next to it.
#pragma once

#include <string>

#include "core/backend.h"

namespace tern {

class CpuBackend final : public Backend {
 public:
  CpuBackend();
  const char* name() const override { return "cpu"; }
  bool is_built() const override { return true; }
  bool is_available() const override { return true; }
  bool supports_op(const std::string& op_type) const override;
  // The CPU's kernel for ctx: its optimised kernels, then the portable one. A node with
  // float16/bfloat16 values that no optimised kernel takes runs its float32 kernel between
  // conversions (widened_kernel.h) before the portable one is tried.
  Expected<std::unique_ptr<Kernel>> prepare(const OpContext& ctx) const override;
  int conv_layout(const FlagValues& flags, const std::vector<ConvSite>& convs) const override;
  LayoutRole layout_role(const Node& node) const override;
  void set_num_threads(int n) override;
#if defined(TERN_HAVE_ONEDNN)
  bool prepares_concurrently(const std::string& op_type) const override;
#endif
  void begin_run(const FlagValues& flags) override;
  void end_run(const FlagValues& flags) override;

 private:
  Expected<std::unique_ptr<Kernel>> prepare_direct(const OpContext& ctx, bool reference) const;
};

// The capability Tern dispatches to now (the CPU's, capped by cpu.max_capability), as
// tern_cpu_get_capability reports it.
const char* cpu_capability();

// What the libraries were actually given, for tern_parallel_info.
struct CpuThreadReport {
  int last_run_threads = 0;      // intra-op threads of the latest run (0: no run yet)
  int openblas_threads = 0;      // openblas_get_num_threads(), 0 when not built
  std::string onednn_max_isa;    // the ISA cap handed to oneDNN, "" when not built / none
  std::string onednn_effective;  // dnnl_get_effective_cpu_isa()
};
CpuThreadReport cpu_thread_report();

}  // namespace tern
