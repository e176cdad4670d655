// Arena planning: each intermediate tensor gets an offset in one per-run arena; a buffer is reused
// once the last step reading it has run.
#pragma once

#include <cstddef>
#include <vector>

namespace tern {

struct BufferRequest {
  size_t bytes = 0;
  int first_step = 0;  // the step that writes it
  int last_step = 0;   // the last step that reads it (>= first_step)
};

struct MemoryPlan {
  std::vector<size_t> offsets;  // one per request, multiples of 64
  size_t arena_bytes = 0;
  size_t naive_bytes = 0;  // what one buffer per tensor would take, for reporting
};

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests);

}  // namespace tern
