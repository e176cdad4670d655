// The CUDA backend (DESIGN §1 backends/cuda): device memory from a caching allocator, copies on
// the calling thread's stream, kernels registered under "cuda", and CUDA graph capture. One
// backend object per device ("cuda" is device 0, "cuda:N" device N).
#pragma once

#include <cstdint>
#include <string>

#include "core/backend.h"

namespace tern {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device);
  const char* name() const override { return name_.c_str(); }
  const char* kernel_backend() const override { return "cuda"; }
  bool is_built() const override { return true; }
  bool is_available() const override;
  Device device() const override { return {DeviceType::kCuda, device_}; }
  Expected<std::unique_ptr<Kernel>> prepare(const OpContext& ctx) const override;
  void begin_run(const FlagValues& flags) override;
  Status synchronize() override;
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

// Queries for the C API (all safe without a GPU or driver).
int cuda_device_count();
// "NVIDIA H100 80GB HBM3, compute 9.0, 79.1 GiB" for tern info, or why there is none.
std::string cuda_device_report();
int64_t cudnn_version_number();  // e.g. 91900; -1 when unavailable
// The allocator's counters (bytes handed out now, cached for reuse, the peak in use).
struct CudaMemoryStats {
  uint64_t in_use = 0, cached = 0, peak = 0, device_allocs = 0;
};
CudaMemoryStats cuda_memory_stats(int device);
// Returns every cached block to the driver.
void cuda_empty_cache(int device);

}  // namespace tern
