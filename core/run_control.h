// RunControl: what may stop a run before it finishes: a cancel flag another thread may set at any
// time (tern_run_options_cancel) and a deadline (tern_run_options_set_deadline_ms). The executor
// asks it before every step and every node of a dynamic plan, control-flow kernels before every
// iteration of their body (and the body's own steps ask it too), so a run stops within one
// node's time. A kernel that was started runs to its end: partial outputs are never kept, and the
// run's arenas go back to the session's pools on the way out as after any error.
//
// A check costs one relaxed atomic load, and one steady-clock read when there is a deadline.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string_view>

#include "core/status.h"

namespace tern {

class RunControl {
 public:
  using Clock = std::chrono::steady_clock;

  // `cancel` (may be null) must outlive the run; `deadline_ms` > 0 bounds the run to that many
  // milliseconds after `start`, 0 means no deadline.
  RunControl(const std::atomic<bool>* cancel, int64_t deadline_ms, Clock::time_point start)
      : cancel_(cancel),
        deadline_ms_(deadline_ms),
        start_(start),
        deadline_(deadline_ms > 0 ? start + std::chrono::milliseconds(deadline_ms)
                                  : Clock::time_point::max()) {}

  // OK while the run may go on; otherwise TERN_ERR_CANCELLED or TERN_ERR_DEADLINE_EXCEEDED, the
  // message saying what the run stopped before (`next`: "node 'conv1' (Conv)", ...).
  Status check(std::string_view next) const {
    const bool stop = (cancel_ && cancel_->load(std::memory_order_relaxed)) ||
                      (deadline_ms_ > 0 && Clock::now() >= deadline_);
    return stop ? stopped(next) : Status::ok();
  }

  // Whether anything can stop the run (a cancel flag or a deadline).
  bool can_stop() const { return cancel_ != nullptr || deadline_ms_ > 0; }

 private:
  Status stopped(std::string_view next) const;

  const std::atomic<bool>* cancel_;
  int64_t deadline_ms_;
  Clock::time_point start_, deadline_;
};

// For the code paths that run with or without a control (constant folding, planning-time runs):
// OK when `control` is null.
inline Status check_run(const RunControl* control, std::string_view next) {
  return control ? control->check(next) : Status::ok();
}

}  // namespace tern
