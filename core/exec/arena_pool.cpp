#include "core/exec/arena_pool.h"

#include <algorithm>

namespace tern {

ArenaPool::Lease::~Lease() {
  if (pool_ && buffer_) pool_->give_back(std::move(buffer_), capacity_);
}

Expected<ArenaPool::Lease> ArenaPool::acquire(size_t bytes) {
  Lease lease;
  lease.pool_ = this;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The smallest free buffer that holds it.
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->first >= bytes && (best == free_.end() || it->first < best->first)) best = it;
    }
    if (best != free_.end()) {
      lease.capacity_ = best->first;
      lease.buffer_ = std::move(best->second);
      free_.erase(best);
      return lease;
    }
    // None holds it: the largest free one is too small for this and smaller plans alike, so it
    // goes (a plan that grew replaces its arena rather than keeping both).
    if (!free_.empty()) {
      auto largest = std::max_element(free_.begin(), free_.end(), [](const auto& a, const auto& b) {
        return a.first < b.first;
      });
      held_ -= largest->first;
      free_.erase(largest);
    }
  }
  // Rounded up so that slightly larger plans reuse it.
  const size_t capacity = std::max<size_t>(bytes + bytes / 8, 64) / 64 * 64 + 64;
  if (device_) {
    TERN_ASSIGN_OR_RETURN(lease.buffer_, device_->allocate(capacity));
  } else {
    // Mapped for the pool alone: a buffer the pool drops goes back to the system at once.
    lease.buffer_ = mapped_buffer(capacity);
    if (!lease.buffer_) return out_of_memory("cannot allocate a ", capacity, "-byte run arena");
  }
  lease.capacity_ = capacity;
  std::lock_guard<std::mutex> lock(mu_);
  held_ += capacity;
  return lease;
}

void ArenaPool::give_back(std::shared_ptr<void> buffer, size_t capacity) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.emplace_back(capacity, std::move(buffer));
  if (free_.size() > kMaxFree) {
    auto smallest = std::min_element(
        free_.begin(), free_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    held_ -= smallest->first;
    free_.erase(smallest);
  }
}

size_t ArenaPool::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_;
}

}  // namespace tern
