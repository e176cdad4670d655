// The Vulkan loader, instance and physical-device choice (backends/vulkan): what Context builds
// its device on. Devices are ordered discrete GPU, integrated, virtual, other, CPU (lavapipe);
// TERN_VULKAN_DEVICE picks one by index in that order or by part of its name.
#pragma once

#include <string>
#include <vector>

#include "backends/vulkan/vk_api.h"
#include "core/status.h"

namespace tern::vk {

struct Candidate {
  VkPhysicalDevice device = VK_NULL_HANDLE;
  VkPhysicalDeviceProperties props{};
  uint32_t queue_family = 0;  // one with compute
};

struct Instance {
  VkInstance instance = VK_NULL_HANDLE;
  std::string error;  // why there is no instance or no device
  std::vector<Candidate> devices;
};

// The process's instance (created once) and its Vulkan 1.1 compute devices in preference order.
const Instance& instance();
// The index in instance().devices that TERN_VULKAN_DEVICE names (0 when unset), or -1 with why.
int selected(std::string* why);
// One entry per device with the selected one starred, or why there is none.
std::string devices_report();

const char* type_name(VkPhysicalDeviceType t);  // "discrete GPU", ..., "cpu"
bool has_extension(const std::vector<VkExtensionProperties>& exts, const char* name);
// BACKEND_UNAVAILABLE (OUT_OF_MEMORY for memory errors) naming the call and the result.
Status vk_error(VkResult r, const char* what);

#define TERN_VK_CHECK(call, what)                    \
  do {                                               \
    const VkResult r_ = (call);                      \
    if (r_ != VK_SUCCESS) return vk_error(r_, what); \
  } while (0)

}  // namespace tern::vk
