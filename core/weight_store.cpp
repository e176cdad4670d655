#include "core/weight_store.h"

#include "core/transfer.h"

namespace tern {

Expected<const Tensor*> WeightStore::device_constant(const Tensor& host, Backend* dev) {
  const Device d = dev->device();
  const auto key = std::make_tuple(&host, static_cast<int>(d.type), d.index);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = device_.find(key);
  if (it != device_.end()) return it->second.get();
  TERN_ASSIGN_OR_RETURN(std::unique_ptr<Tensor> up, upload(host, dev));
  return device_.emplace(key, std::move(up)).first->second.get();
}

size_t WeightStore::device_constant_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return device_.size();
}

}  // namespace tern
