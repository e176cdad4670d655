#include "backends/vulkan/vk_context.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#include "backends/vulkan/shader_table.h"
#include "backends/vulkan/vk_device.h"

namespace tern::vk {

namespace {

constexpr uint64_t kAlign = 256;
constexpr uint64_t kChunkBytes = 64ull << 20;
constexpr size_t kMaxChunks = 4096;
constexpr int kChunkShift = 32;  // address = (chunk + 1) << 32 | offset

struct Chunk {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  char* mapped = nullptr;  // host view when the memory is host-visible
  bool coherent = true;
  uint64_t size = 0;
  int pool = 0;                       // 0 device, 1 staging
  size_t index = 0;                   // in g_chunks
  std::map<uint64_t, uint64_t> free;  // offset -> size
};

std::array<std::atomic<Chunk*>, kMaxChunks> g_chunks{};

Chunk* chunk_of(const void* addr, uint64_t* offset) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  const uint64_t index = (static_cast<uint64_t>(a) >> kChunkShift) - 1;
  if (index >= kMaxChunks) return nullptr;
  *offset = static_cast<uint64_t>(a) & ((1ull << kChunkShift) - 1);
  return g_chunks[index].load(std::memory_order_acquire);
}

}  // namespace

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

namespace {

using Clock = std::chrono::steady_clock;

// How a thread's work is cut into submits. A chunk aims at chunk_ns() of device time, the first of
// a burst (nothing in flight) at a quarter of that so the device starts while the host records the
// next; a cancelled run waits for at most the chunk running and the one queued behind it. The
// device time of a chunk is estimated from its work units (workgroups, plus one per command, plus
// one per 64 KiB copied) at the nanoseconds per unit measured on the chunks this thread waited
// for while they ran. The host records the next chunk while the device runs one, so chunking
// costs whole runs little (a few microseconds per submit).
constexpr double kStartNsPerUnit = 1000;  // before anything was measured
constexpr uint32_t kMaxChunkCommands = 1024;
constexpr size_t kMaxInFlight = 2;
constexpr int kBatches = kMaxInFlight + 1;  // in flight, and one being recorded

// TERN_VULKAN_CHUNK_US (default 2000): the device time a chunk aims at; 0 submits a thread's work
// whole at the next flush (no cancellation between kernels).
double chunk_ns() {
  static const double ns = [] {
    const char* env = std::getenv("TERN_VULKAN_CHUNK_US");
    return env && *env ? 1e3 * std::max(0.0, std::atof(env)) : 2e6;
  }();
  return ns;
}

// One command buffer of a recorder, with its own pool (reset alone) and fence.
struct Batch {
  VkCommandPool pool = VK_NULL_HANDLE;
  VkCommandBuffer cb = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  std::vector<std::shared_ptr<void>> keep;  // staging blocks until the batch completes
  uint64_t units = 0;
  uint32_t commands = 0;
  Clock::time_point submitted;
};

// The calling thread's command buffers: one being recorded (`open`), up to kMaxInFlight
// submitted, used in turn.
struct Recorder {
  Context::Impl* ctx = nullptr;
  std::array<Batch, kBatches> batches;
  int open = -1, next = 0;
  std::deque<int> in_flight;  // oldest first
  bool barrier = false;
  bool active = false;  // holds one of ctx->busy: recorded or submitted work not waited for
  uint64_t budget = 0;  // work units of the open batch before it is submitted
  double ns_per_unit = kStartNsPerUnit;
  Clock::time_point last_done;  // when the last waited-for batch completed (as seen)
  // The thread's device error word (Context::error_word), and whether recorded work may set it.
  std::shared_ptr<void> error;
  uint32_t* error_host = nullptr;
  bool error_armed = false;

  ~Recorder() {
    if (!ctx) return;
    if (active) (void)finish();
    const Api& a = api();
    for (Batch& b : batches) {
      if (b.fence) a.vkDestroyFence(ctx->device, b.fence, nullptr);
      if (b.pool) {
        a.vkDestroyCommandPool(ctx->device, b.pool, nullptr);
        --ctx->command_buffers;
      }
    }
  }

  Status init(Context::Impl* c) {
    ctx = c;
    const Api& a = api();
    for (Batch& b : batches) {
      VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
      pi.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
      pi.queueFamilyIndex = c->queue_family;
      TERN_VK_CHECK(a.vkCreateCommandPool(c->device, &pi, nullptr, &b.pool), "vkCreateCommandPool");
      ++c->command_buffers;
      VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
      ai.commandPool = b.pool;
      ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
      ai.commandBufferCount = 1;
      TERN_VK_CHECK(a.vkAllocateCommandBuffers(c->device, &ai, &b.cb), "vkAllocateCommandBuffers");
      VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
      TERN_VK_CHECK(a.vkCreateFence(c->device, &fi, nullptr, &b.fence), "vkCreateFence");
    }
    return Status::ok();
  }

  // Opens a command buffer if needed and orders the next command after the previous ones
  // (a barrier at the start of a batch orders it after the batches submitted before it).
  Status next_command() {
    const Api& a = api();
    if (open < 0) {
      Batch& b = batches[static_cast<size_t>(next)];
      VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
      bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
      TERN_VK_CHECK(a.vkBeginCommandBuffer(b.cb, &bi), "vkBeginCommandBuffer");
      open = next;
      barrier = !in_flight.empty();
      const double ns = chunk_ns() * (in_flight.empty() ? 0.25 : 1.0);
      budget = ns > 0 ? static_cast<uint64_t>(std::max(1.0, ns / std::max(ns_per_unit, 1e-3)))
                      : UINT64_MAX;
      if (!active) {
        active = true;
        std::lock_guard<std::mutex> lock(ctx->mem_mu);
        ++ctx->busy;
      }
    }
    if (barrier) {
      VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
      mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
      mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                         VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
      const VkPipelineStageFlags stages =
          VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
      a.vkCmdPipelineBarrier(batches[static_cast<size_t>(open)].cb, stages, stages, 0, 1, &mb, 0,
                             nullptr, 0, nullptr);
    }
    barrier = true;
    return Status::ok();
  }

  VkCommandBuffer cb() const { return batches[static_cast<size_t>(open)].cb; }

  // Counts a recorded command's work; submits the batch once it holds a chunk's worth, then
  // waits while kMaxInFlight batches are in flight (the host stays at most that far ahead).
  Status recorded(uint64_t units) {
    Batch& b = batches[static_cast<size_t>(open)];
    b.units += units + 1;
    ++b.commands;
    if (b.units < budget && (b.commands < kMaxChunkCommands || budget == UINT64_MAX)) {
      return Status::ok();
    }
    TERN_RETURN_IF_ERROR(submit());
    while (in_flight.size() >= kMaxInFlight) TERN_RETURN_IF_ERROR(wait_oldest());
    return Status::ok();
  }

  // Ends and submits the open batch.
  Status submit() {
    if (open < 0) return Status::ok();
    const Api& a = api();
    Batch& b = batches[static_cast<size_t>(open)];
    const int index = open;
    open = -1;
    VkResult r = a.vkEndCommandBuffer(b.cb);
    if (r == VK_SUCCESS) {
      VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
      si.commandBufferCount = 1;
      si.pCommandBuffers = &b.cb;
      std::lock_guard<std::mutex> lock(ctx->queue_mu);
      r = a.vkQueueSubmit(ctx->queue, 1, &si, b.fence);
    }
    if (r != VK_SUCCESS) {
      reset(b);
      return vk_error(r, "submitting a command buffer");
    }
    ++ctx->submits;
    b.submitted = Clock::now();
    in_flight.push_back(index);
    next = (index + 1) % kBatches;
    return Status::ok();
  }

  // Waits for the oldest batch in flight and makes it reusable. Where it was still running, the
  // time it took updates the estimate of nanoseconds per work unit.
  Status wait_oldest() {
    const Api& a = api();
    Batch& b = batches[static_cast<size_t>(in_flight.front())];
    in_flight.pop_front();
    const bool running = a.vkGetFenceStatus(ctx->device, b.fence) == VK_NOT_READY;
    const VkResult r = a.vkWaitForFences(ctx->device, 1, &b.fence, VK_TRUE, UINT64_MAX);
    const Clock::time_point now = Clock::now();
    if (r == VK_SUCCESS && running && b.units) {
      // It started when it was submitted or when the batch before it completed.
      const double ns =
          std::chrono::duration<double, std::nano>(now - std::max(b.submitted, last_done)).count();
      ns_per_unit = 0.5 * ns_per_unit + 0.5 * ns / static_cast<double>(b.units);
    }
    // Seen already complete, it completed at some time after its submit: the next batch's
    // duration is then counted from that batch's own submit.
    last_done = running ? now : b.submitted;
    reset(b);
    return r == VK_SUCCESS ? Status::ok() : vk_error(r, "vkWaitForFences");
  }

  void reset(Batch& b) {
    const Api& a = api();
    a.vkResetFences(ctx->device, 1, &b.fence);
    a.vkResetCommandPool(ctx->device, b.pool, 0);
    b.keep.clear();
    b.units = 0;
    b.commands = 0;
  }

  // Once nothing is recorded or in flight: frees deferred while the thread had work.
  void idle() {
    if (!active || open >= 0 || !in_flight.empty()) return;
    active = false;
    ctx->recorder_done();
  }

  Status wait_all() {
    Status st = Status::ok();
    while (!in_flight.empty()) {
      Status w = wait_oldest();
      if (st.is_ok()) st = w;
    }
    idle();
    return st;
  }

  // Submits the recorded commands and waits for everything in flight.
  Status finish() {
    if (!active) return Status::ok();
    Status st = submit();
    Status w = wait_all();
    if (st.is_ok()) st = w;
    if (error_armed) {
      error_armed = false;
      const uint32_t bits = *static_cast<volatile uint32_t*>(error_host);
      *error_host = 0;
      if (st.is_ok() && bits) {
        st = invalid_argument(
            "Vulkan: a Gather index on the device is out of range for its axis (indices must "
            "lie in [-dim, dim)); the outputs of this run are not valid");
      }
    }
    return st;
  }

  // Drops the batch being recorded and waits for the submitted ones.
  Status discard() {
    if (open >= 0) {
      reset(batches[static_cast<size_t>(open)]);  // a pool reset returns the buffer to initial
      open = -1;
    }
    Status st = wait_all();
    if (error_armed) {
      error_armed = false;
      *error_host = 0;
    }
    return st;
  }
};

}  // namespace

void Context::Impl::recorder_done() {
  std::vector<std::pair<Chunk*, std::pair<uint64_t, uint64_t>>> now;
  {
    std::lock_guard<std::mutex> lock(mem_mu);
    if (--busy > 0) return;
    now.swap(deferred);
    for (auto& [c, block] : now) free_block(c, block.first, block.second);
  }
}

int Context::Impl::memory_type(uint32_t allowed, int pool) const {
  // Device pool: device-local (host-visible too where the device has it, as lavapipe and
  // integrated GPUs do). Staging: host-visible and coherent, cached preferred for reads.
  const VkMemoryPropertyFlags want =
      pool == 0 ? VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
                : VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  int best = -1, best_score = -1;
  for (uint32_t i = 0; i < memory.memoryTypeCount; ++i) {
    if (!(allowed & (1u << i))) continue;
    const VkMemoryPropertyFlags f = memory.memoryTypes[i].propertyFlags;
    if ((f & want) != want) continue;
    int score = 1;
    if (pool == 0 && (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)) score += 2;
    if (pool == 1 && (f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT)) score += 2;
    if (score > best_score) best = static_cast<int>(i), best_score = score;
  }
  return best;
}

Expected<Chunk*> Context::Impl::new_chunk(int pool, uint64_t size) {
  const Api& a = api();
  size_t index = kMaxChunks;
  for (size_t i = 0; i < kMaxChunks; ++i) {
    if (!g_chunks[i].load()) {
      index = i;
      break;
    }
  }
  if (index == kMaxChunks) return out_of_memory("Vulkan: all ", kMaxChunks, " buffer chunks used");
  auto c = std::make_unique<Chunk>();
  c->size = size;
  c->pool = pool;
  c->index = index;
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = size;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
             VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  TERN_VK_CHECK(a.vkCreateBuffer(device, &bi, nullptr, &c->buffer), "vkCreateBuffer");
  VkMemoryRequirements req;
  a.vkGetBufferMemoryRequirements(device, c->buffer, &req);
  const int type = memory_type(req.memoryTypeBits, pool);
  if (type < 0) {
    a.vkDestroyBuffer(device, c->buffer, nullptr);
    return Status(Code::kBackendUnavailable, "Vulkan: no suitable memory type for buffers");
  }
  VkMemoryAllocateInfo mi{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mi.allocationSize = req.size;
  mi.memoryTypeIndex = static_cast<uint32_t>(type);
  VkResult r = a.vkAllocateMemory(device, &mi, nullptr, &c->memory);
  if (r != VK_SUCCESS) {
    a.vkDestroyBuffer(device, c->buffer, nullptr);
    return vk_error(r, "vkAllocateMemory");
  }
  r = a.vkBindBufferMemory(device, c->buffer, c->memory, 0);
  const VkMemoryPropertyFlags f = memory.memoryTypes[type].propertyFlags;
  if (r == VK_SUCCESS && (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)) {
    void* p = nullptr;
    r = a.vkMapMemory(device, c->memory, 0, VK_WHOLE_SIZE, 0, &p);
    c->mapped = static_cast<char*>(p);
    c->coherent = (f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) != 0;
  }
  if (r != VK_SUCCESS) {
    a.vkDestroyBuffer(device, c->buffer, nullptr);
    a.vkFreeMemory(device, c->memory, nullptr);
    return vk_error(r, "binding buffer memory");
  }
  c->free[0] = size;
  Chunk* raw = c.release();
  g_chunks[index].store(raw, std::memory_order_release);
  pools[pool].push_back(raw);
  if (pool == 0) device_bytes += size;
  return raw;
}

Expected<std::shared_ptr<void>> Context::Impl::allocate(int pool, uint64_t bytes) {
  const uint64_t size = std::max<uint64_t>(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  if (size > max_range) {
    return out_of_memory("Vulkan: a buffer of ", bytes, " bytes is larger than the device's ",
                         "largest storage buffer (", max_range, " bytes)");
  }
  std::lock_guard<std::mutex> lock(mem_mu);
  Chunk* chunk = nullptr;
  uint64_t offset = 0;
  for (Chunk* c : pools[pool]) {  // first fit
    for (auto it = c->free.begin(); it != c->free.end(); ++it) {
      if (it->second < size) continue;
      chunk = c;
      offset = it->first;
      const uint64_t rest = it->second - size;
      c->free.erase(it);
      if (rest) c->free[offset + size] = rest;
      break;
    }
    if (chunk) break;
  }
  if (!chunk) {
    TERN_ASSIGN_OR_RETURN(chunk, new_chunk(pool, std::max(size, std::min(kChunkBytes, max_range))));
    offset = 0;
    const uint64_t rest = chunk->size - size;
    chunk->free.clear();
    if (rest) chunk->free[size] = rest;
  }
  const uintptr_t addr = static_cast<uintptr_t>(((chunk->index + 1) << kChunkShift) | offset);
  return std::shared_ptr<void>(reinterpret_cast<void*>(addr), [this, chunk, offset, size](void*) {
    release(chunk, offset, size);
  });
}

void Context::Impl::release(Chunk* c, uint64_t offset, uint64_t size) {
  std::lock_guard<std::mutex> lock(mem_mu);
  if (busy > 0) {
    deferred.push_back({c, {offset, size}});
  } else {
    free_block(c, offset, size);
  }
}

void Context::Impl::free_block(Chunk* c, uint64_t offset, uint64_t size) {
  auto next = c->free.lower_bound(offset);
  if (next != c->free.end() && offset + size == next->first) {
    size += next->second;
    next = c->free.erase(next);
  }
  if (next != c->free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += size;
      return;
    }
  }
  c->free[offset] = size;
}

Expected<VkDescriptorSet> Context::Impl::descriptor_set(const Pipeline& p,
                                                        const VkBuffer* buffers) {
  std::vector<uint64_t> key;
  key.push_back(reinterpret_cast<uint64_t>(p.set_layout));
  for (int i = 0; i < p.bindings; ++i) key.push_back(reinterpret_cast<uint64_t>(buffers[i]));
  std::lock_guard<std::mutex> lock(cache_mu);
  auto it = sets.find(key);
  if (it != sets.end()) return it->second;
  const Api& a = api();
  if (sets_left == 0) {
    constexpr uint32_t kSets = 256;
    VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSets * 8};
    VkDescriptorPoolCreateInfo pi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    pi.maxSets = kSets;
    pi.poolSizeCount = 1;
    pi.pPoolSizes = &ps;
    VkDescriptorPool pool;
    TERN_VK_CHECK(a.vkCreateDescriptorPool(device, &pi, nullptr, &pool), "vkCreateDescriptorPool");
    set_pools.push_back(pool);
    sets_left = kSets;
  }
  VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  ai.descriptorPool = set_pools.back();
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &p.set_layout;
  VkDescriptorSet set;
  TERN_VK_CHECK(a.vkAllocateDescriptorSets(device, &ai, &set), "vkAllocateDescriptorSets");
  --sets_left;
  std::vector<VkDescriptorBufferInfo> infos(static_cast<size_t>(p.bindings));
  std::vector<VkWriteDescriptorSet> writes(static_cast<size_t>(p.bindings));
  for (size_t i = 0; i < infos.size(); ++i) {
    infos[i] = {buffers[i], 0, VK_WHOLE_SIZE};
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstSet = set;
    writes[i].dstBinding = static_cast<uint32_t>(i);
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  a.vkUpdateDescriptorSets(device, static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
  sets.emplace(std::move(key), set);
  return set;
}

std::string Context::report() {
  return devices_report();
}

Expected<Context*> Context::get() {
  static const Expected<Context*> ctx = []() -> Expected<Context*> {
    const Instance& inst = instance();
    if (inst.devices.empty())
      return Status(Code::kBackendUnavailable, str_cat("Vulkan: ", inst.error));
    std::string why;
    const int index = selected(&why);
    if (index < 0) return Status(Code::kBackendUnavailable, str_cat("Vulkan: ", why));
    const Candidate& cand = inst.devices[static_cast<size_t>(index)];
    Api& a = api();
    auto* impl = new Context::Impl();
    impl->instance = inst.instance;
    impl->physical = cand.device;
    impl->queue_family = cand.queue_family;
    a.vkGetPhysicalDeviceMemoryProperties(cand.device, &impl->memory);
    impl->max_range = cand.props.limits.maxStorageBufferRange;

    uint32_t ne = 0;
    a.vkEnumerateDeviceExtensionProperties(cand.device, nullptr, &ne, nullptr);
    std::vector<VkExtensionProperties> exts(ne);
    if (ne) a.vkEnumerateDeviceExtensionProperties(cand.device, nullptr, &ne, exts.data());
    const bool v12 = VK_API_VERSION_MINOR(cand.props.apiVersion) >= 2 ||
                     VK_API_VERSION_MAJOR(cand.props.apiVersion) > 1;
    std::vector<const char*> enable;
    if (has_extension(exts, "VK_KHR_portability_subset"))
      enable.push_back("VK_KHR_portability_subset");
    const bool f16_ext = has_extension(exts, "VK_KHR_shader_float16_int8");
    if (!v12 && f16_ext) enable.push_back("VK_KHR_shader_float16_int8");

    VkPhysicalDeviceShaderFloat16Int8Features f16{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
    VkPhysicalDevice16BitStorageFeatures s16{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
    VkPhysicalDeviceFeatures2 feats{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    feats.pNext = &s16;
    if (v12 || f16_ext) s16.pNext = &f16;
    a.vkGetPhysicalDeviceFeatures2(cand.device, &feats);
    // Enable only what Tern's shaders use.
    VkPhysicalDeviceShaderFloat16Int8Features f16_on{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
    f16_on.shaderFloat16 = f16.shaderFloat16;
    VkPhysicalDevice16BitStorageFeatures s16_on{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
    s16_on.storageBuffer16BitAccess = s16.storageBuffer16BitAccess;
    if (v12 || f16_ext) s16_on.pNext = &f16_on;

    const float priority = 1.0f;
    VkDeviceQueueCreateInfo qi{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    qi.queueFamilyIndex = cand.queue_family;
    qi.queueCount = 1;
    qi.pQueuePriorities = &priority;
    VkDeviceCreateInfo di{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    di.pNext = &s16_on;
    di.queueCreateInfoCount = 1;
    di.pQueueCreateInfos = &qi;
    di.enabledExtensionCount = static_cast<uint32_t>(enable.size());
    di.ppEnabledExtensionNames = enable.data();
    const VkResult r = a.vkCreateDevice(cand.device, &di, nullptr, &impl->device);
    if (r != VK_SUCCESS) {
      delete impl;
      return vk_error(r, "vkCreateDevice");
    }
#define TERN_VK_LOAD(f) a.f = reinterpret_cast<PFN_##f>(a.vkGetDeviceProcAddr(impl->device, #f));
    TERN_VK_DEVICE_FNS(TERN_VK_LOAD)
#undef TERN_VK_LOAD
    a.vkGetDeviceQueue(impl->device, cand.queue_family, 0, &impl->queue);
    VkPipelineCacheCreateInfo pci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
    a.vkCreatePipelineCache(impl->device, &pci, nullptr, &impl->pipeline_cache);

    auto* c = new Context();
    c->impl_ = impl;
    DeviceInfo& info = c->info_;
    info.name = cand.props.deviceName;
    info.type = type_name(cand.props.deviceType);
    info.api_version = cand.props.apiVersion;
    info.max_buffer_range = impl->max_range;
    info.fp16_storage = s16.storageBuffer16BitAccess == VK_TRUE;
    info.fp16_arithmetic = info.fp16_storage && f16.shaderFloat16 == VK_TRUE;
    for (uint32_t h = 0; h < impl->memory.memoryHeapCount; ++h) {
      if (impl->memory.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
        info.memory = std::max<uint64_t>(info.memory, impl->memory.memoryHeaps[h].size);
    }
    const int type = impl->memory_type(~0u, 0);
    info.host_visible_memory = type >= 0 && (impl->memory.memoryTypes[type].propertyFlags &
                                             VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT);
    const uint32_t dv = cand.props.driverVersion;
    info.driver = cand.props.vendorID == 0x10DE
                      ? str_cat((dv >> 22) & 0x3ff, ".", (dv >> 14) & 0xff)  // NVIDIA's packing
                      : str_cat(VK_API_VERSION_MAJOR(dv), ".", VK_API_VERSION_MINOR(dv), ".",
                                VK_API_VERSION_PATCH(dv));
    return c;
  }();
  return ctx;
}

namespace {

Expected<Recorder*> recorder(Context::Impl* impl) {
  thread_local std::unique_ptr<Recorder> rec;
  if (!rec) {
    auto r = std::make_unique<Recorder>();
    TERN_RETURN_IF_ERROR(r->init(impl));
    rec = std::move(r);
  }
  return rec.get();
}

}  // namespace

Expected<std::shared_ptr<void>> Context::allocate(size_t bytes) {
  return impl_->allocate(0, bytes);
}

Expected<const Pipeline*> Context::pipeline(const std::string& shader) {
  std::lock_guard<std::mutex> lock(impl_->cache_mu);
  auto it = impl_->pipelines.find(shader);
  if (it != impl_->pipelines.end()) return it->second.get();
  const ShaderBinary* bin = find_shader(shader);
  if (!bin) return internal_error("Vulkan: no embedded shader '", shader, "'");
  const std::string needs = bin->needs;
  if ((needs == "fp16_storage" && !info_.fp16_storage) ||
      (needs == "fp16_arithmetic" && !info_.fp16_arithmetic)) {
    return unsupported("Vulkan shader ", shader, " needs ", needs, ", which ", info_.name,
                       " lacks");
  }
  const Api& a = api();
  VkDevice dev = impl_->device;
  auto p = std::make_unique<Pipeline>();
  p->shader = shader;
  p->bindings = bin->bindings;
  std::vector<VkDescriptorSetLayoutBinding> binds(static_cast<size_t>(bin->bindings));
  for (size_t i = 0; i < binds.size(); ++i) {
    binds[i] = {static_cast<uint32_t>(i), VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1,
                VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  }
  VkDescriptorSetLayoutCreateInfo li{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  li.bindingCount = static_cast<uint32_t>(binds.size());
  li.pBindings = binds.data();
  TERN_VK_CHECK(a.vkCreateDescriptorSetLayout(dev, &li, nullptr, &p->set_layout),
                "vkCreateDescriptorSetLayout");
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, kMaxPush};
  VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &p->set_layout;
  pli.pushConstantRangeCount = 1;
  pli.pPushConstantRanges = &range;
  TERN_VK_CHECK(a.vkCreatePipelineLayout(dev, &pli, nullptr, &p->layout), "vkCreatePipelineLayout");
  VkShaderModuleCreateInfo si{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  si.codeSize = bin->size;
  si.pCode = reinterpret_cast<const uint32_t*>(bin->code);
  VkShaderModule module;
  TERN_VK_CHECK(a.vkCreateShaderModule(dev, &si, nullptr, &module), "vkCreateShaderModule");
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module;
  ci.stage.pName = "main";
  ci.layout = p->layout;
  const VkResult r =
      a.vkCreateComputePipelines(dev, impl_->pipeline_cache, 1, &ci, nullptr, &p->pipeline);
  a.vkDestroyShaderModule(dev, module, nullptr);
  if (r != VK_SUCCESS)
    return vk_error(r, str_cat("vkCreateComputePipelines(", shader, ")").c_str());
  const Pipeline* out = p.get();
  impl_->pipelines.emplace(shader, std::move(p));
  return out;
}

Status Context::dispatch(const Pipeline& p, std::initializer_list<const void*> buffers,
                         const void* push, size_t push_bytes, uint32_t gx, uint32_t gy,
                         uint32_t gz) {
  if (static_cast<int>(buffers.size()) != p.bindings || push_bytes > kMaxPush) {
    return internal_error("Vulkan: ", p.shader, " takes ", p.bindings, " buffers, got ",
                          buffers.size());
  }
  if (!gx || !gy || !gz) return Status::ok();
  VkBuffer bufs[8];
  size_t i = 0;
  for (const void* addr : buffers) {
    uint64_t offset = 0;
    Chunk* c = chunk_of(addr, &offset);
    if (!c) return internal_error("Vulkan: ", p.shader, ": binding ", i, " is not device memory");
    bufs[i++] = c->buffer;
  }
  TERN_ASSIGN_OR_RETURN(VkDescriptorSet set, impl_->descriptor_set(p, bufs));
  TERN_ASSIGN_OR_RETURN(Recorder * rec, recorder(impl_));
  TERN_RETURN_IF_ERROR(rec->next_command());
  const Api& a = api();
  const VkCommandBuffer cb = rec->cb();
  a.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  a.vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
  if (push_bytes) {
    a.vkCmdPushConstants(cb, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                         static_cast<uint32_t>(push_bytes), push);
  }
  a.vkCmdDispatch(cb, gx, gy, gz);
  ++impl_->dispatches;
  return rec->recorded(uint64_t{gx} * gy * gz);
}

namespace {

// `staging` (may be null) stays alive until the copy's batch completes.
Status record_copy(Recorder* rec, Chunk* src, uint64_t so, Chunk* dst, uint64_t dof, size_t bytes,
                   std::shared_ptr<void> staging = nullptr) {
  TERN_RETURN_IF_ERROR(rec->next_command());
  VkBufferCopy region{so, dof, bytes};
  api().vkCmdCopyBuffer(rec->cb(), src->buffer, dst->buffer, 1, &region);
  if (staging) rec->batches[static_cast<size_t>(rec->open)].keep.push_back(std::move(staging));
  return rec->recorded(bytes >> 16);
}

}  // namespace

Status Context::upload(const void* host, void* dev, size_t bytes) {
  if (!bytes) return Status::ok();
  uint64_t off = 0, soff = 0;
  Chunk* d = chunk_of(dev, &off);
  if (!d) return internal_error("Vulkan upload: the destination is not device memory");
  TERN_ASSIGN_OR_RETURN(std::shared_ptr<void> staging, impl_->allocate(1, bytes));
  Chunk* s = chunk_of(staging.get(), &soff);
  std::memcpy(s->mapped + soff, host, bytes);
  TERN_ASSIGN_OR_RETURN(Recorder * rec, recorder(impl_));
  TERN_RETURN_IF_ERROR(record_copy(rec, s, soff, d, off, bytes, std::move(staging)));
  ++impl_->copies;
  return Status::ok();
}

Status Context::copy(const void* src, void* dst, size_t bytes) {
  if (!bytes || src == dst) return Status::ok();
  uint64_t so = 0, dof = 0;
  Chunk* s = chunk_of(src, &so);
  Chunk* d = chunk_of(dst, &dof);
  if (!s || !d) return internal_error("Vulkan copy: an operand is not device memory");
  TERN_ASSIGN_OR_RETURN(Recorder * rec, recorder(impl_));
  TERN_RETURN_IF_ERROR(record_copy(rec, s, so, d, dof, bytes));
  ++impl_->copies;
  return Status::ok();
}

Status Context::download(const void* dev, void* host, size_t bytes) {
  if (!bytes) return Status::ok();
  uint64_t off = 0, soff = 0;
  Chunk* d = chunk_of(dev, &off);
  if (!d) return internal_error("Vulkan download: the source is not device memory");
  TERN_ASSIGN_OR_RETURN(Recorder * rec, recorder(impl_));
  const Api& a = api();
  if (d->mapped) {  // host-visible device memory: wait for the work, then read it in place
    TERN_RETURN_IF_ERROR(rec->finish());
    if (!d->coherent) {
      VkMappedMemoryRange mr{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE};
      mr.memory = d->memory;
      mr.size = VK_WHOLE_SIZE;
      a.vkInvalidateMappedMemoryRanges(impl_->device, 1, &mr);
    }
    std::memcpy(host, d->mapped + off, bytes);
    return Status::ok();
  }
  TERN_ASSIGN_OR_RETURN(std::shared_ptr<void> staging, impl_->allocate(1, bytes));
  Chunk* s = chunk_of(staging.get(), &soff);
  TERN_RETURN_IF_ERROR(record_copy(rec, d, off, s, soff, bytes));
  ++impl_->copies;
  TERN_RETURN_IF_ERROR(rec->finish());
  std::memcpy(host, s->mapped + soff, bytes);
  return Status::ok();
}

Status Context::flush() {
  TERN_ASSIGN_OR_RETURN(Recorder * rec, recorder(impl_));
  return rec->finish();
}

Status Context::discard() {
  TERN_ASSIGN_OR_RETURN(Recorder * rec, recorder(impl_));
  return rec->discard();
}

Expected<void*> Context::error_word() {
  TERN_ASSIGN_OR_RETURN(Recorder * rec, recorder(impl_));
  if (!rec->error) {
    // Staging memory: host-visible and coherent, bindable as a storage buffer like any chunk.
    TERN_ASSIGN_OR_RETURN(rec->error, impl_->allocate(1, sizeof(uint32_t)));
    uint64_t off = 0;
    Chunk* c = chunk_of(rec->error.get(), &off);
    if (!c || !c->mapped) return internal_error("Vulkan: the error word is not host-visible");
    rec->error_host = reinterpret_cast<uint32_t*>(c->mapped + off);
    *rec->error_host = 0;
  }
  rec->error_armed = true;
  return rec->error.get();
}

Stats Context::stats() const {
  Stats s;
  s.submits = impl_->submits;
  s.dispatches = impl_->dispatches;
  s.copies = impl_->copies;
  s.device_bytes = impl_->device_bytes;
  s.command_buffers = impl_->command_buffers;
  {
    std::lock_guard<std::mutex> lock(impl_->mem_mu);
    s.busy_recorders = static_cast<uint64_t>(impl_->busy);
    s.deferred_frees = impl_->deferred.size();
  }
  std::lock_guard<std::mutex> lock(impl_->cache_mu);
  s.pipelines = impl_->pipelines.size();
  s.descriptor_sets = impl_->sets.size();
  return s;
}

uint32_t offset_of(const void* addr, size_t unit) {
  uint64_t offset = 0;
  chunk_of(addr, &offset);
  return static_cast<uint32_t>(offset / unit);
}

void groups_1d(uint64_t n, uint32_t local, uint32_t* gx, uint32_t* gy) {
  const uint64_t groups = (n + local - 1) / local;
  constexpr uint64_t kMaxX = 65535;
  *gx = static_cast<uint32_t>(std::min(groups, kMaxX));
  *gy = static_cast<uint32_t>((groups + kMaxX - 1) / kMaxX);
  if (!groups) *gx = *gy = 0;
}

}  // namespace tern::vk
