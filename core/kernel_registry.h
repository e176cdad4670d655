// Kernels per (op type, backend, dtype). Each backend registers its kernels into the global
// registry when it is first created; backends/<b>/ops/<op>.cpp ends with register_<b>_<op>().
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "core/kernel.h"

namespace tern {

class KernelRegistry {
 public:
  static KernelRegistry& global();
  // dtype kUndefined registers the kernel for every dtype (the factory then checks what it gets).
  // Several factories may serve one key: they are tried by descending priority, and one that
  // declines (UNSUPPORTED: a dtype, an attribute, a flag) passes to the next.
  // (Views, not std::strings: a registration of literals is then little code.)
  void add(std::string_view op_type, std::string_view backend, DType dtype, KernelFactory factory,
           int priority = 0);
  // Factories for the dtype of the op's first input, then the any-dtype ones, in trial order.
  std::vector<KernelFactory> find(const std::string& op_type, const std::string& backend,
                                  DType dtype) const;
  bool has_op(const std::string& op_type, const std::string& backend) const;
  // The op types with a kernel on `backend`, sorted.
  std::vector<std::string> op_types(const std::string& backend) const;
  // A selective build: drops `backend`'s kernels of ops other than `selected`.
  void keep_ops(const std::string& backend, const std::vector<std::string>& selected);
  // The same with the names packed as OpRegistry::select_packed's are (split_names).
  void keep_ops_packed(const std::string& backend, const char* selected);

 private:
  mutable std::mutex mu_;
  std::map<std::tuple<std::string, std::string, int>, std::vector<std::pair<int, KernelFactory>>>
      kernels_;
};

void register_cpu_kernels(KernelRegistry& r);  // generated from backends/cpu/ops/*.cpp

}  // namespace tern
