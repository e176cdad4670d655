// A session's memory limit (SessionConfig::max_memory_bytes, the C API's session option). While a
// BudgetScope is open on a thread, the buffers allocated on it (aligned_buffer: tensors, run
// arenas, scratch; weight_buffer: packed weights) are charged to the budget until they are freed;
// one that would take it past its limit is not allocated, so the caller reports
// TERN_ERR_OUT_OF_MEMORY as for a failed malloc. Session::create and Session::run open a scope, so
// a session's packed weights, run arenas and the outputs of its runs (until the caller destroys
// them) count; what oneDNN or OpenBLAS allocate inside themselves, and buffers made on worker
// threads, do not.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace tern {

class MemoryBudget {
 public:
  explicit MemoryBudget(uint64_t limit) : limit_(limit) {}
  uint64_t limit() const { return limit_; }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  // How many allocations the limit has refused so far.
  uint64_t refusals() const { return refusals_.load(std::memory_order_relaxed); }
  // Takes `bytes` from the budget; false (and nothing taken) when that would pass the limit.
  bool reserve(size_t bytes);
  void release(size_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }

  // The budget of the innermost scope open on this thread, or null.
  static const std::shared_ptr<MemoryBudget>& current();

 private:
  const uint64_t limit_;
  std::atomic<uint64_t> used_{0};
  std::atomic<uint64_t> refusals_{0};
};

// Charges this thread's allocations to `budget` (null: none) while it lives; scopes nest.
class BudgetScope {
 public:
  explicit BudgetScope(std::shared_ptr<MemoryBudget> budget);
  ~BudgetScope();
  BudgetScope(const BudgetScope&) = delete;
  BudgetScope& operator=(const BudgetScope&) = delete;

 private:
  std::shared_ptr<MemoryBudget> previous_;
};

// Takes `bytes` from the current budget (true when there is none).
bool reserve_current(size_t bytes);
// `buffer` (`bytes` reserved by reserve_current) charged to the current budget until its last
// copy goes; a null buffer gives the reservation back.
std::shared_ptr<void> charged(std::shared_ptr<void> buffer, size_t bytes);

// `alloc()` (a std::shared_ptr<void> of `bytes`, null on failure) charged to the current budget:
// null without calling it when the budget refuses.
template <class Alloc>
std::shared_ptr<void> allocate_charged(size_t bytes, Alloc&& alloc) {
  if (!MemoryBudget::current()) return alloc();
  if (!reserve_current(bytes)) return nullptr;
  return charged(alloc(), bytes);
}

}  // namespace tern
