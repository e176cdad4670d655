// The Vulkan backend (DESIGN §1 backends/vulkan): kernels registered under "vulkan" record
// compute dispatches into the calling thread's command buffers, submitted in chunks as the run
// goes (vk::Context); copies to the device go through staging buffers; synchronize() submits the
// rest and waits, abandon() drops what was not submitted and waits for what was.
#pragma once

#include <string>

#include "core/backend.h"

namespace tern {

class VulkanBackend final : public Backend {
 public:
  VulkanBackend();
  const char* name() const override { return "vulkan"; }
  bool is_built() const override { return true; }
  bool is_available() const override;
  Device device() const override { return {DeviceType::kVulkan, 0}; }
  Expected<std::unique_ptr<Kernel>> prepare(const OpContext& ctx) const override;
  Status synchronize() override;
  Status abandon() override;
  Expected<std::shared_ptr<void>> allocate(size_t bytes) override;
  Status copy_to_device(const Tensor& host, Tensor& device) override;
  Status copy_to_host(const Tensor& device, Tensor& host) override;
  Status copy_on_device(const Tensor& src, Tensor& dst) override;
};

// For the C API and tern info: whether a usable device exists, and a line naming it (name,
// type, driver, memory, fp16 support) and the other devices, or why there is none.
bool vulkan_available();
std::string vulkan_report();

}  // namespace tern
