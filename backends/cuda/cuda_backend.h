// The CUDA backend (DESIGN §1 backends/cuda), built into the module libtern_cuda.so: device memory
// from a caching allocator, copies on the calling thread's stream, kernels registered under "cuda"
// in the module's own registry, and CUDA graph capture. One backend object per device ("cuda" is
// device 0, "cuda:N" device N). Every method works on its own device and gives the calling thread
// its previous current device back; a run makes the device current from begin_run to end_run.
#pragma once

#include <cstdint>
#include <string>

#include "backends/cuda/cuda_module.h"
#include "core/backend.h"

namespace tern {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device);
  const char* name() const override { return name_.c_str(); }
  const char* kernel_backend() const override { return "cuda"; }
  const KernelRegistry& kernels() const override;
  bool is_built() const override { return true; }
  bool is_available() const override;
  Device device() const override { return {DeviceType::kCuda, device_}; }
  Expected<std::unique_ptr<Kernel>> prepare(const OpContext& ctx) const override;
  void begin_run(const FlagValues& flags) override;
  void end_run(const FlagValues& flags) override;
  Status synchronize() override;
  Status pace() override;
  Expected<std::shared_ptr<void>> allocate(size_t bytes) override;
  Status copy_to_device(const Tensor& host, Tensor& device) override;
  Status copy_to_host(const Tensor& device, Tensor& host) override;
  Status copy_on_device(const Tensor& src, Tensor& dst) override;
  bool can_capture() const override { return true; }
  Expected<std::shared_ptr<void>> capture(const std::function<Status()>& body) override;
  Status replay(void* captured) override;

 private:
  int device_;
  std::string name_;
};

// What the module's interface table (cuda_module.h) points to; all safe without a GPU or driver.
int cuda_device_count();
std::string cuda_device_report();
int64_t cudnn_version_number();  // e.g. 91900
Backend* cuda_backend(int device);
CudaMemoryStats cuda_memory_stats(int device);
void cuda_empty_cache(int device);
int cuda_current_device();  // the calling thread's current device (-1 when there is none)

}  // namespace tern
