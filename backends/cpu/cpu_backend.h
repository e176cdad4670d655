// The CPU backend: always built. Optimised kernels (oneDNN, OpenBLAS) come from the kernel
// registry; every other op runs its portable kernel from ops/.
#pragma once

#include "core/backend.h"

namespace tern {

class CpuBackend final : public Backend {
 public:
  CpuBackend();
  const char* name() const override { return "cpu"; }
  bool is_built() const override { return true; }
  bool is_available() const override { return true; }
  bool supports_op(const std::string& op_type) const override;
  Expected<std::unique_ptr<Kernel>> prepare(const OpContext& ctx) const override;
  void set_num_threads(int n) override;
};

// Detected vector capability, as tern_cpu_get_capability reports it.
const char* cpu_capability();

}  // namespace tern
