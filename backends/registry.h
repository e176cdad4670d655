// The backends built into this library, by name. The one place that knows which are compiled in.
#pragma once

#include <string>
#include <vector>

#include "core/backend.h"

namespace tern::backends {

// Every backend name Tern knows, built or not ("cpu", "cuda", "vulkan", "mps").
const std::vector<std::string>& known_names();
// The backend object; INVALID_ARGUMENT for an unknown name, BACKEND_UNAVAILABLE for one that is not
// built or has no device here.
Expected<Backend*> get(const std::string& name);
bool is_built(const std::string& name);
bool is_available(const std::string& name);
// CUDA facts for the C API and tern info: devices (0 when not built or none), cuDNN's version
// number (-1 when not built), and a line about the devices and libraries.
int cuda_devices();
int64_t cudnn_version();
std::string cuda_report();
// The Vulkan device in use (name, type, driver, memory, fp16) and the others, or why none.
std::string vulkan_report();

}  // namespace tern::backends
