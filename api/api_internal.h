// The C handles and the one place errors cross the ABI.
#pragma once

#include <atomic>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "c_api.h"
#include "core/exceptions.h"
#include "core/flags.h"
#include "core/model.h"
#include "core/progress.h"
#include "core/session.h"
#include "core/tensor.h"

struct tern_tensor {
  tern::Tensor t;
  mutable std::string device_name = {};  // tern_tensor_device's answer
  bool read_only = false;  // from a DLPack tensor flagged read-only: never a copy's destination
};
struct tern_value {
  tern::Tensor t;  // a tensor, or a sequence or optional (tern::Tensor::sequence / ::optional)
};
struct tern_model {
  std::shared_ptr<const tern::Model> m;
};
struct tern_session {
  std::unique_ptr<tern::Session> s;
  tern::ProgressSink progress;  // tern_session_options_set_progress, for runs that build plans
  bool profile_written = false;
  ~tern_session() {
    if (s && s->profiler() && !profile_written) {
      TERN_TRY {
        (void)s->profiler()->write();
      }
      TERN_CATCH_ALL {}  // destroying never fails; the trace is lost
    }
  }
};
struct tern_session_options {
  std::vector<std::string> backends{"cpu"};  // as listed
  bool cpu_fallback = true;                  // "cpu" appended when absent
  tern::FlagOverrides flags;      // num_threads, num_interop_threads and any session-scoped flag
  std::string profile_path;       // empty: no profiling
  uint64_t max_memory_bytes = 0;  // 0: no limit
  uint64_t plan_cache_bytes = tern::SessionConfig::kDefaultPlanCacheBytes;
  tern::ProgressSink progress;  // empty: no reports
};
struct tern_run_options {
  tern::FlagOverrides flags;   // run-scoped flags (sdp.*, onednn.verbose)
  tern::Device output_device;  // where outputs are returned (host by default)
  int64_t deadline_ms = 0;     // from each run's start; 0: none
  // Set by tern_run_options_cancel from any thread, cleared by tern_run_options_clear_cancel;
  // runs read it through their RunControl (core/run_control.h).
  std::atomic<bool> cancelled{false};
};

namespace tern::api {

// Records the status as this thread's last error and returns its C code.
tern_status fail(const Status& s);

// For the functions that answer with a value, not a status: fn's value, or `fallback` when it
// throws (an allocation failure while building a report): no exception crosses the C boundary.
template <class Fn, class T>
T value_guard(Fn&& fn, T fallback) noexcept {
  TERN_TRY {
    return fn();
  }
  TERN_CATCH_ALL {
    return fallback;
  }
}

// Runs fn (returning Status) and converts whatever happens, exceptions included, to a tern_status.
template <class Fn>
tern_status guard(Fn&& fn) noexcept {
  Status s = status_of_call(fn, "");
  return s.is_ok() ? TERN_OK : fail(s);
}

using ::tern::shorten;

#define TERN_API_REQUIRE(cond, ...)                            \
  do {                                                         \
    if (!(cond)) return ::tern::invalid_argument(__VA_ARGS__); \
  } while (0)

}  // namespace tern::api
