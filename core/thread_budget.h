// The process-wide intra-op thread budget: how many threads all runs of all sessions may keep busy
// at once. A run asks for its num_threads and gets what is left (at least its own calling thread,
// which is the application's), or, under "cpu.thread_budget_wait", waits until a share is free, so
// that N application threads calling tern_session_run never multiply the cores Tern keeps busy.
// The grant is the run's thread count: its plan is made for it (oneDNN sizes its work split then).
#pragma once

#include <cstdint>
#include <string>

namespace tern {

class RunControl;
class Status;

// The default budget: the logical CPUs of the process's affinity mask, at most its cgroup CPU quota
// rounded up (what the process can keep busy at once), with the reason.
struct BudgetDefault {
  int threads = 1;
  std::string reason;
};
const BudgetDefault& default_thread_budget();

class ThreadBudget {
 public:
  static ThreadBudget& global();

  // A share of the budget, given back when it dies. Runs nested in a run on the same thread
  // (subgraphs, a variant session) share the outer grant: they take nothing more.
  class Grant {
   public:
    Grant() = default;
    Grant(Grant&& o) noexcept;
    Grant& operator=(Grant&& o) noexcept;
    Grant(const Grant&) = delete;
    Grant& operator=(const Grant&) = delete;
    ~Grant();
    int threads() const { return threads_; }
    // Whether this is a run's own grant, not one nested in a run's (which shares the outer one).
    bool outer() const { return outer_; }
    // Gives back all but `n` (>= 1) threads now.
    void shrink_to(int n);
    // Takes up to `more` further threads if free (never waits) for the run's inter-op workers;
    // returns how many it took. threads() stays the intra-op count.
    int try_grow(int more);

   private:
    friend class ThreadBudget;
    void release();  // gives back what it holds
    ThreadBudget* budget_ = nullptr;
    int threads_ = 0;  // the run's thread count
    int held_ = 0;     // of those, taken from the budget (0 for a nested grant)
    bool outer_ = false;
  };

  // `want` (>= 1) threads: all of them when free; otherwise what is free, at least 1 (the calling
  // thread, which runs anyway). With `wait`, a run that would get fewer than `want` waits until
  // it can have at least one free thread, polling `control` (cancel and deadline) every 2 ms;
  // the wait's status is returned in *waited (OK or why it stopped).
  Grant acquire(int want, bool wait, const RunControl* control, Status* waited);

  // The budget in threads: "cpu.thread_budget", or default_thread_budget() when that is 0.
  int capacity() const;
  struct Stats {
    int capacity = 0;
    int in_use = 0;      // threads held now
    int peak = 0;        // most held at once
    int64_t grants = 0;  // runs granted
    int64_t shrunk = 0;  // runs given fewer threads than they asked for
    int64_t waited = 0;  // runs that waited for threads
    int64_t over = 0;    // runs that found nothing free and ran on their own thread alone
  };
  Stats stats() const;
  // "budget 2 threads (default: affinity mask 2 CPUs; no cgroup CPU quota), in use 0, peak 2;
  //  1200 runs, 40 given fewer threads, 0 waited"
  std::string report() const;

 private:
  ThreadBudget() = default;
  void give_back(int n);
  int take_free(int want);  // under no lock; returns what it took (may be 0)
  struct Impl;
  Impl* impl() const;
};

// Marks the calling thread (an inter-op pool thread working for a granted run) as covered by that
// run's grant, `threads` of it, while it lives: runs nested there take nothing from the budget.
class GrantedThreadScope {
 public:
  explicit GrantedThreadScope(int threads);
  ~GrantedThreadScope();
  GrantedThreadScope(const GrantedThreadScope&) = delete;
  GrantedThreadScope& operator=(const GrantedThreadScope&) = delete;

 private:
  int saved_;
};

}  // namespace tern
