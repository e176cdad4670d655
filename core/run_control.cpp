#include "core/run_control.h"

namespace tern {

Status RunControl::stopped(std::string_view next) const {
  const auto ms = [](Clock::duration d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  };
  const int64_t elapsed = ms(Clock::now() - start_);
  // A cancel wins over a deadline passed at the same time: it is what the caller asked for.
  if (cancel_ && cancel_->load(std::memory_order_relaxed)) {
    return cancelled("the run was cancelled (tern_run_options_cancel) before ", next, ", ", elapsed,
                     " ms after it started");
  }
  return deadline_exceeded("the run passed its deadline of ", deadline_ms_, " ms before ", next,
                           ", ", elapsed, " ms after it started");
}

}  // namespace tern
