#include "core/memory_budget.h"

#include <utility>

namespace tern {

namespace {
thread_local std::shared_ptr<MemoryBudget> t_current;
}  // namespace

bool MemoryBudget::reserve(size_t bytes) {
  uint64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (bytes > limit_ || used > limit_ - bytes) {
      refusals_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return true;
}

const std::shared_ptr<MemoryBudget>& MemoryBudget::current() {
  return t_current;
}

BudgetScope::BudgetScope(std::shared_ptr<MemoryBudget> budget)
    : previous_(std::exchange(t_current, std::move(budget))) {}

BudgetScope::~BudgetScope() {
  t_current = std::move(previous_);
}

bool reserve_current(size_t bytes) {
  return !t_current || t_current->reserve(bytes);
}

std::shared_ptr<void> charged(std::shared_ptr<void> buffer, size_t bytes) {
  const std::shared_ptr<MemoryBudget>& budget = t_current;
  if (!budget) return buffer;
  if (!buffer) {
    budget->release(bytes);
    return nullptr;
  }
  void* p = buffer.get();
  return std::shared_ptr<void>(p, [budget, bytes, keep = std::move(buffer)](void*) mutable {
    keep.reset();
    budget->release(bytes);
  });
}

}  // namespace tern
