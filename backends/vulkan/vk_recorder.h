// The calling thread's Vulkan command recording: dispatches and copies are recorded into command
// buffers and submitted in chunks of about chunk_ns() of device time, at most kMaxInFlight ahead of
// the host (so a cancelled run waits for little), until a flush or download waits for them.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "backends/vulkan/vk_context_impl.h"

namespace tern::vk {

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

  ~Recorder();
  Status init(Context::Impl* c);
  // Opens a command buffer if needed and orders the next command after the previous ones
  // (a barrier at the start of a batch orders it after the batches submitted before it).
  Status next_command();
  VkCommandBuffer cb() const { return batches[static_cast<size_t>(open)].cb; }
  // Counts a recorded command's work; submits the batch once it holds a chunk's worth, then
  // waits while kMaxInFlight batches are in flight (the host stays at most that far ahead).
  Status recorded(uint64_t units);
  // Ends and submits the open batch.
  Status submit();
  // Waits for the oldest batch in flight and makes it reusable. Where it was still running, the
  // time it took updates the estimate of nanoseconds per work unit.
  Status wait_oldest();
  void reset(Batch& b);
  // Once nothing is recorded or in flight: frees deferred while the thread had work.
  void idle();
  Status wait_all();
  // Submits the recorded commands and waits for everything in flight.
  Status finish();
  // Drops the batch being recorded and waits for the submitted ones.
  Status discard();
};

// The calling thread's recorder on `impl`, made on first use.
Expected<Recorder*> recorder(Context::Impl* impl);

}  // namespace tern::vk
