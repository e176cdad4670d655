// Tern's own intra-op pool, for builds without OpenMP (the minimal and mobile builds): parallel_for
// runs its chunks on the calling thread and up to num_threads - 1 pool threads. Chunks are handed
// out as threads come free, and the caller returns as soon as every chunk is done: a pool thread
// that was slow to wake (another process had the core) finds nothing left and goes back to sleep,
// instead of the whole region waiting for it, so a run degrades towards the 1-thread time when
// cores are busy. Idle pool threads spin for "cpu.spin_us" microseconds, watching for work, then
// block on a condition variable. A parallel_for inside a chunk runs on its thread alone.
#pragma once

#include <cstdint>

namespace tern {

class IntraOpPool {
 public:
  static IntraOpPool& global();

  // Calls chunk(context, c, slot) for every c < chunks, on the calling thread and up to
  // threads - 1 pool threads; `slot` < threads identifies the thread for per-thread scratch
  // (no two calls with one slot run at once). Returns when all are done. An exception thrown by
  // a chunk is rethrown here once every chunk has run or been skipped.
  using ChunkFn = void (*)(void* context, int64_t chunk, int slot);
  void run(int64_t chunks, int threads, ChunkFn chunk, void* context);

  // Pool threads started so far.
  int size() const;

 private:
  IntraOpPool() = default;
  struct Impl;
  Impl* impl() const;
};

// Whether the calling thread is running a chunk of the pool (nested regions run serially).
bool in_intra_op_region();

}  // namespace tern
