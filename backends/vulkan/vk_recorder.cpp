// See vk_recorder.h.
#include "backends/vulkan/vk_recorder.h"

#include <algorithm>
#include <cstdlib>

namespace tern::vk {
namespace {

// TERN_VULKAN_CHUNK_US (default 2000): the device time a chunk aims at; 0 submits a thread's work
// whole at the next flush (no cancellation between kernels).
double chunk_ns() {
  static const double ns = [] {
    const char* env = std::getenv("TERN_VULKAN_CHUNK_US");
    return env && *env ? 1e3 * std::max(0.0, std::atof(env)) : 2e6;
  }();
  return ns;
}

}  // namespace

Recorder::~Recorder() {
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

Status Recorder::init(Context::Impl* c) {
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

Status Recorder::next_command() {
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

Status Recorder::recorded(uint64_t units) {
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

Status Recorder::submit() {
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

Status Recorder::wait_oldest() {
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

void Recorder::reset(Batch& b) {
  const Api& a = api();
  a.vkResetFences(ctx->device, 1, &b.fence);
  a.vkResetCommandPool(ctx->device, b.pool, 0);
  b.keep.clear();
  b.units = 0;
  b.commands = 0;
}

void Recorder::idle() {
  if (!active || open >= 0 || !in_flight.empty()) return;
  active = false;
  ctx->recorder_done();
}

Status Recorder::wait_all() {
  Status st = Status::ok();
  while (!in_flight.empty()) {
    Status w = wait_oldest();
    if (st.is_ok()) st = w;
  }
  idle();
  return st;
}

Status Recorder::finish() {
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

Status Recorder::discard() {
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

Expected<Recorder*> recorder(Context::Impl* impl) {
  thread_local std::unique_ptr<Recorder> rec;
  if (!rec) {
    auto r = std::make_unique<Recorder>();
    TERN_RETURN_IF_ERROR(r->init(impl));
    rec = std::move(r);
  }
  return rec.get();
}

}  // namespace tern::vk
