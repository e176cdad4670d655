#include "backends/vulkan/vulkan_backend.h"

#include <mutex>

#include "backends/vulkan/vk_context.h"
#include "core/kernel_registry.h"

namespace tern {

void register_vulkan_kernels(KernelRegistry& r);  // generated: every register_vulkan_* function

bool vulkan_available() {
  return vk::Context::get().has_value();
}

std::string vulkan_report() {
  auto ctx = vk::Context::get();
  if (!ctx) return str_cat("no device: ", ctx.status().message());
  const vk::DeviceInfo& d = (*ctx)->info();
  return str_cat(d.name, " (", d.type, ", Vulkan ", VK_API_VERSION_MAJOR(d.api_version), ".",
                 VK_API_VERSION_MINOR(d.api_version), ".", VK_API_VERSION_PATCH(d.api_version),
                 ", driver ", d.driver, ", ", static_cast<double>(d.memory) / (1 << 30),
                 " GiB, fp16 ",
                 d.fp16_arithmetic ? "storage+arithmetic" : (d.fp16_storage ? "storage" : "no"),
                 "); devices: ", vk::Context::report());
}

VulkanBackend::VulkanBackend() {
  static std::once_flag once;
  std::call_once(once, [] { register_vulkan_kernels(KernelRegistry::global()); });
}

bool VulkanBackend::is_available() const {
  return vulkan_available();
}

Expected<std::unique_ptr<Kernel>> VulkanBackend::prepare(const OpContext& ctx) const {
  for (const auto& t : ctx.inputs) {
    if (t.block) return unsupported("the Vulkan kernels read plain layouts only");
  }
  return Backend::prepare(ctx);
}

Status VulkanBackend::synchronize() {
  TERN_ASSIGN_OR_RETURN(vk::Context * c, vk::Context::get());
  return c->flush();
}

Status VulkanBackend::abandon() {
  TERN_ASSIGN_OR_RETURN(vk::Context * c, vk::Context::get());
  return c->discard();
}

Expected<std::shared_ptr<void>> VulkanBackend::allocate(size_t bytes) {
  TERN_ASSIGN_OR_RETURN(vk::Context * c, vk::Context::get());
  return c->allocate(bytes);
}

Status VulkanBackend::copy_to_device(const Tensor& host, Tensor& device) {
  if (host.byte_size() != device.byte_size()) return internal_error("copy size mismatch");
  if (host.dtype() == DType::kString) return unsupported("string tensors cannot go to Vulkan");
  TERN_ASSIGN_OR_RETURN(vk::Context * c, vk::Context::get());
  return c->upload(host.raw(), device.raw(), host.byte_size());
}

Status VulkanBackend::copy_to_host(const Tensor& device, Tensor& host) {
  if (host.byte_size() != device.byte_size()) return internal_error("copy size mismatch");
  TERN_ASSIGN_OR_RETURN(vk::Context * c, vk::Context::get());
  return c->download(device.raw(), host.raw(), host.byte_size());
}

Status VulkanBackend::copy_on_device(const Tensor& src, Tensor& dst) {
  if (src.byte_size() != dst.byte_size()) return internal_error("copy size mismatch");
  TERN_ASSIGN_OR_RETURN(vk::Context * c, vk::Context::get());
  return c->copy(src.raw(), dst.raw(), src.byte_size());
}

}  // namespace tern
