#include "core/transfer.h"

namespace tern {

namespace {

class TransferKernel final : public Kernel {
 public:
  TransferKernel(Backend* device, TransferDirection dir) : device_(device), dir_(dir) {}
  const char* name() const override {
    return dir_ == TransferDirection::kToDevice ? "memcpy_to_device" : "memcpy_to_host";
  }
  Status run(const KernelArgs& args, const ExecContext&) const override {
    const Tensor& in = *args.inputs[0];
    Tensor& out = *args.outputs[0];
    const Device dev = device_->device();
    const Device want = dir_ == TransferDirection::kToDevice ? dev : Device{};
    if (in.device() == want) {
      out = in;  // already in the memory the readers use
      return Status::ok();
    }
    if (in.dtype() != out.dtype() || in.shape() != out.shape()) {
      return internal_error("copy of ", dtype_name(in.dtype()), shape_str(in.shape()), " into ",
                            dtype_name(out.dtype()), shape_str(out.shape()));
    }
    if (dir_ == TransferDirection::kToDevice) {
      if (!in.on_host()) {
        return invalid_argument("a tensor on ", in.device().name(), " cannot feed kernels on ",
                                dev.name());
      }
      return device_->copy_to_device(in, out);
    }
    if (in.device() != dev) {
      return internal_error("copy to host of a tensor on ", in.device().name(), " through ",
                            dev.name());
    }
    return device_->copy_to_host(in, out);
  }

 private:
  Backend* device_;
  TransferDirection dir_;
};

}  // namespace

std::unique_ptr<Kernel> make_transfer_kernel(Backend* device, TransferDirection dir) {
  return std::make_unique<TransferKernel>(device, dir);
}

Expected<std::unique_ptr<Tensor>> upload(const Tensor& host, Backend* device) {
  TERN_ASSIGN_OR_RETURN(std::shared_ptr<void> mem, device->allocate(host.byte_size()));
  void* raw = mem.get();
  auto up = std::make_unique<Tensor>(
      Tensor::wrap(host.dtype(), host.shape(), raw, std::move(mem), device->device()));
  TERN_RETURN_IF_ERROR(device->copy_to_device(host, *up));
  TERN_RETURN_IF_ERROR(device->synchronize());
  return up;
}

Backend* backend_for(const std::vector<Backend*>& backends, const Device& d) {
  for (Backend* b : backends) {
    if (b->device() == d) return b;
  }
  return nullptr;
}

Expected<Tensor> moved_to(const Tensor& t, const Device& to,
                          const std::vector<Backend*>& backends) {
  if (t.device() == to) return t;
  if (to.is_host()) {
    Backend* from = backend_for(backends, t.device());
    if (!from) {
      return invalid_argument("a tensor on ", t.device().name(),
                              " reached a session with no backend there");
    }
    TERN_ASSIGN_OR_RETURN(Tensor host, Tensor::allocate(t.dtype(), t.shape()));
    TERN_RETURN_IF_ERROR(from->copy_to_host(t, host));
    return host;
  }
  TERN_ASSIGN_OR_RETURN(Tensor host, moved_to(t, Device{}, backends));
  Backend* dev = backend_for(backends, to);
  if (!dev) return invalid_argument("the session has no backend on ", to.name());
  TERN_ASSIGN_OR_RETURN(std::shared_ptr<void> mem, dev->allocate(host.byte_size()));
  void* raw = mem.get();
  Tensor out = Tensor::wrap(host.dtype(), host.shape(), raw, std::move(mem), to);
  TERN_RETURN_IF_ERROR(dev->copy_to_device(host, out));
  TERN_RETURN_IF_ERROR(dev->synchronize());  // `host` is a temporary
  return out;
}

}  // namespace tern
