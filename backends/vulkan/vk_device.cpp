#include "backends/vulkan/vk_device.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

namespace tern::vk {

Api& api() {
  static Api a;
  return a;
}

const std::string& open_loader() {
  static const std::string why = [] {
#if defined(__APPLE__)
    const char* names[] = {"libvulkan.dylib", "libvulkan.1.dylib", "libMoltenVK.dylib"};
#else
    const char* names[] = {"libvulkan.so.1", "libvulkan.so"};
#endif
    void* lib = nullptr;
    for (const char* n : names) {
      if ((lib = dlopen(n, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    }
    if (!lib) return std::string("no Vulkan loader (libvulkan.so.1) on this system");
    Api& a = api();
    a.get_instance_proc =
        reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
    if (!a.get_instance_proc) return std::string("the Vulkan loader has no vkGetInstanceProcAddr");
#define TERN_VK_LOAD(f) a.f = reinterpret_cast<PFN_##f>(a.get_instance_proc(VK_NULL_HANDLE, #f));
    TERN_VK_GLOBAL_FNS(TERN_VK_LOAD)
#undef TERN_VK_LOAD
    if (!a.vkCreateInstance) return std::string("the Vulkan loader has no vkCreateInstance");
    return std::string();
  }();
  return why;
}

const char* result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS:
      return "VK_SUCCESS";
    case VK_NOT_READY:
      return "VK_NOT_READY";
    case VK_TIMEOUT:
      return "VK_TIMEOUT";
    case VK_INCOMPLETE:
      return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
      return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED:
      return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST:
      return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED:
      return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT:
      return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT:
      return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT:
      return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
      return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS:
      return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_OUT_OF_POOL_MEMORY:
      return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default:
      return "VkResult error";
  }
}

Status vk_error(VkResult r, const char* what) {
  const Code c = (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
                     ? Code::kOutOfMemory
                     : Code::kBackendUnavailable;
  return Status(c, str_cat("Vulkan: ", what, " failed: ", result_name(r), " (", int(r), ")"));
}

const char* type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "cpu";
    default:
      return "other";
  }
}

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

int type_rank(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return 4;
    default:
      return 3;
  }
}

}  // namespace

namespace {

// The physical devices with a compute queue and Vulkan 1.1, in preference order.
std::vector<Candidate> candidates(VkInstance instance) {
  const Api& a = api();
  uint32_t n = 0;
  a.vkEnumeratePhysicalDevices(instance, &n, nullptr);
  std::vector<VkPhysicalDevice> devs(n);
  if (n) a.vkEnumeratePhysicalDevices(instance, &n, devs.data());
  std::vector<Candidate> out;
  for (VkPhysicalDevice d : devs) {
    Candidate c{d, {}, 0};
    a.vkGetPhysicalDeviceProperties(d, &c.props);
    if (VK_API_VERSION_MINOR(c.props.apiVersion) < 1 &&
        VK_API_VERSION_MAJOR(c.props.apiVersion) < 2)
      continue;
    uint32_t nq = 0;
    a.vkGetPhysicalDeviceQueueFamilyProperties(d, &nq, nullptr);
    std::vector<VkQueueFamilyProperties> qs(nq);
    a.vkGetPhysicalDeviceQueueFamilyProperties(d, &nq, qs.data());
    bool found = false;
    for (uint32_t q = 0; q < nq && !found; ++q) {
      if (qs[q].queueFlags & VK_QUEUE_COMPUTE_BIT) c.queue_family = q, found = true;
    }
    if (found) out.push_back(c);
  }
  std::stable_sort(out.begin(), out.end(), [](const Candidate& x, const Candidate& y) {
    return type_rank(x.props.deviceType) < type_rank(y.props.deviceType);
  });
  return out;
}

}  // namespace

bool has_extension(const std::vector<VkExtensionProperties>& exts, const char* name) {
  for (const auto& e : exts) {
    if (std::strcmp(e.extensionName, name) == 0) return true;
  }
  return false;
}

const Instance& instance() {
  static const Instance inst = [] {
    Instance r;
    if (!open_loader().empty()) {
      r.error = open_loader();
      return r;
    }
    Api& a = api();
    uint32_t version = VK_API_VERSION_1_0;
    if (a.vkEnumerateInstanceVersion) a.vkEnumerateInstanceVersion(&version);
    if (VK_API_VERSION_MAJOR(version) == 1 && VK_API_VERSION_MINOR(version) < 1) {
      r.error = "the Vulkan loader supports Vulkan 1.0 only (Tern needs 1.1)";
      return r;
    }
    uint32_t ne = 0;
    a.vkEnumerateInstanceExtensionProperties(nullptr, &ne, nullptr);
    std::vector<VkExtensionProperties> exts(ne);
    if (ne) a.vkEnumerateInstanceExtensionProperties(nullptr, &ne, exts.data());
    std::vector<const char*> enable;
    VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    // MoltenVK (Apple) lists its devices only to instances that accept portability drivers.
    if (has_extension(exts, "VK_KHR_portability_enumeration")) {
      enable.push_back("VK_KHR_portability_enumeration");
      ci.flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
    }
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "tern";
    app.pEngineName = "tern";
    app.apiVersion = VK_API_VERSION_1_1;
    ci.pApplicationInfo = &app;
    ci.enabledExtensionCount = static_cast<uint32_t>(enable.size());
    ci.ppEnabledExtensionNames = enable.data();
    const VkResult res = a.vkCreateInstance(&ci, nullptr, &r.instance);
    if (res != VK_SUCCESS) {
      r.error = str_cat("vkCreateInstance failed: ", result_name(res));
      return r;
    }
#define TERN_VK_LOAD(f) a.f = reinterpret_cast<PFN_##f>(a.get_instance_proc(r.instance, #f));
    TERN_VK_INSTANCE_FNS(TERN_VK_LOAD)
#undef TERN_VK_LOAD
    r.devices = candidates(r.instance);
    if (r.devices.empty()) r.error = "no Vulkan 1.1 device with a compute queue";
    return r;
  }();
  return inst;
}

// The index in instance().devices that TERN_VULKAN_DEVICE names (0 when unset), or -1 with why.
int selected(std::string* why) {
  const Instance& inst = instance();
  const char* env = std::getenv("TERN_VULKAN_DEVICE");
  if (!env || !*env) return 0;
  const std::string want = env;
  if (want.find_first_not_of("0123456789") == std::string::npos && want.size() < 4) {
    const int i = std::atoi(env);
    if (i < static_cast<int>(inst.devices.size())) return i;
    *why = str_cat("TERN_VULKAN_DEVICE=", want, " but there are ", inst.devices.size(),
                   " Vulkan device(s)");
    return -1;
  }
  for (size_t i = 0; i < inst.devices.size(); ++i) {
    if (lower(inst.devices[i].props.deviceName).find(lower(want)) != std::string::npos)
      return static_cast<int>(i);
  }
  *why = str_cat("TERN_VULKAN_DEVICE='", want, "' names none of the Vulkan devices");
  return -1;
}

std::string devices_report() {
  const Instance& inst = instance();
  if (inst.devices.empty()) return inst.error;
  std::string why;
  const int chosen = selected(&why);
  std::string s;
  for (size_t i = 0; i < inst.devices.size(); ++i) {
    const auto& p = inst.devices[i].props;
    s += str_cat(i ? "; " : "", static_cast<int>(i) == chosen ? "*" : "", i, ": ", p.deviceName,
                 " (", type_name(p.deviceType), ", Vulkan ", VK_API_VERSION_MAJOR(p.apiVersion),
                 ".", VK_API_VERSION_MINOR(p.apiVersion), ")");
  }
  if (chosen < 0) s += str_cat("; ", why);
  return s;
}

}  // namespace tern::vk
