#include "backends/cuda/cuda_backend.h"

#include <dlfcn.h>

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
      DeviceGuard guard(device_);
      TERN_RETURN_IF_ERROR(guard.status());
      cudaError_t e = cudaMalloc(&p, size);
      if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        release_cached();
        e = cudaMalloc(&p, size);
      }
      if (e != cudaSuccess) {
        // Out of memory only when the driver says so; anything else (no device, a sticky error
        // from an earlier kernel) keeps its own code.
        const Status st = check(e, "cudaMalloc");
        std::lock_guard<std::mutex> lock(mu_);
        return Status(st.code(), str_cat("cuda:", device_, ": cannot allocate ", size, " bytes (",
                                         st.message(), "; ", stats_.in_use, " in use)"));
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
    if (blocks.empty()) return;
    DeviceGuard guard(device_);
    // A failed cudaFree leaves nothing to undo: the block is gone from the cache either way.
    for (void* p : blocks) (void)check(cudaFree(p), "cudaFree");
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

// The allocators, backends and kernel registry are made once and never destroyed: device buffers
// held by objects that die at process exit (a session a static destructor frees, a thread's
// handles) still return to their allocator then.
std::mutex g_mu;
std::array<CachingAllocator*, kMaxCudaDevices> g_allocators{};
std::array<CudaBackend*, kMaxCudaDevices> g_backends{};

CachingAllocator& allocator(int device) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto& a = g_allocators[static_cast<size_t>(device)];
  if (!a) a = new CachingAllocator(device);
  return *a;
}

KernelRegistry& registry() {
  static KernelRegistry* r = [] {
    auto* k = new KernelRegistry();
    register_cuda_kernels(*k);
    return k;
  }();
  return *r;
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
  ~ThreadHandles() {
    for (auto& [d, h] : cublas) (void)cublasDestroy(h);
    for (auto& [d, h] : cudnn) (void)cudnnDestroy(h);
  }
};
thread_local ThreadHandles t_handles;

// The devices that were current before each begin_run on this thread, for end_run.
thread_local std::vector<int> t_saved_devices;

// Pacing of stoppable runs (Backend::pace): every kPaceSteps device steps an event is recorded on
// the thread's stream after waiting for the one recorded two chunks before, so at most two chunks
// of steps are queued ahead of the device and a stopped run waits for those only (not for the
// whole model, which the host may otherwise have queued long before the device reached it).
constexpr int kPaceSteps = 8;
struct Pacer {
  std::array<cudaEvent_t, 2> events{};
  std::array<bool, 2> recorded{};
  int next = 0;
  int steps = 0;
};
struct ThreadPacers {
  std::map<int, Pacer> by_device;
  ~ThreadPacers() {
    for (auto& [d, p] : by_device) {
      for (cudaEvent_t e : p.events) {
        if (e) (void)cudaEventDestroy(e);
      }
    }
  }
};
thread_local ThreadPacers t_pacers;

}  // namespace

DeviceGuard::DeviceGuard(int device) {
  int d = -1;
  if (cudaGetDevice(&d) != cudaSuccess) {
    (void)cudaGetLastError();
    d = -1;
  }
  if (d == device) return;
  previous_ = d;
  status_ = check(cudaSetDevice(device), "cudaSetDevice");
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) (void)check(cudaSetDevice(previous_), "cudaSetDevice");
}

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

Expected<cublasHandle_t> cublas_handle(void* workspace) {
  const int d = current_device();
  auto it = t_handles.cublas.find(d);
  if (it == t_handles.cublas.end()) {
    cublasHandle_t h = nullptr;
    TERN_CUDA_CHECK(cublasCreate(&h));
    it = t_handles.cublas.emplace(d, h).first;
  }
  TERN_CUDA_CHECK(cublasSetStream(it->second, stream()));
  if (workspace) TERN_CUDA_CHECK(cublasSetWorkspace(it->second, workspace, kCublasWorkspace));
  return it->second;
}

Expected<cublasLtHandle_t> cublaslt_handle() {
  static std::array<cublasLtHandle_t, kMaxCudaDevices> handles{};
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

Status warm_handles() {
  TERN_RETURN_IF_ERROR(error_word().status());  // (pinned memory: never allocated in a capture)
  TERN_RETURN_IF_ERROR(cublas_handle(nullptr).status());
  TERN_RETURN_IF_ERROR(cublaslt_handle().status());
  return cudnn_handle().status();
}

namespace {

struct ErrorWord {
  unsigned* host = nullptr;  // pinned and mapped; with unified addressing, also the device's
  unsigned* device = nullptr;
  ~ErrorWord() {
    if (host) (void)cudaFreeHost(host);  // (fails harmlessly once the runtime is unloading)
  }
};
thread_local ErrorWord t_error;

}  // namespace

Expected<unsigned*> error_word() {
  if (!t_error.host) {
    void* host = nullptr;
    TERN_CUDA_CHECK(cudaHostAlloc(&host, sizeof(unsigned), cudaHostAllocMapped));
    void* device = nullptr;
    const cudaError_t e = cudaHostGetDevicePointer(&device, host, 0);
    if (e != cudaSuccess) {
      (void)cudaFreeHost(host);
      return check(e, "cudaHostGetDevicePointer");
    }
    t_error.host = static_cast<unsigned*>(host);
    t_error.device = static_cast<unsigned*>(device);
    *t_error.host = 0;
  }
  return t_error.device;
}

Status take_device_error() {
  if (!t_error.host) return Status::ok();
  const unsigned bits = *static_cast<volatile unsigned*>(t_error.host);
  if (!bits) return Status::ok();
  *t_error.host = 0;
  return invalid_argument(
      "CUDA: a Gather index on the device is out of range for its axis (indices must lie in "
      "[-dim, dim)); the outputs of this run are not valid");
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
    return std::min(n, kMaxCudaDevices);
  }();
  return count;
}

std::string cuda_device_report() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (e == cudaErrorInsufficientDriver) {
      // The CUDA runtime opens the driver library itself; say whether it is missing or too old.
      void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
      if (!lib) {
        const char* why = dlerror();
        return str_cat("no CUDA driver (libcuda.so.1: ", why ? why : "not found", ")");
      }
      dlclose(lib);
      int driver = 0;
      (void)cudaDriverGetVersion(&driver);
      (void)cudaGetLastError();
      return str_cat("the CUDA driver (", driver / 1000, ".", (driver % 1000) / 10,
                     ") is older than the CUDA runtime ", CUDART_VERSION / 1000, ".",
                     (CUDART_VERSION % 1000) / 10, " Tern was built with");
    }
    return str_cat("no CUDA device (", cudaGetErrorName(e), ": ", cudaGetErrorString(e), ")");
  }
  int runtime = 0, driver = 0;
  (void)cudaRuntimeGetVersion(&runtime);
  (void)cudaDriverGetVersion(&driver);
  (void)cudaGetLastError();
  std::string s = str_cat(n, " device(s), runtime ", runtime / 1000, ".", (runtime % 1000) / 10,
                          ", driver ", driver / 1000, ".", (driver % 1000) / 10);
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    s += str_cat("; cuda:", d, " ", p.name, ", compute ", p.major, ".", p.minor, ", ",
                 static_cast<double>(p.totalGlobalMem) / (1 << 30), " GiB");
  }
  return s;
}

int64_t cudnn_version_number() {
  return static_cast<int64_t>(cudnnGetVersion());
}

Backend* cuda_backend(int device) {
  if (device < 0 || device >= kMaxCudaDevices) return nullptr;
  std::lock_guard<std::mutex> lock(cuda::g_mu);
  auto& b = cuda::g_backends[static_cast<size_t>(device)];
  if (!b) b = new CudaBackend(device);
  return b;
}

CudaMemoryStats cuda_memory_stats(int device) {
  if (device < 0 || device >= kMaxCudaDevices) return {};
  return cuda::allocator(device).stats();
}

void cuda_empty_cache(int device) {
  if (device >= 0 && device < kMaxCudaDevices) cuda::allocator(device).release_cached();
}

int cuda_current_device() {
  int d = -1;
  if (cudaGetDevice(&d) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return d;
}

CudaBackend::CudaBackend(int device)
    : device_(device), name_(device == 0 ? "cuda" : str_cat("cuda:", device)) {}

const KernelRegistry& CudaBackend::kernels() const {
  return cuda::registry();
}

bool CudaBackend::is_available() const {
  return device_ < cuda_device_count();
}

Expected<std::unique_ptr<Kernel>> CudaBackend::prepare(const OpContext& ctx) const {
  // The module has its own copy of the flag registry, which nobody sets: kernels must read the
  // plan's values, never fall back to "the global ones".
  if (!ctx.flags) return internal_error(ctx.where, ": a CUDA kernel asked for without the flags");
  for (const auto& t : ctx.inputs) {
    if (t.block) return unsupported("the CUDA kernels read plain layouts only");
  }
  cuda::DeviceGuard guard(device_);
  TERN_RETURN_IF_ERROR(guard.status());
  return Backend::prepare(ctx);
}

void CudaBackend::begin_run(const FlagValues&) {
  const int previous = cuda_current_device();
  cuda::t_saved_devices.push_back(previous);
  if (previous != device_) (void)cuda::check(cudaSetDevice(device_), "cudaSetDevice");
}

void CudaBackend::end_run(const FlagValues&) {
  if (cuda::t_saved_devices.empty()) return;
  const int previous = cuda::t_saved_devices.back();
  cuda::t_saved_devices.pop_back();
  if (previous >= 0 && previous != device_) {
    (void)cuda::check(cudaSetDevice(previous), "cudaSetDevice");
  }
}

Status CudaBackend::synchronize() {
  cuda::DeviceGuard guard(device_);
  TERN_RETURN_IF_ERROR(guard.status());
  TERN_CUDA_CHECK(cudaStreamSynchronize(cuda::stream()));
  return cuda::take_device_error();
}

Status CudaBackend::pace() {
  cuda::Pacer& p = cuda::t_pacers.by_device[device_];
  if (++p.steps < cuda::kPaceSteps) return Status::ok();
  p.steps = 0;
  cuda::DeviceGuard guard(device_);
  TERN_RETURN_IF_ERROR(guard.status());
  for (cudaEvent_t& e : p.events) {
    if (!e) TERN_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  const size_t i = static_cast<size_t>(p.next);
  if (p.recorded[i]) TERN_CUDA_CHECK(cudaEventSynchronize(p.events[i]));
  TERN_CUDA_CHECK(cudaEventRecord(p.events[i], cuda::stream()));
  p.recorded[i] = true;
  p.next ^= 1;
  return Status::ok();
}

Expected<std::shared_ptr<void>> CudaBackend::allocate(size_t bytes) {
  return cuda::allocator(device_).allocate(bytes);
}

Status CudaBackend::copy_to_device(const Tensor& host, Tensor& device) {
  if (host.byte_size() != device.byte_size()) return internal_error("copy size mismatch");
  if (host.dtype() == DType::kString) return unsupported("string tensors cannot go to CUDA");
  if (!host.byte_size()) return Status::ok();
  cuda::DeviceGuard guard(device_);
  TERN_RETURN_IF_ERROR(guard.status());
  TERN_CUDA_CHECK(cudaMemcpyAsync(device.raw(), host.raw(), host.byte_size(),
                                  cudaMemcpyHostToDevice, cuda::stream()));
  return Status::ok();
}

Status CudaBackend::copy_to_host(const Tensor& device, Tensor& host) {
  if (host.byte_size() != device.byte_size()) return internal_error("copy size mismatch");
  if (!host.byte_size()) return Status::ok();
  cuda::DeviceGuard guard(device_);
  TERN_RETURN_IF_ERROR(guard.status());
  TERN_CUDA_CHECK(cudaMemcpyAsync(host.raw(), device.raw(), host.byte_size(),
                                  cudaMemcpyDeviceToHost, cuda::stream()));
  TERN_CUDA_CHECK(cudaStreamSynchronize(cuda::stream()));
  return Status::ok();
}

Status CudaBackend::copy_on_device(const Tensor& src, Tensor& dst) {
  if (src.byte_size() != dst.byte_size()) return internal_error("copy size mismatch");
  if (!src.byte_size() || src.raw() == dst.raw()) return Status::ok();
  cuda::DeviceGuard guard(device_);
  TERN_RETURN_IF_ERROR(guard.status());
  TERN_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.byte_size(), cudaMemcpyDeviceToDevice,
                                  cuda::stream()));
  return Status::ok();
}

Expected<std::shared_ptr<void>> CudaBackend::capture(const std::function<Status()>& body) {
  cuda::DeviceGuard guard(device_);
  TERN_RETURN_IF_ERROR(guard.status());
  // Handles are made (and allocate) outside the capture.
  TERN_RETURN_IF_ERROR(cuda::warm_handles());
  TERN_CUDA_CHECK(cudaStreamBeginCapture(cuda::stream(), cudaStreamCaptureModeThreadLocal));
  Status st = body();
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(cuda::stream(), &graph);
  if (!st.is_ok() || end != cudaSuccess) {
    if (graph) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    // The launches were recorded, not run: the caller runs them again without capturing.
    return st.is_ok() ? cuda::check(end, "cudaStreamEndCapture") : st;
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  TERN_CUDA_CHECK(inst);
  return std::shared_ptr<void>(
      exec, [](void* e) { (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(e)); });
}

Status CudaBackend::replay(void* captured) {
  cuda::DeviceGuard guard(device_);
  TERN_RETURN_IF_ERROR(guard.status());
  TERN_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(captured), cuda::stream()));
  return Status::ok();
}

}  // namespace tern
