// A session's weights beyond the model's own bytes, shared by every plan it builds: model
// constants uploaded to a device (one copy per device per session, made the first time a plan
// needs it there).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "core/backend.h"

namespace tern {

class WeightStore {
 public:
  // The model constant `host` in `dev`'s memory: uploaded on the first call, then shared.
  Expected<const Tensor*> device_constant(const Tensor& host, Backend* dev);
  size_t device_constant_count() const;

 private:
  mutable std::mutex mu_;
  std::map<std::tuple<const Tensor*, int, int>, std::unique_ptr<Tensor>> device_;
};

}  // namespace tern
