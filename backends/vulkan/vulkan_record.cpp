// The Vulkan backend's record (backends/registry.h): one device, the one vk::Context chose
// (TERN_VULKAN_DEVICE picks another); the loader is opened the first time anything asks.
#include "backends/registry.h"
#include "backends/vulkan/vulkan_backend.h"

namespace tern::backends {

namespace {

class VulkanRecord final : public Record {
 public:
  const char* name() const override { return "vulkan"; }
  bool is_built() const override { return true; }
  int device_count() const override { return vulkan_available() ? 1 : 0; }
  std::string report() const override { return vulkan_report(); }
  Expected<Backend*> device(int index) const override {
    if (index != 0) {
      return invalid_argument("backend 'vulkan:", index,
                              "': Tern uses one Vulkan device, named 'vulkan'; pick it with "
                              "TERN_VULKAN_DEVICE=<index or part of its name>");
    }
    if (!vulkan_available()) {
      return Status(Code::kBackendUnavailable, str_cat("backend 'vulkan': ", vulkan_report()));
    }
    static VulkanBackend vulkan;
    return static_cast<Backend*>(&vulkan);
  }
};

}  // namespace

const Record& vulkan_record() {
  static const VulkanRecord r;
  return r;
}

}  // namespace tern::backends
