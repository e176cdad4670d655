// Adaptive intra-op threads ("cpu.adaptive_threads"): a session keeps, per input shapes, the
// latency of its runs at each thread count it has used (num_threads, halved down to 1) and runs
// with the fastest. Where other processes keep the cores busy, a run whose threads cannot all get
// a core waits at every parallel region for the one that was preempted; its latency then jumps
// from milliseconds to hundreds, and the tuner moves it to fewer threads, which degrade towards
// the 1-thread time instead:
// - at once, when the CPUs other processes left to this one over the last ~100 ms (idle ones plus
//   those it used itself: /proc/stat and its CPU time, core/cpu_idle.h) are fewer than the
//   threads by over half a CPU: it moves to the most threads that fit;
// - where no such reading exists, or the contention does not show in it: two of four runs at
//   the current count that took over 1.5x the fastest seen at it, or whose calling thread got
//   under 3/4 of the wall time on a core, probe fewer threads (taken unless clearly slower).
// Below the count asked for it tries more now and then (1 run in 16, backing off to 1 in 256
// while the choice holds), so it moves back when the cores come free; a try waits while the
// count it would try does not fit in the CPUs left to this process.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "core/cpu_idle.h"
#include "core/tensor.h"

namespace tern {

class ThreadTuner {
 public:
  // `idle`: where CPU idle readings come from (tests pass their own); by default /proc/stat.
  using IdleSource = std::function<IdleCpuMeter::Reading()>;
  explicit ThreadTuner(IdleSource idle = nullptr);

  // The thread count for the next run of these shapes: <= want, >= 1.
  int choose(const std::vector<Shape>& shapes, int want);
  // The latency of a run that used `threads` (a run that failed is not recorded), and the CPU time
  // its calling thread got meanwhile: a thread that kept its core runs (or spins at a barrier)
  // all along, one that shares it with other processes gets a fraction.
  void record(const std::vector<Shape>& shapes, int want, int threads, double ms, double cpu_ms);

  struct LevelStats {
    int threads;
    double ms;     // the level's latency estimate (0: none yet)
    int64_t runs;  // runs recorded at it
  };
  // The levels of these shapes' entry, fastest first by estimate (empty when none).
  std::vector<LevelStats> levels(const std::vector<Shape>& shapes) const;
  // Runs that used fewer threads than asked because they were faster.
  int64_t reduced_runs() const;
  // Tries of more threads put off because the CPUs had no idle time for them.
  int64_t skipped_probes() const;
  // Moves to fewer threads made because other processes held the CPUs.
  int64_t yields() const;

 private:
  static constexpr int kFirstInterval = 16, kMaxInterval = 256;
  struct Level {
    int threads = 1;
    double ms = 0;
    double min_ms = 0;  // the fastest run seen at it
    int64_t runs = 0;   // recorded, the first (which plans) not counted in ms
  };
  struct Entry {
    int want = 0;
    std::vector<Level> levels;  // want, want/2, ..., 1
    size_t current = 0;
    int64_t runs = 0, next_probe = kFirstInterval;
    int interval = kFirstInterval;
    bool probe_up = false;     // the next probe goes to more threads (else fewer)
    int probing = -1;          // the level a probe run is using
    int again = -1;            // a level whose first run (which planned) needs a second now
    int contended_probe = -1;  // a level of fewer threads tried because of contention
    bool alarm = false;        // the current level just ran far slower than its best: probe fewer
    uint8_t slow_bits = 0;     // of the current level's last 4 runs, those far slower than its best
    // The current level's last (up to) 4 latencies, oldest overwritten first: what it gives now,
    // which one outlier cannot move the way it moves the estimate.
    double recent[4] = {};
    int64_t recent_runs = 0;  // runs recorded there since it became current
    int64_t last_alarm = -1000;
  };
  Entry& entry(const std::vector<Shape>& shapes, int want);  // under mu_
  // The current level's latency now: the median of its recent runs (its estimate before any).
  static double current_ms(const Entry& e);
  // Makes `level` the current one (its recent runs start over).
  static void move_to(Entry& e, size_t level);
  // Whether the try of more threads due now waits, the CPUs being busy (then scheduled later).
  bool cores_busy(Entry& e);  // under mu_
  // Moves the current level down to the threads that fit in the CPUs left to this process.
  void yield_to_others(Entry& e);  // under mu_

  mutable std::mutex mu_;
  IdleSource idle_;  // read at every choice (under mu_)
  IdleCpuMeter meter_;
  IdleCpuMeter::Reading last_idle_;
  std::map<std::vector<Shape>, Entry> entries_;
  int64_t reduced_ = 0, skipped_ = 0, yields_ = 0;
};

}  // namespace tern
