#include "backends/registry.h"

#include <array>
#include <memory>
#include <mutex>

#include "backends/cpu/cpu_backend.h"
#include "backends/cuda/cuda_module.h"
#include "backends/module_loader.h"
#if defined(TERN_HAVE_VULKAN)
#include "backends/vulkan/vulkan_backend.h"
#endif

namespace tern::backends {

namespace {

// "cuda" -> 0, "cuda:3" -> 3; -1 for anything else.
int cuda_index(const std::string& name) {
  if (name == "cuda") return 0;
  if (name.rfind("cuda:", 0) != 0 || name.size() == 5 || name.size() > 8) return -1;
  int d = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    d = d * 10 + (name[i] - '0');
  }
  return d;
}

// The CUDA module's load, opened the first time anything asks (null when CUDA is not built).
const ModuleLoad* cuda_load() {
#if defined(TERN_HAVE_CUDA)
  return &load_module("cuda", sizeof(CudaModule));
#else
  return nullptr;
#endif
}

}  // namespace

const std::vector<std::string>& known_names() {
  static const std::vector<std::string> names = {"cpu", "cuda", "vulkan", "mps"};
  return names;
}

bool is_known(const std::string& name) {
  if (cuda_index(name) >= 0) return true;
  for (const auto& n : known_names()) {
    if (n == name) return true;
  }
  return false;
}

const CudaModule* cuda_module() {
  const ModuleLoad* m = cuda_load();
  return m && m->loaded ? reinterpret_cast<const CudaModule*>(m->table) : nullptr;
}

bool is_built(const std::string& name) {
  if (cuda_index(name) >= 0) {
    const ModuleLoad* m = cuda_load();
    return m && m->found;
  }
#if defined(TERN_HAVE_VULKAN)
  if (name == "vulkan") return true;
#endif
  return name == "cpu";
}

bool is_available(const std::string& name) {
  const int d = cuda_index(name);
  if (d >= 0) return d < cuda_devices();
#if defined(TERN_HAVE_VULKAN)
  if (name == "vulkan") return vulkan_available();
#endif
  return name == "cpu";
}

int cuda_devices() {
  const CudaModule* m = cuda_module();
  return m ? m->device_count() : 0;
}

int64_t cudnn_version() {
  const CudaModule* m = cuda_module();
  return m ? m->cudnn_version() : -1;
}

std::string cuda_report() {
  const ModuleLoad* load = cuda_load();
  if (!load) return "not built (configure with the CUDA toolkit: TERN_WITH_CUDA)";
  const CudaModule* m = cuda_module();
  if (!m) return module_report(*load);
  return str_cat(m->device_report(), "; cuDNN ", m->cudnn_version(), "; ", module_report(*load));
}

std::string vulkan_report() {
#if defined(TERN_HAVE_VULKAN)
  return tern::vulkan_report();
#else
  return "not built (configure with the Vulkan headers, loader and glslc: TERN_WITH_VULKAN)";
#endif
}

Expected<Backend*> get(const std::string& name) {
  if (name == "cpu") {
    static CpuBackend cpu;
    return static_cast<Backend*>(&cpu);
  }
  const int cuda = cuda_index(name);
  if (cuda >= 0) {
    const ModuleLoad* load = cuda_load();
    if (!load) {
      return Status(Code::kBackendUnavailable,
                    str_cat("backend '", name, "' is not built into this library"));
    }
    const CudaModule* m = cuda_module();
    if (!m) {
      return Status(Code::kBackendUnavailable,
                    str_cat("backend '", name, "' needs its module, and ", module_report(*load)));
    }
    const int count = m->device_count();
    if (count == 0) {
      return Status(
          Code::kBackendUnavailable,
          str_cat("backend '", name, "': no CUDA device usable here (", m->device_report(), ")"));
    }
    if (cuda >= count) {
      return Status(Code::kBackendUnavailable,
                    str_cat("backend '", name, "': there is no CUDA device ", cuda, " (",
                            m->device_report(), ")"));
    }
    return m->backend(cuda);
  }
#if defined(TERN_HAVE_VULKAN)
  if (name == "vulkan") {
    if (!vulkan_available()) {
      return Status(Code::kBackendUnavailable, str_cat("backend 'vulkan': ", tern::vulkan_report()));
    }
    static VulkanBackend vulkan;
    return static_cast<Backend*>(&vulkan);
  }
#endif
  if (name.rfind("vulkan:", 0) == 0) {
    return invalid_argument("backend '", name, "': Tern uses one Vulkan device, named 'vulkan'; ",
                            "pick it with TERN_VULKAN_DEVICE=<index or part of its name>");
  }
  for (const auto& n : known_names()) {
    if (n == name) {
      return Status(Code::kBackendUnavailable,
                    str_cat("backend '", name, "' is not built into this library"));
    }
  }
  return invalid_argument("unknown backend '", name, "' (known: cpu, cuda, cuda:N, vulkan, mps)");
}

}  // namespace tern::backends
