#include "core/thread_tuner.h"

#include <algorithm>
#include <utility>

namespace tern {

namespace {

// A level replaces the current one only when clearly faster (timing noise is a few percent).
constexpr double kBetter = 0.93;
// Latency estimates: an exponential average of ordinary runs; a probe's run replaces its level's
// estimate (the estimate may be stale: the contention it measured may be gone).
constexpr double kAlpha = 0.25;
// Different shapes get different entries; a model fed ever new shapes keeps at most this many.
constexpr size_t kMaxEntries = 64;
// A run this much slower than the fastest at its level hints at contention.
constexpr double kContended = 1.5;
constexpr double kCollapsed = 3;
// A calling thread on a core of its own gets nearly all of a run's wall time on it.
constexpr double kCpuShare = 0.75;
// A thread count fits in the CPUs other processes left to this one within half a CPU (the
// counters' noise over a 100 ms window is about a tenth).
constexpr double kFitSlack = 0.5;

}  // namespace

ThreadTuner::ThreadTuner(IdleSource idle) : idle_(std::move(idle)) {
  // The first window starts now (with the session), so that the first reading, after 100 ms, can
  // come within a few runs of the first: a small model runs hundreds of times in 100 ms, and
  // under contention each of those at too many threads may take tens of ms.
  if (!idle_) meter_.read();
}

ThreadTuner::Entry& ThreadTuner::entry(const std::vector<Shape>& shapes, int want) {
  auto it = entries_.find(shapes);
  if (it == entries_.end()) {
    if (entries_.size() >= kMaxEntries) entries_.clear();
    it = entries_.emplace(shapes, Entry{}).first;
  }
  Entry& e = it->second;
  if (e.want != want) {  // num_threads changed: start over
    e = Entry{};
    e.want = want;
    for (int t = want;; t /= 2) {
      e.levels.push_back(Level{t});
      if (t <= 1) break;
    }
  }
  return e;
}

double ThreadTuner::current_ms(const Entry& e) {
  const int n = static_cast<int>(std::min<int64_t>(e.recent_runs, 4));
  if (n == 0) return e.levels[e.current].ms;
  // The median of at most 4: the mean of what is left once the lowest and highest are dropped.
  double sum = 0, lo = e.recent[0], hi = e.recent[0];
  for (int i = 0; i < n; ++i) {
    sum += e.recent[i];
    lo = std::min(lo, e.recent[i]);
    hi = std::max(hi, e.recent[i]);
  }
  return n <= 2 ? sum / n : (sum - lo - hi) / (n - 2);
}

void ThreadTuner::move_to(Entry& e, size_t level) {
  e.current = level;
  e.recent_runs = 0;
  e.interval = kFirstInterval;
  e.next_probe = e.runs + e.interval;
}

bool ThreadTuner::cores_busy(Entry& e) {
  // More threads gain only where other processes left the CPUs for them: the level tried must fit
  // in the CPUs this process could have had over the last reading's window (the yield rule's
  // measure, so a try is not undone at once). Without a reading (no /proc/stat, or none yet), try.
  const bool up = e.probe_up || e.current + 1 >= e.levels.size();
  if (!up || !last_idle_.ready) return false;
  if (e.levels[e.current - 1].threads <= last_idle_.free_cpus() + kFitSlack) return false;
  e.next_probe = e.runs + e.interval;  // look again later, as if the try had been made
  ++skipped_;
  return true;
}

void ThreadTuner::yield_to_others(Entry& e) {
  // Other processes hold CPUs that this run's threads would need: with more threads than the CPUs
  // left to this process, each parallel region waits for the thread that shares a core with them
  // (latency jumps, or collapses to hundreds of ms). Move at once to the most threads that fit,
  // without waiting for slow runs to show it. The tries of more threads (cores_busy) come back
  // once the CPUs are free.
  if (!last_idle_.ready) return;
  const double fit = last_idle_.free_cpus() + kFitSlack;
  size_t to = e.current;
  while (to + 1 < e.levels.size() && e.levels[to].threads > fit) ++to;
  if (to == e.current) return;
  move_to(e, to);
  e.again = e.probing = e.contended_probe = -1;
  e.alarm = false;
  e.slow_bits = 0;
  ++yields_;
}

int ThreadTuner::choose(const std::vector<Shape>& shapes, int want) {
  if (want <= 1) return 1;
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = entry(shapes, want);
  ++e.runs;
  // Keep the CPU reading fresh (the meter reads /proc/stat at most once per 100 ms window).
  const IdleCpuMeter::Reading r = idle_ ? idle_() : meter_.read();
  if (r.ready || !r.known) last_idle_ = r;
  yield_to_others(e);
  size_t level = e.current;
  if (e.again >= 0) {  // a probe's first run planned: measure it now
    level = static_cast<size_t>(e.again);
    e.again = -1;
    e.probing = static_cast<int>(level);
  } else if (e.alarm && e.current + 1 < e.levels.size()) {
    e.alarm = false;
    level = e.current + 1;
    e.probing = static_cast<int>(level);
    e.contended_probe = static_cast<int>(level);
  } else if (e.current > 0 && e.runs >= e.next_probe && !cores_busy(e)) {
    // Below the count asked for: try more threads again now and then (the cores may be free).
    // At the count asked for, only a slow run (the alarm) probes fewer: a probe at a new count
    // plans for it, which for a large model takes as long as many runs.
    e.next_probe = e.runs + e.interval;
    const bool can_down = e.current + 1 < e.levels.size();
    const bool up = e.probe_up || !can_down;
    e.probe_up = !e.probe_up;
    level = up ? e.current - 1 : e.current + 1;
    // More threads: their workers slept through the runs at fewer and wake at every parallel
    // region of this first run (a 2-thread probe of MobileNetV3-Small after 1-thread runs took
    // 0.38-0.55 ms against 0.30 warm, and the session stayed on 1 thread), so it warms them and
    // the next run is measured.
    (up ? e.again : e.probing) = static_cast<int>(level);
  }
  if (level > 0) ++reduced_;
  return e.levels[level].threads;
}

void ThreadTuner::record(const std::vector<Shape>& shapes, int want, int threads, double ms,
                         double cpu_ms) {
  if (want <= 1) return;
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = entry(shapes, want);
  auto it = std::find_if(e.levels.begin(), e.levels.end(),
                         [&](const Level& l) { return l.threads == threads; });
  if (it == e.levels.end()) return;  // the thread budget granted a count of no level
  const size_t index = static_cast<size_t>(it - e.levels.begin());
  const bool probe = e.probing == static_cast<int>(index);
  if (probe) e.probing = -1;
  Level& l = *it;
  ++l.runs;
  if (l.runs == 1) {  // its first run made its plan: a probe measures again at once
    if (probe) e.again = static_cast<int>(index);
    return;
  }
  // Two of the last four runs at the current level far slower than the best at it, or with the
  // calling thread off its core for a quarter of the run: contention (at most one such probe per
  // 8 runs, so that noise costs little). Contended runs alternate fast and slow as the other
  // process's time slices come and go, so two in a row would miss them.
  const bool slow = index == e.current && ((l.min_ms > 0 && ms > kContended * l.min_ms) ||
                                           (threads > 1 && cpu_ms < kCpuShare * ms));
  if (index == e.current) e.slow_bits = static_cast<uint8_t>(((e.slow_bits << 1) | slow) & 0xF);
  // A run over 3x the best is a collapse (threads waiting for preempted ones at every parallel
  // region): one is enough.
  const bool collapse = index == e.current && l.min_ms > 0 && ms > kCollapsed * l.min_ms;
  if (slow && (collapse || __builtin_popcount(e.slow_bits) >= 2) && e.runs - e.last_alarm >= 8) {
    e.alarm = true;
    e.last_alarm = e.runs;
    e.slow_bits = 0;
  }
  l.min_ms = l.min_ms == 0 ? ms : std::min(l.min_ms, ms);
  l.ms = (l.ms == 0 || probe) ? ms : l.ms + kAlpha * (ms - l.ms);
  if (index == e.current) e.recent[e.recent_runs++ % 4] = ms;
  // Only a probe moves the choice: it measured its level just now, where the others' estimates
  // may be stale (contention comes and goes), and one slow run at the current level must not send
  // the session back to a count measured under other conditions. The probe is weighed against
  // the current level's recent median, not its estimate: one run 3x the best (a preempted vCPU,
  // the first runs' page faults) raised the estimate of a 2-thread SqueezeNet (0.8 ms) past the
  // 1-thread time (1.35), and the session ran at 1 thread until its next try of 2.
  size_t best = e.current;
  const double now = current_ms(e);
  if (probe && index != e.current && (now == 0 || ms < now * kBetter)) best = index;
  if (probe && e.contended_probe == static_cast<int>(index)) {
    // Fewer threads tried because of contention: taken unless clearly slower. At the same
    // latency, fewer threads wait for fewer preempted ones: their slow runs are rarer and shorter.
    e.contended_probe = -1;
    if (index > e.current && ms * kBetter <= now) best = index;
  }
  if (best != e.current) {
    move_to(e, best);
  } else if (probe) {
    e.interval = std::min(e.interval * 2, kMaxInterval);  // the choice held: probe less often
  }
}

std::vector<ThreadTuner::LevelStats> ThreadTuner::levels(const std::vector<Shape>& shapes) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<LevelStats> out;
  auto it = entries_.find(shapes);
  if (it == entries_.end()) return out;
  for (const Level& l : it->second.levels) out.push_back({l.threads, l.ms, l.runs});
  std::stable_sort(out.begin(), out.end(), [](const LevelStats& a, const LevelStats& b) {
    return (a.ms > 0 ? a.ms : 1e300) < (b.ms > 0 ? b.ms : 1e300);
  });
  return out;
}

int64_t ThreadTuner::skipped_probes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return skipped_;
}

int64_t ThreadTuner::yields() const {
  std::lock_guard<std::mutex> lock(mu_);
  return yields_;
}

int64_t ThreadTuner::reduced_runs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reduced_;
}

}  // namespace tern
