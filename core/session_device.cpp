// Session: moving tensors between host memory and the session's device (bound inputs, outputs
// asked for on another device, model constants uploaded for device kernels).
#include "core/session.h"
#include "core/transfer.h"

namespace tern {

Backend* Session::backend_for(const Device& d) const {
  for (Backend* b : config_.backends) {
    if (b->device() == d) return b;
  }
  return nullptr;
}

Expected<Tensor> Session::moved_to(const Tensor& t, const Device& to) const {
  if (t.device() == to) return t;
  if (to.is_host()) {
    Backend* from = backend_for(t.device());
    if (!from) {
      return invalid_argument("a tensor on ", t.device().name(),
                              " reached a session with no backend there");
    }
    TERN_ASSIGN_OR_RETURN(Tensor host, Tensor::allocate(t.dtype(), t.shape()));
    TERN_RETURN_IF_ERROR(from->copy_to_host(t, host));
    return host;
  }
  TERN_ASSIGN_OR_RETURN(Tensor host, moved_to(t, Device{}));
  Backend* dev = backend_for(to);
  if (!dev) return invalid_argument("the session has no backend on ", to.name());
  TERN_ASSIGN_OR_RETURN(std::shared_ptr<void> mem, dev->allocate(host.byte_size()));
  void* raw = mem.get();
  Tensor out = Tensor::wrap(host.dtype(), host.shape(), raw, std::move(mem), to);
  TERN_RETURN_IF_ERROR(dev->copy_to_device(host, out));
  TERN_RETURN_IF_ERROR(dev->synchronize());  // `host` is a temporary
  return out;
}

Expected<const Tensor*> Session::device_constant(const Tensor& host, Backend* dev) const {
  const Device d = dev->device();
  const auto key = std::make_tuple(&host, static_cast<int>(d.type), d.index);
  std::lock_guard<std::mutex> lock(device_constants_mu_);
  auto it = device_constants_.find(key);
  if (it != device_constants_.end()) return it->second.get();
  TERN_ASSIGN_OR_RETURN(std::unique_ptr<Tensor> up, upload(host, dev));
  return device_constants_.emplace(key, std::move(up)).first->second.get();
}

}  // namespace tern
