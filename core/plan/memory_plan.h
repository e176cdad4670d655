// Arena planning: each intermediate tensor gets an offset in one per-run arena; a buffer is reused
// once the last step reading it has run.
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

namespace tern {

struct BufferRequest {
  size_t bytes = 0;
  int first_step = 0;  // the step that writes it
  int last_step = 0;   // the last step that reads it (>= first_step)
};

// Host arenas place buffers at multiples of 64 bytes (a cache line, any SIMD load); device arenas
// at multiples of 256, what cudaMalloc gives and cuBLAS/cuBLASLt require of their workspaces.
constexpr size_t kArenaAlign = 64;
constexpr size_t kDeviceArenaAlign = 256;

struct MemoryPlan {
  std::vector<size_t> offsets;  // one per request, multiples of the alignment
  size_t arena_bytes = 0;
  size_t naive_bytes = 0;  // what one buffer per tensor would take, for reporting
};

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests, size_t align = kArenaAlign);

// For runs whose steps may execute concurrently (inter-op threads): two buffers may share memory
// only when conflicts(i, j) is false, i.e. every reader of one finishes before the other is
// written in any schedule. Greedy by size, lowest fitting offset.
template <class Conflicts>
MemoryPlan plan_memory_general(const std::vector<size_t>& bytes, Conflicts&& conflicts);

size_t align_buffer_bytes(size_t n);

template <class Conflicts>
MemoryPlan plan_memory_general(const std::vector<size_t>& bytes, Conflicts&& conflicts) {
  MemoryPlan plan;
  const size_t n = bytes.size();
  plan.offsets.assign(n, 0);
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return bytes[a] > bytes[b]; });
  std::vector<size_t> placed;
  std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of conflicting placed buffers
  for (size_t idx : order) {
    const size_t size = align_buffer_bytes(bytes[idx]);
    plan.naive_bytes += size;
    busy.clear();
    for (size_t p : placed) {
      if (conflicts(idx, p)) {
        busy.emplace_back(plan.offsets[p], plan.offsets[p] + align_buffer_bytes(bytes[p]));
      }
    }
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (const auto& b : busy) {
      if (b.first >= offset + size) break;
      offset = std::max(offset, b.second);
    }
    plan.offsets[idx] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
    placed.push_back(idx);
  }
  return plan;
}

}  // namespace tern
