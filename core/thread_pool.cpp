#include "core/thread_pool.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <vector>

#include "core/exceptions.h"
#include "core/flags.h"
#include "core/spin_wait.h"
#include "core/threading.h"

namespace tern {

struct InterOpPool::Impl {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  int threads = 0;
  int idle = 0;
  int starting = 0;                 // created, not yet waiting
  std::atomic<uint64_t> posted{0};  // tasks queued so far (idle spinning threads watch it)

  void worker() {
    std::unique_lock<std::mutex> lock(mu);
    --starting;
    for (;;) {
      ++idle;
      if (queue.empty()) {  // spin "cpu.spin_us" for the next task, then sleep
        const int64_t spin_us = Flags::global().get(FlagId::kCpuSpinUs);
        if (spin_us > 0) {
          const uint64_t seen = posted.load(std::memory_order_acquire);
          lock.unlock();
          spin_for(spin_us, [&] { return posted.load(std::memory_order_acquire) != seen; });
          lock.lock();
        }
      }
      cv.wait(lock, [&] { return !queue.empty(); });
      --idle;
      auto task = std::move(queue.front());
      queue.pop_front();
      lock.unlock();
      TERN_TRY {
        task();
      }
      TERN_CATCH_ALL {}  // a task must not throw; the thread survives one that does
      lock.lock();
    }
  }
};

InterOpPool& InterOpPool::global() {
  static InterOpPool* pool = new InterOpPool();  // never destroyed: workers outlive main()
  return *pool;
}

InterOpPool::Impl* InterOpPool::impl() {
  static Impl* impl = new Impl();
  return impl;
}

int InterOpPool::launch(int n, const std::function<void()>& task) noexcept {
  Impl* im = nullptr;
  TERN_TRY {
    im = impl();
  }
  TERN_CATCH_ALL {
    return 0;
  }
  std::lock_guard<std::mutex> lock(im->mu);
  int launched = 0;
  // Each task is queued only once a thread is there to take it: a task never waits behind
  // another run's task, and none is left queued when a thread cannot be made.
  for (; launched < n; ++launched) {
    TERN_TRY {
      if (static_cast<int>(im->queue.size()) >= im->idle + im->starting) {
        if (!start_detached_thread([](void* p) { static_cast<Impl*>(p)->worker(); }, im)) break;
        ++im->threads;
        ++im->starting;
      }
      im->queue.push_back(task);
      im->posted.fetch_add(1, std::memory_order_release);
    }
    TERN_CATCH_ALL {  // std::bad_alloc
      break;
    }
  }
  im->cv.notify_all();
  return launched;
}

int InterOpPool::size() const {
  Impl* im = const_cast<InterOpPool*>(this)->impl();
  std::lock_guard<std::mutex> lock(im->mu);
  return im->threads;
}

}  // namespace tern
