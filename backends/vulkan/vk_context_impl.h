// Context's internals, shared by its two files: vk_context.cpp (device, memory chunks, pipelines,
// descriptor sets) and vk_recorder.cpp (each thread's command recording and submits).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backends/vulkan/vk_context.h"
#include "backends/vulkan/vk_device.h"

namespace tern::vk {

// One VkBuffer of device or staging memory that allocations are carved from; device addresses
// handed out are (index + 1) << 32 | offset (vk_context.cpp).
struct Chunk {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  char* mapped = nullptr;  // host view when the memory is host-visible
  bool coherent = true;
  bool cached = false;  // host reads of `mapped` are cached (else they cross the bus uncached)
  uint64_t size = 0;
  int pool = 0;                       // 0 device, 1 staging
  size_t index = 0;                   // in g_chunks
  std::map<uint64_t, uint64_t> free;  // offset -> size
};

struct Context::Impl {
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  VkPhysicalDeviceMemoryProperties memory{};
  uint64_t max_range = 0;
  VkPipelineCache pipeline_cache = VK_NULL_HANDLE;

  std::mutex queue_mu;  // vkQueueSubmit needs the queue externally synchronized
  std::mutex mem_mu;
  std::vector<Chunk*> pools[2];
  std::vector<std::pair<Chunk*, std::pair<uint64_t, uint64_t>>> deferred;  // frees while busy
  int busy = 0;  // recorders holding recorded or in-flight work

  std::mutex cache_mu;
  std::map<std::string, std::unique_ptr<Pipeline>> pipelines;
  std::map<std::vector<uint64_t>, VkDescriptorSet> sets;  // (layout, buffers...) -> set
  std::vector<VkDescriptorPool> set_pools;
  uint32_t sets_left = 0;

  std::atomic<uint64_t> submits{0}, dispatches{0}, copies{0}, device_bytes{0};
  std::atomic<uint64_t> command_buffers{0};

  Expected<Chunk*> new_chunk(int pool, uint64_t size);
  Expected<std::shared_ptr<void>> allocate(int pool, uint64_t bytes);
  void release(Chunk* c, uint64_t offset, uint64_t size);
  void free_block(Chunk* c, uint64_t offset, uint64_t size);
  int memory_type(uint32_t allowed, int pool) const;
  Expected<VkDescriptorSet> descriptor_set(const Pipeline& p, const VkBuffer* buffers);
  void recorder_done();
};

}  // namespace tern::vk
