#include "core/plan/memory_plan.h"

#include <algorithm>
#include <numeric>

namespace tern {

namespace {
size_t round_up(size_t n, size_t align = kArenaAlign) {
  return (n + align - 1) / align * align;
}

struct Live {
  size_t offset, bytes;
  int last_step;
};
}  // namespace

size_t align_buffer_bytes(size_t n) {
  return round_up(n);
}

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests, size_t align) {
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  // Allocate in step order; larger buffers first within a step so they take the low offsets.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (requests[a].first_step != requests[b].first_step) {
      return requests[a].first_step < requests[b].first_step;
    }
    return requests[a].bytes > requests[b].bytes;
  });
  std::vector<Live> live;  // sorted by offset
  for (size_t idx : order) {
    const BufferRequest& r = requests[idx];
    size_t bytes = round_up(r.bytes, align);
    plan.naive_bytes += bytes;
    // A buffer whose last reader ran before this step is free again.
    live.erase(std::remove_if(live.begin(), live.end(),
                              [&](const Live& l) { return l.last_step < r.first_step; }),
               live.end());
    // First gap (by offset) that fits.
    size_t offset = 0;
    size_t pos = 0;
    for (; pos < live.size(); ++pos) {
      if (live[pos].offset >= offset + bytes) break;
      offset = std::max(offset, live[pos].offset + live[pos].bytes);
    }
    live.insert(live.begin() + static_cast<std::ptrdiff_t>(pos),
                Live{offset, bytes, std::max(r.last_step, r.first_step)});
    plan.offsets[idx] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + bytes);
  }
  return plan;
}

}  // namespace tern
