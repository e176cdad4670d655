// The CUDA backend's module interface: what libtern_cuda.so gives libtern (backends/registry.cpp
// opens it through backends/module_loader.h on first use). No CUDA header is included here, so
// libtern compiles and links without the toolkit's libraries.
#pragma once

#include <cstdint>
#include <string>

#include "backends/module_loader.h"
#include "core/backend.h"
#include "ops/attention.h"

namespace tern {

// The caching allocator's counters of one device (bytes handed out now, cached for reuse, the
// peak in use, driver allocations made).
struct CudaMemoryStats {
  uint64_t in_use = 0, cached = 0, peak = 0, device_allocs = 0;
};

struct CudaModule {
  ModuleHeader header;
  // Devices the driver reports; 0 when the driver or a device is missing.
  int (*device_count)();
  // The devices, runtime and driver versions, or why there is no device (e.g. "no CUDA driver:
  // libcuda.so.1 not found").
  std::string (*device_report)();
  // cuDNN's version number (e.g. 91900), read from the loaded library.
  int64_t (*cudnn_version)();
  // The backend object of device `device` (0 <= device < kMaxCudaDevices). Creating it touches no
  // device; the caller checks device_count before running anything on it.
  Backend* (*backend)(int device);
  // Why the CUDA attention kernel of tern_sdp_backend `sdp` would not take case `c` ("" when it
  // would).
  std::string (*sdp_refusal)(int sdp, const ops::SdpCase& c);
  CudaMemoryStats (*memory_stats)(int device);
  // Returns every cached block of the device to the driver.
  void (*empty_cache)(int device);
  // The calling thread's current device (-1 when there is none): runs and copies must leave it
  // as they found it.
  int (*current_device)();
};

constexpr int kMaxCudaDevices = 64;

namespace backends {
// libtern's side (backends/cuda/cuda_record.cpp): the loaded module's table, opened on the first
// call; null when the module or a library it needs cannot be loaded.
const CudaModule* cuda_module();
}  // namespace backends

}  // namespace tern

// The module's one exported symbol.
extern "C" const tern::ModuleHeader* tern_cuda_module();
