#include "core/plan/plan.h"

namespace tern {

std::shared_ptr<void> Plan::acquire_arena(int layout) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& pool = free_arenas_[layout];
    if (!pool.empty()) {
      auto a = std::move(pool.back());
      pool.pop_back();
      return a;
    }
  }
  return aligned_buffer(layouts[layout].bytes);
}

void Plan::release_arena(int layout, std::shared_ptr<void> arena) const {
  std::lock_guard<std::mutex> lock(mu_);
  free_arenas_[layout].push_back(std::move(arena));
}

Expected<std::shared_ptr<void>> Plan::acquire_device_arena() const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_device_arenas_.empty()) {
      auto a = std::move(free_device_arenas_.back());
      free_device_arenas_.pop_back();
      return a;
    }
  }
  return device_backend->allocate(device_layout.bytes);
}

void Plan::release_device_arena(std::shared_ptr<void> arena) const {
  std::lock_guard<std::mutex> lock(mu_);
  free_device_arenas_.push_back(std::move(arena));
}

std::shared_ptr<void> Plan::find_capture(size_t first_step, const std::vector<void*>& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = captures_.find({first_step, key});
  return it == captures_.end() ? nullptr : it->second;
}

void Plan::store_capture(size_t first_step, std::vector<void*> key, std::shared_ptr<void> c) const {
  std::lock_guard<std::mutex> lock(mu_);
  // Each arena (and each set of bound device inputs) has its own capture; a few per segment are
  // kept, the oldest dropped past that.
  constexpr size_t kPerSegment = 8;
  size_t n = 0;
  for (auto it = captures_.begin(); it != captures_.end();) {
    if (it->first.first == first_step && ++n >= kPerSegment) {
      it = captures_.erase(it);
    } else {
      ++it;
    }
  }
  captures_[{first_step, std::move(key)}] = std::move(c);
}

bool Plan::capture_failed(size_t first_step) const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_captures_.count(first_step) != 0;
}

void Plan::mark_capture_failed(size_t first_step) const {
  std::lock_guard<std::mutex> lock(mu_);
  failed_captures_.insert(first_step);
}

}  // namespace tern
