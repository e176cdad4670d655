// The backends built into this library, by name. The one place that knows which are compiled in.
#pragma once

#include <string>
#include <vector>

#include "core/backend.h"

namespace tern {
struct CudaModule;
}

namespace tern::backends {

// Every backend name Tern knows, built or not ("cpu", "cuda", "vulkan", "mps").
const std::vector<std::string>& known_names();
// A name get() understands: one of known_names() or "cuda:N".
bool is_known(const std::string& name);
// The backend object; INVALID_ARGUMENT for an unknown name, BACKEND_UNAVAILABLE for one that is not
// built or has no device here.
Expected<Backend*> get(const std::string& name);
bool is_built(const std::string& name);
bool is_available(const std::string& name);
// The CUDA backend lives in a module (libtern_cuda.so) opened the first time one of the CUDA
// functions below, is_built/is_available("cuda") or get("cuda") is called; a process that asks
// for none of them never maps a CUDA library.
// The module's interface, or null when CUDA is not built or the module cannot be loaded.
const CudaModule* cuda_module();
// CUDA facts for the C API and tern info: devices (0 when not built or none), cuDNN's version
// number (-1 when not built), and a line about the devices, libraries and where the module was
// looked for.
int cuda_devices();
int64_t cudnn_version();
std::string cuda_report();
// The Vulkan device in use (name, type, driver, memory, fp16) and the others, or why none.
std::string vulkan_report();

}  // namespace tern::backends
