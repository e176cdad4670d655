#include "backends/registry.h"

#include <array>
#include <memory>
#include <mutex>

#include "backends/cpu/cpu_backend.h"
#if defined(TERN_HAVE_CUDA)
#include "backends/cuda/cuda_backend.h"
#endif
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

}  // namespace

const std::vector<std::string>& known_names() {
  static const std::vector<std::string> names = {"cpu", "cuda", "vulkan", "mps"};
  return names;
}

bool is_built(const std::string& name) {
#if defined(TERN_HAVE_CUDA)
  if (cuda_index(name) >= 0) return true;
#endif
#if defined(TERN_HAVE_VULKAN)
  if (name == "vulkan") return true;
#endif
  return name == "cpu";
}

bool is_available(const std::string& name) {
#if defined(TERN_HAVE_CUDA)
  const int d = cuda_index(name);
  if (d >= 0) return d < cuda_device_count();
#endif
#if defined(TERN_HAVE_VULKAN)
  if (name == "vulkan") return vulkan_available();
#endif
  return name == "cpu";
}

int cuda_devices() {
#if defined(TERN_HAVE_CUDA)
  return cuda_device_count();
#else
  return 0;
#endif
}

int64_t cudnn_version() {
#if defined(TERN_HAVE_CUDA)
  return cudnn_version_number();
#else
  return -1;
#endif
}

std::string cuda_report() {
#if defined(TERN_HAVE_CUDA)
  return str_cat(cuda_device_report(), "; cuDNN ", cudnn_version_number());
#else
  return "not built (configure with the CUDA toolkit: TERN_WITH_CUDA)";
#endif
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
#if defined(TERN_HAVE_CUDA)
  if (cuda >= 0) {
    constexpr int kMax = 64;
    if (cuda >= kMax || cuda >= cuda_device_count()) {
      return Status(Code::kBackendUnavailable,
                    str_cat("backend '", name, "': ", cuda_device_report()));
    }
    static std::array<std::unique_ptr<CudaBackend>, kMax> devices;
    static std::mutex mu;
    std::lock_guard<std::mutex> lock(mu);
    auto& b = devices[static_cast<size_t>(cuda)];
    if (!b) b = std::make_unique<CudaBackend>(cuda);
    return static_cast<Backend*>(b.get());
  }
#endif
  if (cuda >= 0) {
    return Status(Code::kBackendUnavailable,
                  str_cat("backend '", name, "' is not built into this library"));
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
