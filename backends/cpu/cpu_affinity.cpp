#include "backends/cpu/cpu_affinity.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#if defined(TERN_HAVE_OPENMP)
#include <omp.h>
#endif

namespace tern {

namespace {

// What the calling thread's team carries. OpenMP keeps one pool of worker threads per thread that
// starts parallel regions, so this is per calling thread.
struct TeamPin {
  int depth = 0;           // runs in progress on this thread (nested: control-flow bodies)
  int64_t pinned_id = 0;   // the interned list the team's workers were given; 0: none
  int pinned_threads = 0;  // the team size they were given it at
  CpuList saved;           // the calling thread's mask before the run
  bool restore = false;
};
thread_local TeamPin t_pin;

// A team worker's mask before Tern first pinned it (OpenMP's place under OMP_PROC_BIND, else what
// it inherited), given back when a run unpins the team.
thread_local CpuList t_own;
thread_local bool t_pinned = false;

std::mutex g_report_mu;
std::string g_report = "no run has pinned threads";  // under g_report_mu

bool is_team_master() {
#if defined(TERN_HAVE_OPENMP)
  return omp_get_thread_num() == 0;
#else
  return true;
#endif
}

// Every thread of a team of `threads` started here sets its own mask (`cpus`; empty: the
// workers' own back); how many were refused.
int pin_team(const CpuList& cpus, int threads, int* error) {
  std::atomic<int> refused{0}, err{0};
#if defined(TERN_HAVE_OPENMP)
#pragma omp parallel num_threads(threads)
#else
  (void)threads;
#endif
  {
    // The calling thread's own mask is saved and restored by the run (begin/end_run_affinity).
    const bool worker = !is_team_master();
    bool ok = true;
    if (cpus.empty()) {
      if (worker && t_pinned && !t_own.empty()) ok = set_thread_cpu_affinity(t_own);
      if (worker) t_pinned = false;
    } else {
      if (worker && !t_pinned) t_own = thread_cpu_affinity();
      ok = set_thread_cpu_affinity(cpus);
      if (worker) t_pinned = true;
    }
    if (!ok) {
      refused.fetch_add(1);
      err.store(errno);
    }
  }
  *error = err.load();
  return refused.load();
}

void note(const CpuList& cpus, int threads, int refused, int error) {
  std::lock_guard<std::mutex> lock(g_report_mu);
  g_report = refused == 0 ? str_cat("latest team pinned to ", cpu_list_text(cpus), " (", threads,
                                    " thread", threads == 1 ? "" : "s", ")")
                          : str_cat("latest pinning to ", cpu_list_text(cpus), " refused for ",
                                    refused, " of ", threads, " threads: ", std::strerror(error));
}

}  // namespace

void begin_run_affinity(const FlagValues& flags) {
  TeamPin& p = t_pin;
  if (p.depth++ > 0) return;
  p.restore = false;
  const int64_t id = flags[FlagId::kCpuAffinity];
  if (id == 0) {
    if (p.pinned_id == 0) return;
    // A team pinned by an earlier run: its workers get their own masks back.
    int error = 0;
    pin_team({}, p.pinned_threads, &error);
    p.pinned_id = 0;
    p.pinned_threads = 0;
    return;
  }
  p.saved = thread_cpu_affinity();
  if (p.saved.empty()) return;  // unreadable: leave every mask alone
  const CpuList cpus = interned_cpu_list(id);
  const int threads = std::max(1, static_cast<int>(flags[FlagId::kNumThreads]));
  p.restore = true;
  if (id == p.pinned_id && threads <= p.pinned_threads) {
    set_thread_cpu_affinity(cpus);  // the workers still have it
    return;
  }
  // Workers beyond this run's team stay in OpenMP's pool: they get the list too.
  const int team = std::max(threads, p.pinned_threads);
  int error = 0;
  const int refused = pin_team(cpus, team, &error);
  note(cpus, team, refused, error);
  p.pinned_id = id;
  p.pinned_threads = team;
}

void end_run_affinity() {
  TeamPin& p = t_pin;
  if (p.depth == 0 || --p.depth > 0) return;
  if (p.restore) set_thread_cpu_affinity(p.saved);
  p.restore = false;
}

std::string cpu_affinity_report() {
  std::lock_guard<std::mutex> lock(g_report_mu);
  return g_report;
}

std::vector<CpuList> team_cpu_affinity(int threads) {
  std::vector<CpuList> out(static_cast<size_t>(std::max(1, threads)));
#if defined(TERN_HAVE_OPENMP)
  int started = 1;
#pragma omp parallel num_threads(threads)
  {
    const size_t i = static_cast<size_t>(omp_get_thread_num());
    if (i == 0) started = omp_get_num_threads();
    if (i < out.size()) out[i] = thread_cpu_affinity();
  }
  out.resize(std::min(out.size(), static_cast<size_t>(started)));
#else
  out.assign(1, thread_cpu_affinity());
#endif
  return out;
}

}  // namespace tern
