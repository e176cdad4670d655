// The inter-op pool: one per process, shared by all sessions. Idle workers spin "cpu.spin_us"
// microseconds watching for a task, then sleep on a condition variable, and the pool grows when a
// run asks for more threads than it has, so tern_set_num_interop_threads may be called at any
// time.
#pragma once

#include <functional>

namespace tern {

class InterOpPool {
 public:
  static InterOpPool& global();
  // Runs task on up to `n` pool threads (each gets its own call) and returns at once, with how
  // many it launched: fewer when a thread cannot be created (the system's limit) or memory runs
  // out, so the caller does the rest of the work itself. Never throws. A task must not throw
  // (one that does is stopped there, and its thread goes back to the pool).
  int launch(int n, const std::function<void()>& task) noexcept;
  int size() const;

 private:
  InterOpPool() = default;
  struct Impl;
  Impl* impl();
};

}  // namespace tern
