#include "backends/registry.h"

#include "backends/cpu/cpu_backend.h"

namespace tern::backends {

const std::vector<std::string>& known_names() {
  static const std::vector<std::string> names = {"cpu", "cuda", "vulkan", "mps"};
  return names;
}

bool is_built(const std::string& name) {
  return name == "cpu";
}
bool is_available(const std::string& name) {
  return name == "cpu";
}

Expected<Backend*> get(const std::string& name) {
  if (name == "cpu") {
    static CpuBackend cpu;
    return static_cast<Backend*>(&cpu);
  }
  for (const auto& n : known_names()) {
    if (n == name) {
      return Status(Code::kBackendUnavailable,
                    str_cat("backend '", name, "' is not built into this library"));
    }
  }
  return invalid_argument("unknown backend '", name, "' (known: cpu, cuda, vulkan, mps)");
}

}  // namespace tern::backends
