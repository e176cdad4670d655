// Homes for runs with several intra-op threads: a few long-lived Tern threads on which such runs
// execute (planning included), the calling thread waiting, in builds whose kernels run on OpenMP.
//
// Why: libgomp gives every thread that starts a parallel region a team of its own, kept while
// that thread lives. Once the process holds more team threads than CPUs (an application's main
// thread warmed a session up, its worker threads serve), every team stops spinning at barriers
// and sleeps at each parallel region: a 2-thread GoogLeNet run from a second application thread
// took 14 ms instead of 9 on 2 cores, slower than 1 thread. Runs on homes share a few teams
// whatever the number of application threads: as many homes as multi-thread runs run at once
// (the thread budget bounds that), each reused while idle, so the teams stay within the CPUs.
// A hand-off costs a wake-up each way (microseconds). Runs of one thread (no team) and runs
// nested in a run stay on their thread. A CPU session is created on a home too: folding its large
// constants may start parallel regions, which would give the creating thread a team.
#pragma once

#include <functional>

#include "core/status.h"

namespace tern {

class RunHomes {
 public:
  static RunHomes& global();
  // Runs `body` on an idle home (a new one when none is idle) and returns its status; an
  // exception it throws is rethrown here. Where no thread can be started, runs it here.
  // `body` runs with this thread's memory budget scope (core/memory_budget.h).
  Status run(const std::function<Status()>& body);
  // Whether the calling thread is a home (a run there runs in place).
  static bool on_home();
  // Homes started so far.
  int started() const;

 private:
  RunHomes() = default;
  struct Impl;
  Impl& impl() const;
};

}  // namespace tern
