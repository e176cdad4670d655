#include "core/backend.h"

#include <cstring>

#include "core/kernel_registry.h"

namespace tern {

static DType first_input_dtype(const OpContext& ctx) {
  for (const auto& in : ctx.inputs) {
    if (in.present) return in.dtype;
  }
  return DType::kUndefined;
}

const KernelRegistry& Backend::kernels() const {
  return KernelRegistry::global();
}

bool Backend::supports_op(const std::string& op_type) const {
  return kernels().has_op(op_type, kernel_backend());
}

Expected<std::unique_ptr<Kernel>> Backend::prepare(const OpContext& ctx) const {
  DType dt = first_input_dtype(ctx);
  std::vector<KernelFactory> fs = kernels().find(ctx.node->op_type, kernel_backend(), dt);
  if (fs.empty()) {
    return unsupported("backend ", name(), " has no ", ctx.node->op_type, " kernel for ",
                       dtype_name(dt));
  }
  std::string reasons;
  for (KernelFactory f : fs) {
    auto k = f(ctx);
    if (k || k.status().code() != Code::kUnsupported) return k;
    reasons += (reasons.empty() ? "" : "; ") + k.status().message();
  }
  return unsupported(reasons);
}

Expected<std::shared_ptr<void>> Backend::allocate(size_t bytes) {
  auto p = aligned_buffer(bytes);
  if (!p) return out_of_memory("backend ", name(), ": cannot allocate ", bytes, " bytes");
  return p;
}

Status Backend::copy_to_device(const Tensor& host, Tensor& device) {
  if (host.byte_size() != device.byte_size()) return internal_error("copy size mismatch");
  if (host.byte_size()) std::memcpy(device.raw(), host.raw(), host.byte_size());
  return Status::ok();
}

Status Backend::copy_to_host(const Tensor& device, Tensor& host) {
  return copy_to_device(device, host);
}

Status Backend::copy_on_device(const Tensor& src, Tensor& dst) {
  return copy_to_device(src, dst);
}

Expected<std::shared_ptr<void>> Backend::capture(const std::function<Status()>& body) {
  return unsupported("backend ", name(), " cannot capture kernel launches");
}

Status Backend::replay(void* captured) {
  return unsupported("backend ", name(), " cannot replay captured launches");
}

}  // namespace tern
