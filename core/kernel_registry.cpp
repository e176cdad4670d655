#include "core/kernel_registry.h"

#include <algorithm>
#include <iterator>

#include "core/op_registry.h"

namespace tern {

KernelRegistry& KernelRegistry::global() {
  static KernelRegistry registry;
  return registry;
}

void KernelRegistry::add(std::string_view op_type, std::string_view backend, DType dtype,
                         KernelFactory factory, int priority) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& list = kernels_[{std::string(op_type), std::string(backend), static_cast<int>(dtype)}];
  list.emplace_back(priority, factory);
  std::stable_sort(list.begin(), list.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
}

std::vector<KernelFactory> KernelRegistry::find(const std::string& op_type,
                                                const std::string& backend, DType dtype) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<KernelFactory> out;
  for (DType d : {dtype, DType::kUndefined}) {
    auto it = kernels_.find({op_type, backend, static_cast<int>(d)});
    if (it == kernels_.end()) continue;
    for (const auto& entry : it->second) out.push_back(entry.second);
    if (d == DType::kUndefined) break;
  }
  return out;
}

bool KernelRegistry::has_op(const std::string& op_type, const std::string& backend) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = kernels_.lower_bound({op_type, backend, -1});
  return it != kernels_.end() && std::get<0>(it->first) == op_type &&
         std::get<1>(it->first) == backend;
}

std::vector<std::string> KernelRegistry::op_types(const std::string& backend) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& entry : kernels_) {
    const std::string& op = std::get<0>(entry.first);
    if (std::get<1>(entry.first) == backend && (out.empty() || out.back() != op)) {
      out.push_back(op);
    }
  }
  return out;
}

void KernelRegistry::keep_ops(const std::string& backend,
                              const std::vector<std::string>& selected) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = kernels_.begin(); it != kernels_.end();) {
    const std::string& op = std::get<0>(it->first);
    const bool drop = std::get<1>(it->first) == backend &&
                      std::find(selected.begin(), selected.end(), op) == selected.end();
    it = drop ? kernels_.erase(it) : std::next(it);
  }
}

void KernelRegistry::keep_ops_packed(const std::string& backend, const char* selected) {
  keep_ops(backend, split_names(selected));
}

}  // namespace tern
