#include "core/intra_op_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <list>
#include <mutex>

#include "core/exceptions.h"
#include "core/flags.h"
#include "core/spin_wait.h"
#include "core/threading.h"

namespace tern {

namespace {

thread_local bool t_in_region = false;

// One parallel region: its chunks are claimed through `next`; the caller waits for `done`.
struct Job {
  IntraOpPool::ChunkFn fn;
  void* context;
  int64_t chunks;
  int threads;
  std::atomic<int64_t> next{0};
  // Updated under the pool's mutex (read without it by the spinning caller).
  std::atomic<int64_t> done{0};
  std::atomic<int> active{0};  // pool threads working on it: the caller waits for them to leave
  int slots = 1;               // slot 0 is the caller's
  std::mutex error_mu;
  std::exception_ptr error;
};

// Claims and runs chunks of `job` until none is left; returns how many it ran.
int64_t work_on(Job& job, int slot) {
  int64_t ran = 0;
  for (;;) {
    const int64_t c = job.next.fetch_add(1, std::memory_order_relaxed);
    if (c >= job.chunks) break;
    TERN_TRY {
      job.fn(job.context, c, slot);
    }
    TERN_CATCH_ALL {
      std::lock_guard<std::mutex> lock(job.error_mu);
      if (!job.error) job.error = std::current_exception();
    }
    ++ran;
  }
  return ran;
}

}  // namespace

struct IntraOpPool::Impl {
  mutable std::mutex mu;
  std::condition_variable work_cv;      // pool threads wait here
  std::condition_variable done_cv;      // callers wait here
  std::list<Job*> jobs;                 // regions with chunks left to claim
  std::atomic<uint64_t> generation{0};  // bumped when a job is posted (spinning threads watch it)
  int threads = 0;                      // started (detached: they run until exit)
  int sleeping = 0;

  // A job whose chunks are not all claimed and that may take another thread, or null.
  Job* pick() {
    for (Job* j : jobs) {
      if (j->next.load(std::memory_order_relaxed) < j->chunks && j->slots < j->threads) {
        return j;
      }
    }
    return nullptr;
  }

  void worker() {
    t_in_region = true;  // every chunk it runs is in a region
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      Job* job = pick();
      if (!job) {
        // Spin a bounded time for the next region, then sleep.
        const int64_t spin_us = Flags::global().get(FlagId::kCpuSpinUs);
        if (spin_us > 0) {
          const uint64_t seen = generation.load(std::memory_order_acquire);
          lock.unlock();
          spin_for(spin_us, [&] { return generation.load(std::memory_order_acquire) != seen; });
          lock.lock();
          job = pick();
        }
        if (!job) {
          ++sleeping;
          work_cv.wait(lock);
          --sleeping;
          continue;
        }
      }
      const int slot = job->slots++;
      job->active.fetch_add(1, std::memory_order_relaxed);
      lock.unlock();
      const int64_t ran = work_on(*job, slot);
      lock.lock();
      job->done.fetch_add(ran, std::memory_order_release);
      job->active.fetch_sub(1, std::memory_order_release);
      done_cv.notify_all();
    }
  }
};

IntraOpPool& IntraOpPool::global() {
  static IntraOpPool* p = new IntraOpPool();  // never destroyed: its threads run until exit
  return *p;
}

IntraOpPool::Impl* IntraOpPool::impl() const {
  static Impl* i = new Impl();
  return i;
}

int IntraOpPool::size() const {
  Impl* im = impl();
  std::lock_guard<std::mutex> lock(im->mu);
  return im->threads;
}

bool in_intra_op_region() {
  return t_in_region;
}

void IntraOpPool::run(int64_t chunks, int threads, ChunkFn chunk, void* context) {
  if (chunks <= 0) return;
  threads = static_cast<int>(std::min<int64_t>(std::max(threads, 1), chunks));
  if (threads <= 1 || t_in_region) {
    for (int64_t c = 0; c < chunks; ++c) chunk(context, c, 0);
    return;
  }
  Impl* im = impl();
  Job job;
  job.fn = chunk;
  job.context = context;
  job.chunks = chunks;
  job.threads = threads;
  {
    std::lock_guard<std::mutex> lock(im->mu);
    // Grow to the threads asked for (a thread that cannot be created leaves its share to the
    // others: the chunks are claimed, never assigned).
    while (im->threads < threads - 1 &&
           start_detached_thread([](void* p) { static_cast<Impl*>(p)->worker(); }, im)) {
      ++im->threads;
    }
    im->jobs.push_back(&job);
    im->generation.fetch_add(1, std::memory_order_release);
    const int wake = std::min(im->sleeping, threads - 1);
    for (int i = 0; i < wake; ++i) im->work_cv.notify_one();
  }
  t_in_region = true;
  const int64_t ran = work_on(job, 0);
  t_in_region = false;
  {
    std::lock_guard<std::mutex> lock(im->mu);
    im->jobs.remove(&job);  // no pool thread joins it from now on
    job.done.fetch_add(ran, std::memory_order_release);
  }
  // The chunks pool threads claimed are running: spin a bounded time for them, then sleep.
  auto finished = [&] {
    return job.done.load(std::memory_order_acquire) == job.chunks &&
           job.active.load(std::memory_order_acquire) == 0;
  };
  spin_for(Flags::global().get(FlagId::kCpuSpinUs), finished);
  {
    std::unique_lock<std::mutex> lock(im->mu);
    im->done_cv.wait(lock, finished);
  }
  if (job.error) std::rethrow_exception(job.error);
}

}  // namespace tern
