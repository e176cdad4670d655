#include "backends/cuda/cuda_backend.h"

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <vector>

#include "backends/cuda/cuda_common.h"
#include "core/kernel_registry.h"

namespace tern {

void register_cuda_kernels(KernelRegistry& r);  // generated: every register_cuda_* function

namespace cuda {

namespace {

constexpr int kMaxDevices = 64;

// A caching allocator per device. Blocks go back to a free list, not to the driver, and a request
// takes the smallest cached block that fits it (up to twice its size); the driver is asked only
// on a miss, and when it is out of memory the cache is returned to it and the request retried.
// A block returns to the cache only when nothing queued still uses it: the session frees device
// buffers (arenas, bound outputs, plan constants) after synchronizing the stream that used them,
// so a cached block is safe to hand to any stream.
class CachingAllocator {
 public:
  explicit CachingAllocator(int device) : device_(device) {}

  Expected<std::shared_ptr<void>> allocate(size_t bytes) {
    const size_t size = round(bytes);
    void* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.lower_bound(size);
      if (it != free_.end() && it->first <= 2 * size) {
        p = it->second;
        sizes_[p] = it->first;
        stats_.cached -= it->first;
        free_.erase(it);
      }
    }
    if (!p) {
      int prev = 0;
      cudaGetDevice(&prev);
      if (prev != device_) cudaSetDevice(device_);
      cudaError_t e = cudaMalloc(&p, size);
      if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        release_cached();
        e = cudaMalloc(&p, size);
      }
      if (prev != device_) cudaSetDevice(prev);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return Status(Code::kOutOfMemory,
                      str_cat("cuda:", device_, ": cannot allocate ", size, " bytes (",
                              cudaGetErrorString(e), "; ", stats_.in_use, " in use)"));
      }
      std::lock_guard<std::mutex> lock(mu_);
      sizes_[p] = size;
      ++stats_.device_allocs;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.in_use += sizes_[p];
      stats_.peak = std::max(stats_.peak, stats_.in_use);
    }
    return std::shared_ptr<void>(p, [this](void* q) { release(q); });
  }

  void release_cached() {
    std::vector<void*> blocks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [size, p] : free_) {
        blocks.push_back(p);
        sizes_.erase(p);
      }
      free_.clear();
      stats_.cached = 0;
    }
    for (void* p : blocks) cudaFree(p);
  }

  CudaMemoryStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  // 512-byte granules below 1 MiB, 2 MiB ones above (fewer distinct sizes to cache).
  static size_t round(size_t bytes) {
    const size_t g = bytes < (size_t{1} << 20) ? 512 : (size_t{2} << 20);
    return std::max<size_t>(g, (bytes + g - 1) / g * g);
  }
  void release(void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t size = sizes_[p];
    stats_.in_use -= size;
    stats_.cached += size;
    free_.emplace(size, p);
  }

  int device_;
  std::mutex mu_;
  std::multimap<size_t, void*> free_;
  std::map<void*, size_t> sizes_;
  CudaMemoryStats stats_;
};

CachingAllocator& allocator(int device) {
  static std::array<std::unique_ptr<CachingAllocator>, kMaxDevices> all;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  auto& a = all[static_cast<size_t>(device)];
  if (!a) a = std::make_unique<CachingAllocator>(device);
  return *a;
}

int current_device() {
  int d = 0;
  if (cudaGetDevice(&d) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return d;
}

// Per-thread handles, destroyed when the thread exits.
struct ThreadHandles {
  std::map<int, cublasHandle_t> cublas;
  std::map<int, cudnnHandle_t> cudnn;
  std::map<int, std::shared_ptr<void>> cublas_workspace;
  ~ThreadHandles() {
    for (auto& [d, h] : cublas) cublasDestroy(h);
    for (auto& [d, h] : cudnn) cudnnDestroy(h);
  }
};
thread_local ThreadHandles t_handles;

}  // namespace

Status check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::ok();
  (void)cudaGetLastError();  // clear a sticky-free error so later calls do not report it
  const Code code = e == cudaErrorMemoryAllocation ? Code::kOutOfMemory
                    : e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver
                        ? Code::kBackendUnavailable
                        : Code::kInternal;
  return Status(code, str_cat(what, ": ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")"));
}

Status check(cublasStatus_t e, const char* what) {
  if (e == CUBLAS_STATUS_SUCCESS) return Status::ok();
  const Code code = e == CUBLAS_STATUS_ALLOC_FAILED    ? Code::kOutOfMemory
                    : e == CUBLAS_STATUS_NOT_SUPPORTED ? Code::kUnsupported
                                                       : Code::kInternal;
  return Status(code,
                str_cat(what, ": ", cublasGetStatusName(e), " (", cublasGetStatusString(e), ")"));
}

Status check(cudnnStatus_t e, const char* what) {
  if (e == CUDNN_STATUS_SUCCESS) return Status::ok();
  const Code code = e == CUDNN_STATUS_ALLOC_FAILED    ? Code::kOutOfMemory
                    : e == CUDNN_STATUS_NOT_SUPPORTED ? Code::kUnsupported
                                                      : Code::kInternal;
  return Status(code, str_cat(what, ": ", cudnnGetErrorString(e)));
}

Expected<cublasHandle_t> cublas_handle() {
  const int d = current_device();
  auto it = t_handles.cublas.find(d);
  if (it == t_handles.cublas.end()) {
    cublasHandle_t h = nullptr;
    TERN_CUDA_CHECK(cublasCreate(&h));
    // A workspace of its own, so cuBLAS never allocates inside a captured CUDA graph.
    auto ws = allocator(d).allocate(kGemmWorkspace);
    if (!ws) {
      cublasDestroy(h);
      return ws.status();
    }
    TERN_CUDA_CHECK(cublasSetWorkspace(h, ws->get(), kGemmWorkspace));
    t_handles.cublas_workspace[d] = std::move(*ws);
    it = t_handles.cublas.emplace(d, h).first;
  }
  TERN_CUDA_CHECK(cublasSetStream(it->second, stream()));
  return it->second;
}

Expected<cublasLtHandle_t> cublaslt_handle() {
  static std::array<cublasLtHandle_t, kMaxDevices> handles{};
  static std::mutex mu;
  const int d = current_device();
  std::lock_guard<std::mutex> lock(mu);
  if (!handles[static_cast<size_t>(d)])
    TERN_CUDA_CHECK(cublasLtCreate(&handles[static_cast<size_t>(d)]));
  return handles[static_cast<size_t>(d)];
}

Expected<cudnnHandle_t> cudnn_handle() {
  const int d = current_device();
  auto it = t_handles.cudnn.find(d);
  if (it == t_handles.cudnn.end()) {
    cudnnHandle_t h = nullptr;
    TERN_CUDA_CHECK(cudnnCreate(&h));
    it = t_handles.cudnn.emplace(d, h).first;
  }
  TERN_CUDA_CHECK(cudnnSetStream(it->second, stream()));
  return it->second;
}

Expected<std::shared_ptr<void>> device_alloc(size_t bytes) {
  return allocator(current_device()).allocate(bytes);
}

Expected<std::shared_ptr<void>> upload(const void* data, size_t bytes) {
  TERN_ASSIGN_OR_RETURN(std::shared_ptr<void> mem, device_alloc(bytes));
  if (bytes) {
    TERN_CUDA_CHECK(cudaMemcpyAsync(mem.get(), data, bytes, cudaMemcpyHostToDevice, stream()));
    TERN_CUDA_CHECK(cudaStreamSynchronize(stream()));
  }
  return mem;
}

bool elem_of(DType t, Elem* out) {
  switch (t) {
    case DType::kFloat32:
      *out = Elem::kF32;
      return true;
    case DType::kFloat16:
      *out = Elem::kF16;
      return true;
    case DType::kBFloat16:
      *out = Elem::kBF16;
      return true;
    case DType::kInt32:
      *out = Elem::kI32;
      return true;
    case DType::kInt64:
      *out = Elem::kI64;
      return true;
    case DType::kUInt8:
      *out = Elem::kU8;
      return true;
    case DType::kBool:
      *out = Elem::kBool;
      return true;
    default:
      return false;
  }
}

}  // namespace cuda

int cuda_device_count() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

std::string cuda_device_report() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return str_cat("no CUDA device (", cudaGetErrorString(e), ")");
  }
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::string s = str_cat(n, " device(s), runtime ", runtime / 1000, ".", (runtime % 1000) / 10,
                          ", driver ", driver / 1000, ".", (driver % 1000) / 10);
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess) continue;
    s += str_cat("; cuda:", d, " ", p.name, ", compute ", p.major, ".", p.minor, ", ",
                 static_cast<double>(p.totalGlobalMem) / (1 << 30), " GiB");
  }
  return s;
}

int64_t cudnn_version_number() {
  return static_cast<int64_t>(cudnnGetVersion());
}

CudaMemoryStats cuda_memory_stats(int device) {
  if (device < 0 || device >= cuda::kMaxDevices) return {};
  return cuda::allocator(device).stats();
}

void cuda_empty_cache(int device) {
  if (device >= 0 && device < cuda::kMaxDevices) cuda::allocator(device).release_cached();
}

CudaBackend::CudaBackend(int device)
    : device_(device), name_(device == 0 ? "cuda" : str_cat("cuda:", device)) {
  static std::once_flag once;
  std::call_once(once, [] { register_cuda_kernels(KernelRegistry::global()); });
}

bool CudaBackend::is_available() const {
  return device_ < cuda_device_count();
}

Expected<std::unique_ptr<Kernel>> CudaBackend::prepare(const OpContext& ctx) const {
  for (const auto& t : ctx.inputs) {
    if (t.block) return unsupported("the CUDA kernels read plain layouts only");
  }
  if (cuda::current_device() != device_) {
    TERN_RETURN_IF_ERROR(cuda::check(cudaSetDevice(device_), "cudaSetDevice"));
  }
  return Backend::prepare(ctx);
}

void CudaBackend::begin_run(const FlagValues&) {
  if (cuda::current_device() != device_) cudaSetDevice(device_);
}

Status CudaBackend::synchronize() {
  TERN_CUDA_CHECK(cudaStreamSynchronize(cuda::stream()));
  return Status::ok();
}

Expected<std::shared_ptr<void>> CudaBackend::allocate(size_t bytes) {
  return cuda::allocator(device_).allocate(bytes);
}

Status CudaBackend::copy_to_device(const Tensor& host, Tensor& device) {
  if (host.byte_size() != device.byte_size()) return internal_error("copy size mismatch");
  if (host.dtype() == DType::kString) return unsupported("string tensors cannot go to CUDA");
  if (!host.byte_size()) return Status::ok();
  TERN_CUDA_CHECK(cudaMemcpyAsync(device.raw(), host.raw(), host.byte_size(),
                                  cudaMemcpyHostToDevice, cuda::stream()));
  return Status::ok();
}

Status CudaBackend::copy_to_host(const Tensor& device, Tensor& host) {
  if (host.byte_size() != device.byte_size()) return internal_error("copy size mismatch");
  if (!host.byte_size()) return Status::ok();
  TERN_CUDA_CHECK(cudaMemcpyAsync(host.raw(), device.raw(), host.byte_size(),
                                  cudaMemcpyDeviceToHost, cuda::stream()));
  TERN_CUDA_CHECK(cudaStreamSynchronize(cuda::stream()));
  return Status::ok();
}

Status CudaBackend::copy_on_device(const Tensor& src, Tensor& dst) {
  if (src.byte_size() != dst.byte_size()) return internal_error("copy size mismatch");
  if (!src.byte_size() || src.raw() == dst.raw()) return Status::ok();
  TERN_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.byte_size(), cudaMemcpyDeviceToDevice,
                                  cuda::stream()));
  return Status::ok();
}

Expected<std::shared_ptr<void>> CudaBackend::capture(const std::function<Status()>& body) {
  TERN_CUDA_CHECK(cudaStreamBeginCapture(cuda::stream(), cudaStreamCaptureModeThreadLocal));
  Status st = body();
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(cuda::stream(), &graph);
  if (!st.is_ok()) {
    if (graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    return st;
  }
  TERN_CUDA_CHECK(end);
  cudaGraphExec_t exec = nullptr;
  const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  TERN_CUDA_CHECK(inst);
  return std::shared_ptr<void>(
      exec, [](void* e) { cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(e)); });
}

Status CudaBackend::replay(void* captured) {
  TERN_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(captured), cuda::stream()));
  return Status::ok();
}

}  // namespace tern
