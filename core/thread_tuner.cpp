#include "core/thread_tuner.h"

#include <algorithm>

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
// A calling thread on a core of its own gets nearly all of a run's wall time on it.
constexpr double kCpuShare = 0.75;

}  // namespace

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

int ThreadTuner::choose(const std::vector<Shape>& shapes, int want) {
  if (want <= 1) return 1;
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = entry(shapes, want);
  ++e.runs;
  size_t level = e.current;
  if (e.again >= 0) {  // a probe's first run planned: measure it now
    level = static_cast<size_t>(e.again);
    e.again = -1;
    e.probing = static_cast<int>(level);
  } else if (e.alarm && e.current + 1 < e.levels.size()) {
    e.alarm = false;
    level = e.current + 1;
    e.probing = static_cast<int>(level);
  } else if (e.current > 0 && e.runs >= e.next_probe) {
    // Below the count asked for: try more threads again now and then (the cores may be free).
    // At the count asked for, only a slow run (the alarm) probes fewer: a probe at a new count
    // plans for it, which for a large model takes as long as many runs.
    e.next_probe = e.runs + e.interval;
    const bool can_down = e.current + 1 < e.levels.size();
    const bool up = e.probe_up || !can_down;
    e.probe_up = !e.probe_up;
    level = up ? e.current - 1 : e.current + 1;
    e.probing = static_cast<int>(level);
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
  // Two runs in a row far slower than the best at the current level, or with the calling thread
  // off its core for a quarter of the run: contention (at most one such probe per 8 runs, so that
  // noise costs little).
  const bool slow = index == e.current && ((l.min_ms > 0 && ms > kContended * l.min_ms) ||
                                           (threads > 1 && cpu_ms < kCpuShare * ms));
  if (slow && e.slow_before && e.runs - e.last_alarm >= 8) {
    e.alarm = true;
    e.last_alarm = e.runs;
  }
  if (index == e.current) e.slow_before = slow;
  l.min_ms = l.min_ms == 0 ? ms : std::min(l.min_ms, ms);
  l.ms = (l.ms == 0 || probe) ? ms : l.ms + kAlpha * (ms - l.ms);
  size_t best = e.current;
  for (size_t i = 0; i < e.levels.size(); ++i) {
    const Level& c = e.levels[i];
    if (c.ms > 0 && (e.levels[best].ms == 0 || c.ms < e.levels[best].ms * kBetter)) best = i;
  }
  if (best != e.current) {
    e.current = best;
    e.interval = kFirstInterval;
    e.next_probe = e.runs + e.interval;
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

int64_t ThreadTuner::reduced_runs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reduced_;
}

}  // namespace tern
