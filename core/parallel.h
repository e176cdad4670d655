// parallel_for on the intra-op pool. The pool is OpenMP's, the same one oneDNN runs on, so our own
// kernels and oneDNN never compete for cores; builds without OpenMP (minimal, mobile) run on
// Tern's own pool (core/intra_op_pool.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <type_traits>

#if defined(TERN_HAVE_OPENMP)
#include <omp.h>
#else
#include "core/intra_op_pool.h"
#endif

namespace tern {

// How many chunks parallel_for splits n items into: at most num_threads, and no chunk under
// `grain` items (spreading a small op over threads costs more than it saves).
inline int64_t parallel_chunks(int64_t n, int64_t grain, int num_threads) {
  if (n <= 0) return 0;
  return std::max<int64_t>(
      1, std::min<int64_t>(num_threads, (n + grain - 1) / std::max<int64_t>(grain, 1)));
}

// Chunks per thread of parallel_for and parallel_for_slots, handed out as threads come free.
constexpr int kChunksPerThread = 4;

#if !defined(TERN_HAVE_OPENMP)
namespace detail {
// The own pool's side of parallel_for_chunks, parallel_for_slots and parallel_for, compiled once
// (core/parallel.cpp) rather than in each of their ~200 instantiations, which only add a call of
// their fn: fn(context, a, begin, end), `a` the chunk, the slot or (parallel_for) unused.
using RangeFn = void (*)(void* context, int64_t a, int64_t begin, int64_t end);
void pool_for_chunks(int64_t n, int64_t grain, int num_threads, RangeFn fn, void* context);
void pool_for_slots(int64_t n, int64_t grain, int num_threads, RangeFn fn, void* context);
void pool_for(int64_t n, int64_t grain, int num_threads, RangeFn fn, void* context);

template <class Fn>
void* erase(Fn& fn) {
  return const_cast<void*>(static_cast<const void*>(std::addressof(fn)));
}
template <class Fn>
void call_chunk(void* fn, int64_t chunk, int64_t begin, int64_t end) {
  (*static_cast<Fn*>(fn))(chunk, begin, end);
}
template <class Fn>
void call_slot(void* fn, int64_t slot, int64_t begin, int64_t end) {
  (*static_cast<Fn*>(fn))(static_cast<int>(slot), begin, end);
}
template <class Fn>
void call_range(void* fn, int64_t, int64_t begin, int64_t end) {
  (*static_cast<Fn*>(fn))(begin, end);
}
}  // namespace detail
#endif

// Calls fn(chunk, begin, end) for each chunk c < parallel_chunks(n, grain, num_threads) of
// [0, n), the chunks disjoint and in order, so that fn may use per-chunk scratch. An exception
// thrown by fn on a pool thread is caught there and rethrown on the calling thread once the
// region is over (one escaping an OpenMP region would end the process).
template <class Fn>
void parallel_for_chunks(int64_t n, int64_t grain, int num_threads, Fn&& fn) {
#if defined(TERN_HAVE_OPENMP)
  const int64_t chunks = parallel_chunks(n, grain, num_threads);
  if (chunks == 0) return;
  if (chunks == 1) {
    fn(int64_t{0}, int64_t{0}, n);
    return;
  }
  std::exception_ptr error;
  std::mutex error_mu;
#pragma omp parallel for num_threads(static_cast <int>(chunks)) schedule(static, 1)
  for (int64_t c = 0; c < chunks; ++c) {
    try {
      fn(c, n * c / chunks, n * (c + 1) / chunks);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu);
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
#else
  using F = std::remove_reference_t<Fn>;
  detail::pool_for_chunks(n, grain, num_threads, &detail::call_chunk<F>, detail::erase(fn));
#endif
}

// parallel_for with per-thread scratch: fn(slot, begin, end) with slot < num_threads, and no two
// calls with one slot at the same time; the chunks are parallel_for's.
template <class Fn>
void parallel_for_slots(int64_t n, int64_t grain, int num_threads, Fn&& fn) {
#if defined(TERN_HAVE_OPENMP)
  const int64_t chunks =
      num_threads > 1 ? parallel_chunks(n, grain, num_threads * kChunksPerThread) : 1;
  if (chunks <= 1) {
    if (n > 0) fn(0, int64_t{0}, n);
    return;
  }
  const int threads = static_cast<int>(std::min<int64_t>(num_threads, chunks));
  std::exception_ptr error;
  std::mutex error_mu;
#pragma omp parallel num_threads(threads)
  {
    const int slot = omp_get_thread_num();
    // (nowait: the region's end is the one barrier needed; a second after the loop costs a
    // round of wake-ups per call.)
#pragma omp for schedule(dynamic, 1) nowait
    for (int64_t c = 0; c < chunks; ++c) {
      try {
        fn(slot, n * c / chunks, n * (c + 1) / chunks);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
#else
  using F = std::remove_reference_t<Fn>;
  detail::pool_for_slots(n, grain, num_threads, &detail::call_slot<F>, detail::erase(fn));
#endif
}

// Calls fn(begin, end) on disjoint chunks covering [0, n), no chunk under `grain` items. With
// several threads the range is cut into up to kChunksPerThread chunks per thread, handed out as
// threads come free: a thread that another process slowed down (a shared machine) or that got the
// heavier items does fewer of them, instead of every thread waiting for it at the end.
template <class Fn>
void parallel_for(int64_t n, int64_t grain, int num_threads, Fn&& fn) {
#if defined(TERN_HAVE_OPENMP)
  const int64_t chunks =
      num_threads > 1 ? parallel_chunks(n, grain, num_threads * kChunksPerThread) : 1;
  if (chunks <= 1 || chunks <= num_threads) {
    parallel_for_chunks(n, grain, num_threads,
                        [&](int64_t, int64_t begin, int64_t end) { fn(begin, end); });
    return;
  }
  parallel_for_slots(n, grain, num_threads,
                     [&](int, int64_t begin, int64_t end) { fn(begin, end); });
#else
  using F = std::remove_reference_t<Fn>;
  detail::pool_for(n, grain, num_threads, &detail::call_range<F>, detail::erase(fn));
#endif
}

}  // namespace tern
