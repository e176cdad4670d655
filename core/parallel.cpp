// The own pool's side of parallel_for (core/parallel.h), in builds without OpenMP.
#include "core/parallel.h"

#if !defined(TERN_HAVE_OPENMP)

namespace tern::detail {
namespace {

// One region's chunks of [0, n) for the pool: chunk c is [n * c / chunks, n * (c + 1) / chunks);
// `slots` passes fn the pool thread's slot instead of the chunk.
struct Region {
  RangeFn fn;
  void* context;
  int64_t n, chunks;
  bool slots;
};

void run_region(void* p, int64_t c, int slot) {
  const Region& r = *static_cast<const Region*>(p);
  r.fn(r.context, r.slots ? slot : c, r.n * c / r.chunks, r.n * (c + 1) / r.chunks);
}

}  // namespace

void pool_for_chunks(int64_t n, int64_t grain, int num_threads, RangeFn fn, void* context) {
  const int64_t chunks = parallel_chunks(n, grain, num_threads);
  if (chunks == 0) return;
  if (chunks == 1) {
    fn(context, 0, 0, n);
    return;
  }
  Region region{fn, context, n, chunks, false};
  IntraOpPool::global().run(chunks, static_cast<int>(chunks), run_region, &region);
}

void pool_for_slots(int64_t n, int64_t grain, int num_threads, RangeFn fn, void* context) {
  const int64_t chunks =
      num_threads > 1 ? parallel_chunks(n, grain, num_threads * kChunksPerThread) : 1;
  if (chunks <= 1) {
    if (n > 0) fn(context, 0, 0, n);
    return;
  }
  Region region{fn, context, n, chunks, true};
  IntraOpPool::global().run(chunks, static_cast<int>(std::min<int64_t>(num_threads, chunks)),
                            run_region, &region);
}

void pool_for(int64_t n, int64_t grain, int num_threads, RangeFn fn, void* context) {
  const int64_t chunks =
      num_threads > 1 ? parallel_chunks(n, grain, num_threads * kChunksPerThread) : 1;
  if (chunks <= 1 || chunks <= num_threads) {
    pool_for_chunks(n, grain, num_threads, fn, context);
  } else {
    pool_for_slots(n, grain, num_threads, fn, context);
  }
}

}  // namespace tern::detail

#endif
