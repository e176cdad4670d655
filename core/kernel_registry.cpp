#include "core/kernel_registry.h"

namespace tern {

KernelRegistry& KernelRegistry::global() {
  static KernelRegistry registry;
  return registry;
}

void KernelRegistry::add(const std::string& op_type, const std::string& backend, DType dtype,
                         KernelFactory factory) {
  std::lock_guard<std::mutex> lock(mu_);
  kernels_[{op_type, backend, static_cast<int>(dtype)}] = factory;
}

KernelFactory KernelRegistry::find(const std::string& op_type, const std::string& backend,
                                   DType dtype) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = kernels_.find({op_type, backend, static_cast<int>(dtype)});
  if (it != kernels_.end()) return it->second;
  it = kernels_.find({op_type, backend, static_cast<int>(DType::kUndefined)});
  return it == kernels_.end() ? nullptr : it->second;
}

bool KernelRegistry::has_op(const std::string& op_type, const std::string& backend) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = kernels_.lower_bound({op_type, backend, -1});
  return it != kernels_.end() && std::get<0>(it->first) == op_type &&
         std::get<1>(it->first) == backend;
}

}  // namespace tern
