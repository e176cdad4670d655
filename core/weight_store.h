// A session's weights beyond the model's own bytes, shared by every plan it builds: the packed
// layouts kernels ask for (WeightCache: one per constant and layout, however many shapes run) and
// model constants uploaded to a device (one copy per device, made the first time a plan needs
// it there).
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "core/backend.h"

namespace tern {

class WeightStore final : public WeightCache {
 public:
  Expected<PackedData> packed(const Tensor& w, const std::string& key, const Packer& pack) override;
  std::vector<PackedData> layouts(const Tensor& w, const std::string& prefix) const override;
  // Bytes of the packed layouts made (kernels use a layout found packed in the model in place,
  // without asking the store).
  size_t packed_bytes() const;
  size_t packed_count() const;

  // The model constant `host` in `dev`'s memory: uploaded on the first call, then shared.
  Expected<const Tensor*> device_constant(const Tensor& host, Backend* dev);
  size_t device_constant_count() const;

 private:
  using Key = std::pair<const Tensor*, std::string>;
  mutable std::mutex mu_;
  std::map<std::tuple<const Tensor*, int, int>, std::unique_ptr<Tensor>> device_;
  std::map<Key, PackedData> packed_;
  size_t packed_bytes_ = 0;
#if !defined(TERN_MINIMAL)
  std::set<Key> packing_;  // being packed, outside the lock
  std::condition_variable packed_cv_;
#endif
};

}  // namespace tern
