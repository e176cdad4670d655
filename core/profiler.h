// Run profiling: one event per executed step (op, backend, kernel, shapes, time), written as a
// Chrome trace (chrome://tracing, Perfetto). Enabled per session; recording is thread-safe so
// concurrent runs and inter-op threads may record at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace tern {

struct ProfileEvent {
  std::string name;  // node name (or "run", "session_create")
  std::string cat;   // "node", "run", "session"
  double ts_us = 0;  // start, microseconds since the profiler started
  double dur_us = 0;
  uint32_t tid = 0;
  std::vector<std::pair<std::string, std::string>> args;  // shown in the trace viewer
};

class Profiler {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Profiler(std::string path) : path_(std::move(path)), start_(Clock::now()) {}

  const std::string& path() const { return path_; }
  double since_start_us(Clock::time_point t) const {
    return std::chrono::duration<double, std::micro>(t - start_).count();
  }
  // A small stable number per OS thread, for the trace's rows.
  static uint32_t thread_number();

  void record(ProfileEvent e);
  // Writes the trace (events so far) to path(); later events are still kept.
  Status write() const;
  size_t event_count() const;
  // The events so far (a copy).
  std::vector<ProfileEvent> events() const;

 private:
  std::string path_;
  Clock::time_point start_;
  mutable std::mutex mu_;
  std::vector<ProfileEvent> events_;
};

}  // namespace tern
