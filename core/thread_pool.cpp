#include "core/thread_pool.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace tern {

struct InterOpPool::Impl {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  int threads = 0;
  int idle = 0;
  int starting = 0;  // created, not yet waiting

  void worker() {
    std::unique_lock<std::mutex> lock(mu);
    --starting;
    for (;;) {
      ++idle;
      cv.wait(lock, [&] { return !queue.empty(); });
      --idle;
      auto task = std::move(queue.front());
      queue.pop_front();
      lock.unlock();
      task();
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

void InterOpPool::launch(int n, const std::function<void()>& task) {
  Impl* im = impl();
  std::lock_guard<std::mutex> lock(im->mu);
  for (int i = 0; i < n; ++i) im->queue.push_back(task);
  // Enough threads for every queued task: a task never waits behind another run's task.
  int missing = static_cast<int>(im->queue.size()) - im->idle - im->starting;
  for (int i = 0; i < missing; ++i) {
    std::thread([im] { im->worker(); }).detach();
    ++im->threads;
    ++im->starting;
  }
  im->cv.notify_all();
}

int InterOpPool::size() const {
  Impl* im = const_cast<InterOpPool*>(this)->impl();
  std::lock_guard<std::mutex> lock(im->mu);
  return im->threads;
}

}  // namespace tern
