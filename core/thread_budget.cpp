#include "core/thread_budget.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>

#include "core/cgroup_cpu.h"
#include "core/cpu_set.h"
#include "core/flags.h"
#include "core/run_control.h"
#include "core/status.h"
#include "core/threading.h"

namespace tern {

namespace {

// The threads of the grant the calling thread runs under (0: none): nested runs share it.
thread_local int t_outer_threads = 0;

}  // namespace

const BudgetDefault& default_thread_budget() {
  static const BudgetDefault d = [] {
    BudgetDefault b;
    const CpuList mask = process_cpu_affinity();
    b.threads = std::max(1, static_cast<int>(mask.size()));
    b.reason = str_cat("affinity mask ", mask.size(), mask.size() == 1 ? " CPU" : " CPUs");
    if (const int cap = quota_thread_cap(process_cgroup_cpu_quota(), &b.reason)) {
      b.threads = std::min(b.threads, cap);
    }
    return b;
  }();
  return d;
}

struct ThreadBudget::Impl {
  mutable std::mutex mu;
  std::condition_variable freed;
  int in_use = 0;
  Stats stats;
};

ThreadBudget& ThreadBudget::global() {
  static ThreadBudget* b = new ThreadBudget();  // never destroyed: runs may end during exit
  return *b;
}

ThreadBudget::Impl* ThreadBudget::impl() const {
  static Impl* i = new Impl();
  return i;
}

int ThreadBudget::capacity() const {
  const int64_t set = Flags::global().get(FlagId::kCpuThreadBudget);
  return set > 0 ? static_cast<int>(set) : default_thread_budget().threads;
}

ThreadBudget::Grant ThreadBudget::acquire(int want, bool wait, const RunControl* control,
                                          Status* waited) {
  *waited = Status::ok();
  want = std::max(want, 1);
  Grant g;
  if (t_outer_threads > 0) {  // a run inside a run on this thread: the outer grant covers it
    g.threads_ = std::min(want, t_outer_threads);
    return g;
  }
  const int cap = capacity();
  Impl* im = impl();
  std::unique_lock<std::mutex> lock(im->mu);
  if (wait && im->in_use >= cap) {
    ++im->stats.waited;
    while (im->in_use >= cap) {
      // A run that may be cancelled or have a deadline looks again every 2 ms; others sleep
      // until a thread is given back.
      if (!control) {
        im->freed.wait(lock);
        continue;
      }
      im->freed.wait_for(lock, std::chrono::milliseconds(2));
      {
        Status st = control->check("the first step (waiting for threads of cpu.thread_budget)");
        if (!st.is_ok()) {
          *waited = std::move(st);
          return g;
        }
      }
    }
  }
  // The calling thread counts too: it runs whether or not anything is free.
  const int free = cap - im->in_use;
  const int take = std::clamp(free, 1, want);
  if (take < want) ++im->stats.shrunk;
  if (free <= 0) ++im->stats.over;
  ++im->stats.grants;
  im->in_use += take;
  im->stats.peak = std::max(im->stats.peak, im->in_use);
  g.budget_ = this;
  g.threads_ = take;
  g.held_ = take;
  g.outer_ = true;
  t_outer_threads = take;
  return g;
}

void ThreadBudget::give_back(int n) {
  if (n <= 0) return;
  Impl* im = impl();
  {
    std::lock_guard<std::mutex> lock(im->mu);
    im->in_use -= n;
  }
  for (int i = 0; i < n; ++i) im->freed.notify_one();  // one waiting run per thread freed
}

int ThreadBudget::take_free(int want) {
  if (want <= 0) return 0;
  const int cap = capacity();
  Impl* im = impl();
  std::lock_guard<std::mutex> lock(im->mu);
  const int take = std::clamp(cap - im->in_use, 0, want);
  im->in_use += take;
  im->stats.peak = std::max(im->stats.peak, im->in_use);
  return take;
}

ThreadBudget::Stats ThreadBudget::stats() const {
  Impl* im = impl();
  std::lock_guard<std::mutex> lock(im->mu);
  Stats s = im->stats;
  s.capacity = capacity();
  s.in_use = im->in_use;
  return s;
}

std::string ThreadBudget::report() const {
  const Stats s = stats();
  const int64_t set = Flags::global().get(FlagId::kCpuThreadBudget);
  return str_cat(
      "budget ", s.capacity, s.capacity == 1 ? " thread" : " threads", " (",
      set > 0 ? std::string("cpu.thread_budget") : "default: " + default_thread_budget().reason,
      "), in use ", s.in_use, ", peak ", s.peak, "; ", s.grants, " runs, ", s.shrunk,
      " given fewer threads than asked (", s.over, " with none free), ", s.waited, " waited");
}

ThreadBudget::Grant::Grant(Grant&& o) noexcept
    : budget_(o.budget_), threads_(o.threads_), held_(o.held_), outer_(o.outer_) {
  o.budget_ = nullptr;
  o.held_ = 0;
  o.outer_ = false;
}

ThreadBudget::Grant& ThreadBudget::Grant::operator=(Grant&& o) noexcept {
  if (this != &o) {
    release();
    budget_ = std::exchange(o.budget_, nullptr);
    threads_ = o.threads_;
    held_ = std::exchange(o.held_, 0);
    outer_ = std::exchange(o.outer_, false);
  }
  return *this;
}

ThreadBudget::Grant::~Grant() {
  release();
}

void ThreadBudget::Grant::release() {
  if (outer_) t_outer_threads = 0;
  if (budget_) budget_->give_back(held_);
  budget_ = nullptr;
  held_ = 0;
  outer_ = false;
}

void ThreadBudget::Grant::shrink_to(int n) {
  n = std::max(n, 1);
  if (n >= threads_) return;
  const int back = std::min(held_, threads_ - n);
  threads_ = n;
  if (budget_ && back > 0) {
    held_ -= back;
    budget_->give_back(back);
  }
  if (outer_) t_outer_threads = threads_;
}

int ThreadBudget::Grant::try_grow(int more) {
  if (!budget_ || more <= 0) return 0;
  const int took = budget_->take_free(more);
  held_ += took;
  return took;
}

GrantedThreadScope::GrantedThreadScope(int threads) : saved_(t_outer_threads) {
  t_outer_threads = std::max(threads, 1);
}

GrantedThreadScope::~GrantedThreadScope() {
  t_outer_threads = saved_;
}

}  // namespace tern
