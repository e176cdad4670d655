// The inter-op pool: one per process, shared by all sessions. Workers sleep on a condition
// variable when idle (they never spin), and the pool grows when a run asks for more threads than
// it has, so tern_set_num_interop_threads may be called at any time.
#pragma once

#include <functional>

namespace tern {

class InterOpPool {
 public:
  static InterOpPool& global();
  // Runs task on `n` pool threads (each gets its own call) and returns at once.
  void launch(int n, const std::function<void()>& task);
  int size() const;

 private:
  InterOpPool() = default;
  struct Impl;
  Impl* impl();
};

}  // namespace tern
