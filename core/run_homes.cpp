#include "core/run_homes.h"

#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "core/exceptions.h"
#include "core/flags.h"
#include "core/memory_budget.h"
#include "core/progress.h"
#include "core/spin_wait.h"
#include "core/threading.h"

namespace tern {

namespace {

thread_local bool t_on_home = false;

// More homes than this would only mean more teams than any machine has CPUs for.
constexpr size_t kMaxHomes = 256;

struct Home {
  std::mutex mu;
  std::condition_variable posted_cv, done_cv;
  std::atomic<uint64_t> posted{0};  // jobs posted so far (the home watches it while idle)
  const std::function<Status()>* job = nullptr;
  std::shared_ptr<MemoryBudget> budget;
  // Progress reports relayed to the caller, whose thread the sink is promised to run on: the home
  // posts one and waits until the caller has passed it to its sink.
  bool relay = false;  // the caller has a sink
  const char* stage = nullptr;
  size_t done_steps = 0, total_steps = 0;
  bool report_pending = false;
  Status result;
  std::exception_ptr error;
  bool done = false;
  bool busy = false;  // under Impl::mu: taken by a run

  void loop() {
    t_on_home = true;
    uint64_t seen = 0;
    for (;;) {
      // Back-to-back runs find the home awake: it watches for the next job cpu.spin_us first.
      spin_for(Flags::global().get(FlagId::kCpuSpinUs),
               [&] { return posted.load(std::memory_order_acquire) != seen; });
      std::unique_lock<std::mutex> lock(mu);
      posted_cv.wait(lock, [&] { return posted.load(std::memory_order_acquire) != seen; });
      seen = posted.load(std::memory_order_acquire);
      const std::function<Status()>* body = job;
      std::shared_ptr<MemoryBudget> charged_to = budget;
      const bool relayed = relay;
      lock.unlock();
      const ProgressSink relay_sink = [this](const char* s, size_t d, size_t t) {
        std::unique_lock<std::mutex> l(mu);
        stage = s, done_steps = d, total_steps = t;
        report_pending = true;
        done_cv.notify_one();
        posted_cv.wait(l, [&] { return !report_pending; });
      };
      Status st;
      std::exception_ptr caught;
      TERN_TRY {
        BudgetScope scope(std::move(charged_to));
        ProgressScope progress(relayed ? &relay_sink : nullptr);
        st = (*body)();
      }
      TERN_CATCH_ALL {
        caught = std::current_exception();
      }
      lock.lock();
      result = std::move(st);
      // Moved, not copied: the caller holds the only reference from here, so the exception is
      // freed on the caller's thread (libstdc++'s reference counts are invisible to TSan).
      error = std::move(caught);
      done = true;
      lock.unlock();
      done_cv.notify_one();
    }
  }
};

}  // namespace

struct RunHomes::Impl {
  std::mutex mu;
  std::vector<std::unique_ptr<Home>> homes;  // never shrinks: homes live until exit
};

RunHomes& RunHomes::global() {
  static RunHomes* homes = new RunHomes();  // never destroyed: its threads run until exit
  return *homes;
}

RunHomes::Impl& RunHomes::impl() const {
  static Impl* i = new Impl();
  return *i;
}

bool RunHomes::on_home() {
  return t_on_home;
}

int RunHomes::started() const {
  Impl& im = impl();
  std::lock_guard<std::mutex> lock(im.mu);
  return static_cast<int>(im.homes.size());
}

Status RunHomes::run(const std::function<Status()>& body) {
  if (t_on_home) return body();
  Impl& im = impl();
  Home* home = nullptr;
  {
    std::lock_guard<std::mutex> lock(im.mu);
    // The first idle home: the same one serves one caller after another, its team kept warm.
    for (const auto& h : im.homes) {
      if (!h->busy) {
        home = h.get();
        break;
      }
    }
    if (!home && im.homes.size() < kMaxHomes) {
      auto h = std::make_unique<Home>();
      if (start_detached_thread([](void* p) { static_cast<Home*>(p)->loop(); }, h.get())) {
        home = h.get();
        im.homes.push_back(std::move(h));
      }
    }
    if (home) home->busy = true;
  }
  if (!home) return body();  // no home to be had: run here
  const ProgressSink* sink = progress_sink();
  std::unique_lock<std::mutex> lock(home->mu);
  home->job = &body;
  home->budget = MemoryBudget::current();
  home->relay = sink != nullptr;
  home->done = false;
  home->posted.fetch_add(1, std::memory_order_release);
  home->posted_cv.notify_one();
  for (;;) {
    home->done_cv.wait(lock, [&] { return home->done || home->report_pending; });
    if (!home->report_pending) break;
    const char* stage = home->stage;
    const size_t done = home->done_steps, total = home->total_steps;
    lock.unlock();
    report_progress(stage, done, total);  // on this thread, to its sink
    lock.lock();
    home->report_pending = false;
    home->posted_cv.notify_one();
  }
  Status st = std::move(home->result);
  std::exception_ptr error = home->error;
  home->error = nullptr;
  home->job = nullptr;
  home->budget.reset();
  lock.unlock();
  {
    std::lock_guard<std::mutex> guard(im.mu);
    home->busy = false;
  }
#if TERN_HAVE_EXCEPTIONS
  if (error) std::rethrow_exception(error);
#endif
  return st;
}

}  // namespace tern
