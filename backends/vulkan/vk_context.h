// The Vulkan device Tern computes on (DESIGN §1 backends/vulkan): instance and device selection,
// a sub-allocating buffer allocator, per-thread command recording submitted in chunks of a few
// milliseconds of device work (so the host, which asks a run's RunControl between kernels, never
// runs more than two chunks ahead of the device), and the pipeline and descriptor-set caches.
// Kernels see device memory as addresses (like CUDA pointers): every buffer is one chunk of a few
// large VkBuffers, an address names the chunk and the byte offset in it, and shaders bind whole
// chunks and take element offsets as push constants, so a descriptor set depends only on which
// chunks a dispatch touches.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "backends/vulkan/vk_api.h"
#include "core/status.h"

namespace tern::vk {

struct DeviceInfo {
  std::string name, driver, type;  // "llvmpipe (LLVM 15.0.6, 256 bits)", "Mesa 22.3.6", "cpu"
  uint32_t api_version = 0;
  uint64_t memory = 0;               // bytes of the largest device-local heap
  uint64_t max_buffer_range = 0;     // maxStorageBufferRange
  bool fp16_storage = false;         // storageBuffer16BitAccess
  bool fp16_arithmetic = false;      // shaderFloat16
  bool host_visible_memory = false;  // device memory the host reads directly (lavapipe, iGPUs)
};

// The memory type for a pool's buffers (0 device, 1 staging) among the `allowed` bits, or -1: the
// device pool takes device-local memory, host-visible only where it is host-cached as well.
int choose_memory_type(const VkPhysicalDeviceMemoryProperties& memory, uint32_t allowed,
                       int pool);

struct Pipeline {
  std::string shader;
  int bindings = 0;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
};

struct Stats {
  uint64_t submits = 0, dispatches = 0, copies = 0;
  uint64_t pipelines = 0, descriptor_sets = 0;
  uint64_t device_bytes = 0;     // bytes in device chunks
  uint64_t command_buffers = 0;  // alive (each with its pool and fence), a few per thread
  uint64_t busy_recorders = 0;   // threads with recorded or submitted work not yet waited for
  uint64_t deferred_frees = 0;   // freed blocks waiting for the device to be done with them
};

// The largest push-constant block a Tern shader uses (the minimum every device supports).
constexpr size_t kMaxPush = 128;

class Context {
 public:
  // The selected device (discrete GPU first, a CPU implementation such as lavapipe last;
  // TERN_VULKAN_DEVICE picks by index in that order or by part of the name), or why there is none.
  static Expected<Context*> get();
  // One line per physical device with the selected one marked, or why Vulkan is not usable.
  static std::string report();

  const DeviceInfo& info() const { return info_; }
  // Device memory of at least `bytes`; the address stays valid while the pointer lives. Freed
  // blocks return to their chunk once no recorded work can still use them.
  Expected<std::shared_ptr<void>> allocate(size_t bytes);
  // The compute pipeline of an embedded shader variant (created once, then cached).
  Expected<const Pipeline*> pipeline(const std::string& shader);

  // Work recorded into the calling thread's command buffers. A chunk is submitted once its
  // estimated device time reaches a few milliseconds (its first one sooner, so the device starts
  // early), and recording waits while two chunks are in flight; flush() submits the rest.
  // A dispatch of `p` with its bindings (device addresses; each binds its whole chunk) and push
  // constants.
  Status dispatch(const Pipeline& p, std::initializer_list<const void*> buffers, const void* push,
                  size_t push_bytes, uint32_t gx, uint32_t gy = 1, uint32_t gz = 1);
  // Host -> device through a staging buffer (the host data is copied before this returns).
  Status upload(const void* host, void* dev, size_t bytes);
  // Device -> device.
  Status copy(const void* src, void* dst, size_t bytes);
  // Device -> host: submits what this thread recorded and waits; complete on return.
  Status download(const void* dev, void* host, size_t bytes);
  // Submits this thread's recorded work (if any) and waits for it.
  Status flush();
  // Drops the calling thread's recorded work not yet submitted and waits for the submitted
  // chunks (a failed or stopped run's way out); the thread's error word is cleared.
  Status discard();
  // The calling thread's device error word: a uint32 in host-visible memory that shaders meeting
  // bad data (a Gather index out of range) set bits of. The flush or download completing work
  // recorded after this call reads it: non-zero fails it with INVALID_ARGUMENT naming the error
  // (bit 1: a Gather index out of range), and clears it for the next run.
  Expected<void*> error_word();

  Stats stats() const;
  ~Context() = delete;  // lives for the whole process (drivers may be unloaded at exit)

  struct Impl;  // Vulkan objects, allocator and caches (vk_context_impl.h; recorders: vk_recorder.h)

 private:
  Context() = default;
  Impl* impl_ = nullptr;
  DeviceInfo info_;
  friend struct Impl;
};

// The offset of a device address inside its chunk, in units of `unit` bytes (what shaders index
// their bound buffer with).
uint32_t offset_of(const void* addr, size_t unit);
// Workgroup counts for `n` invocations of `local`-sized groups, split over x and y where x would
// pass the 65535 every device supports; shaders rebuild the linear index from both.
void groups_1d(uint64_t n, uint32_t local, uint32_t* gx, uint32_t* gy);

}  // namespace tern::vk
