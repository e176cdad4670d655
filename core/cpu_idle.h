// Idle time of the CPUs this process may use, from the kernel's per-CPU counters (/proc/stat):
// how many of them stood idle, on average, over a window. The adaptive thread tuner asks before
// it tries more threads: where another process keeps every core busy, a run with more threads
// only waits for the cores it cannot get, and the try costs a slow run for nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "core/cpu_set.h"

namespace tern {

// The idle and iowait jiffies of the CPUs of `cpus` summed from /proc/stat's text ("cpuN ..."
// lines; the aggregate "cpu " line is not used); -1 when none of them is listed.
int64_t idle_jiffies_of(std::string_view proc_stat, const CpuList& cpus);

class IdleCpuMeter {
 public:
  struct Reading {
    bool known = false;    // false: /proc/stat cannot be read (or lists none of our CPUs)
    bool ready = false;    // false: the window is still shorter than asked (nothing was reset)
    double idle_cpus = 0;  // average idle CPUs over the window (ready only)
  };
  // The CPUs of the process's affinity mask idle on average since the last ready reading, once at
  // least min_window_ms has passed (the counters tick every 10 ms, so shorter windows are noise);
  // a ready reading starts the next window.
  Reading read(double min_window_ms = 100);

 private:
  using Clock = std::chrono::steady_clock;
  bool started_ = false;
  Clock::time_point t0_;
  int64_t jiffies0_ = 0;
};

}  // namespace tern
