#include "backends/vulkan/vk_context.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "backends/vulkan/shader_table.h"
#include "backends/vulkan/vk_context_impl.h"
#include "backends/vulkan/vk_device.h"
#include "backends/vulkan/vk_recorder.h"

namespace tern::vk {

namespace {

constexpr uint64_t kAlign = 256;
constexpr uint64_t kChunkBytes = 64ull << 20;
constexpr size_t kMaxChunks = 4096;
constexpr int kChunkShift = 32;  // address = (chunk + 1) << 32 | offset

std::array<std::atomic<Chunk*>, kMaxChunks> g_chunks{};

Chunk* chunk_of(const void* addr, uint64_t* offset) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  const uint64_t index = (static_cast<uint64_t>(a) >> kChunkShift) - 1;
  if (index >= kMaxChunks) return nullptr;
  *offset = static_cast<uint64_t>(a) & ((1ull << kChunkShift) - 1);
  return g_chunks[index].load(std::memory_order_acquire);
}

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

int choose_memory_type(const VkPhysicalDeviceMemoryProperties& memory, uint32_t allowed, int pool) {
  // Device pool: device-local, and host-visible too where that memory is also cached for the host
  // (lavapipe, integrated GPUs: one memory, read in place). A discrete GPU's host-visible
  // device-local memory (the PCIe BAR) is uncached: host reads of it crawl (tens of MB/s), so it
  // ranks last. Staging: host-visible and coherent, cached preferred for reads.
  const VkMemoryPropertyFlags want =
      pool == 0 ? VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
                : VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  int best = -1, best_score = -1;
  for (uint32_t i = 0; i < memory.memoryTypeCount; ++i) {
    if (!(allowed & (1u << i))) continue;
    const VkMemoryPropertyFlags f = memory.memoryTypes[i].propertyFlags;
    if ((f & want) != want) continue;
    const bool visible = (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) != 0;
    const bool cached = (f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) != 0;
    const int score = pool == 0 ? (!visible ? 2 : cached ? 3 : 1) : (cached ? 2 : 1);
    if (score > best_score) best = static_cast<int>(i), best_score = score;
  }
  return best;
}

int Context::Impl::memory_type(uint32_t allowed, int pool) const {
  return choose_memory_type(memory, allowed, pool);
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
    c->cached = (f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) != 0;
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
    const VkMemoryPropertyFlags read_in_place =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
    info.host_visible_memory = type >= 0 && (impl->memory.memoryTypes[type].propertyFlags &
                                             read_in_place) == read_in_place;
    const uint32_t dv = cand.props.driverVersion;
    info.driver = cand.props.vendorID == 0x10DE
                      ? str_cat((dv >> 22) & 0x3ff, ".", (dv >> 14) & 0xff)  // NVIDIA's packing
                      : str_cat(VK_API_VERSION_MAJOR(dv), ".", VK_API_VERSION_MINOR(dv), ".",
                                VK_API_VERSION_PATCH(dv));
    return c;
  }();
  return ctx;
}

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
  if (d->mapped && d->cached) {  // host-cached device memory: wait for the work, read in place
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
