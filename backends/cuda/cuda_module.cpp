// The entry point of libtern_cuda.so: the interface table libtern reads (cuda_module.h).
#include "backends/cuda/cuda_module.h"

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_sdp.h"
#include "tern_build_id.h"

namespace {

const tern::CudaModule kModule = {
    {TERN_BUILD_ID, sizeof(tern::CudaModule)},
    tern::cuda_device_count,
    tern::cuda_device_report,
    tern::cudnn_version_number,
    tern::cuda_backend,
    tern::cuda_sdp_refusal,
    tern::cuda_memory_stats,
    tern::cuda_empty_cache,
    tern::cuda_current_device,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const tern::ModuleHeader* tern_cuda_module() {
  return &kModule.header;
}
