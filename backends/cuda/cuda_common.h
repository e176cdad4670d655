// What the CUDA kernel factories share: status conversion, the calling thread's stream and
// library handles, device buffers owned by kernels, and dtype mapping.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <memory>

#include "backends/cuda/kernels/launch.h"
#include "core/kernel.h"

namespace tern::cuda {

Status check(cudaError_t e, const char* what);
Status check(cublasStatus_t e, const char* what);
Status check(cudnnStatus_t e, const char* what);

#define TERN_CUDA_CHECK(expr) TERN_RETURN_IF_ERROR(::tern::cuda::check((expr), #expr))

// Every run queues its work on the calling host thread's stream: concurrent runs from several
// threads use several streams, and a run never waits on another's work.
inline cudaStream_t stream() {
  return cudaStreamPerThread;
}

// Library handles of the current device bound to the calling thread's stream (cuBLAS and cuDNN
// handles are per thread; the cuBLASLt handle is shared). A cuBLAS handle is given the step's
// workspace (kCublasWorkspace bytes of the run arena) after its stream, since cublasSetStream
// drops a workspace set before it: cuBLAS then never allocates inside a captured CUDA graph, and a
// captured graph's workspace is part of the addresses its capture is keyed by.
Expected<cublasHandle_t> cublas_handle(void* workspace);
Expected<cublasLtHandle_t> cublaslt_handle();
Expected<cudnnHandle_t> cudnn_handle();
// Creates the calling thread's handles for the current device now (before a capture: creating
// them allocates, which a capture may not).
Status warm_handles();

// Makes `device` current for the calling thread and restores the previous one when it goes.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  const Status& status() const { return status_; }

 private:
  int previous_ = -1;
  Status status_;
};

// The calling thread's device error word: pinned host memory mapped into the device, which
// kernels meeting bad data set bits of (bit 1: a Gather index out of range). Allocated on first
// use, kept for the thread's life.
Expected<unsigned*> error_word();
// After the calling thread's stream is idle: INVALID_ARGUMENT naming the error when a kernel set
// the word since the last call (which clears it), else OK.
Status take_device_error();

// Device memory that a kernel keeps (uploaded tables, workspaces found at prepare time), from the
// backend's caching allocator.
Expected<std::shared_ptr<void>> device_alloc(size_t bytes);
// Copies host bytes into a new device buffer (synchronously: prepare time only).
Expected<std::shared_ptr<void>> upload(const void* data, size_t bytes);

// The kernel-side element type of a dtype, or false.
bool elem_of(DType t, Elem* out);

// How much cuBLASLt / cuDNN workspace a GEMM or convolution may use.
constexpr size_t kGemmWorkspace = size_t{32} << 20;
// The workspace a cuBLAS call gets (NVIDIA's recommendation for Hopper; enough elsewhere).
constexpr size_t kCublasWorkspace = size_t{32} << 20;

}  // namespace tern::cuda
