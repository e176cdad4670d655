// Idle time of the CPUs this process may use, from the kernel's per-CPU counters (/proc/stat), and
// the process's own CPU time: over a window, how many CPUs stood idle and how many this process
// kept busy, on average. Their sum is what other processes left to this one. The adaptive thread
// tuner reads it: where another process keeps a core busy, a run with a thread per core waits at
// every parallel region for the one that shares a core, so it runs with fewer threads at once,
// and it tries more only once the CPUs are free again.
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
    double own_cpus = 0;   // average CPUs this process kept busy over the window (ready only)
    // The CPUs other processes left to this one: idle ones and those it used itself.
    double free_cpus() const { return idle_cpus + own_cpus; }
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
  double process_cpu_s0_ = 0;
};

}  // namespace tern
