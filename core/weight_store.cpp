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

Expected<PackedData> WeightStore::packed(const Tensor& w, const std::string& key,
                                         const Packer& pack) {
#if defined(TERN_MINIMAL)
  // Packing runs under the lock: two plans asking at once pack once.
  std::lock_guard<std::mutex> lock(mu_);
  auto it = packed_.find({&w, key});
  if (it != packed_.end()) return it->second;
  TERN_ASSIGN_OR_RETURN(PackedData d, pack());
  packed_bytes_ += d.data.byte_size();
  return packed_.emplace(std::make_pair(&w, key), std::move(d)).first->second;
#else
  // Each layout is packed once, outside the lock: threads preparing a plan's kernels together
  // (core/plan/partition.cpp) pack different weights at once; one asking for a layout another
  // thread is packing waits for it.
  const Key k{&w, key};
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    auto it = packed_.find(k);
    if (it != packed_.end()) return it->second;
    if (!packing_.count(k)) break;
    packed_cv_.wait(lock);
  }
  packing_.insert(k);
  lock.unlock();
  struct Claim {  // given up however this returns (a failed pack: a waiter packs it itself)
    WeightStore& store;
    const Key& key;
    ~Claim() {
      std::lock_guard<std::mutex> relock(store.mu_);
      store.packing_.erase(key);
      store.packed_cv_.notify_all();
    }
  } claim{*this, k};
  TERN_ASSIGN_OR_RETURN(PackedData d, pack());
  std::lock_guard<std::mutex> relock(mu_);
  packed_bytes_ += d.data.byte_size();
  return packed_.emplace(k, std::move(d)).first->second;
#endif
}

std::vector<PackedData> WeightStore::layouts(const Tensor& w, const std::string& prefix) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<PackedData> out;
  for (auto it = packed_.lower_bound({&w, prefix}); it != packed_.end() && it->first.first == &w;
       ++it) {
    if (it->first.second.compare(0, prefix.size(), prefix) != 0) break;
    out.push_back(it->second);
  }
  return out;
}

size_t WeightStore::packed_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return packed_bytes_;
}

size_t WeightStore::packed_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return packed_.size();
}

size_t WeightStore::device_constant_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return device_.size();
}

}  // namespace tern
