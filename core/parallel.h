// parallel_for on the intra-op pool. The pool is OpenMP's, the same one oneDNN runs on, so our own
// kernels and oneDNN never compete for cores.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tern {

// Calls fn(begin, end) on disjoint chunks covering [0, n). Work under `grain` items per chunk is
// not split: spreading a small op over threads costs more than it saves.
template <class Fn>
void parallel_for(int64_t n, int64_t grain, int num_threads, Fn&& fn) {
  if (n <= 0) return;
  int64_t chunks = std::min<int64_t>(num_threads, (n + grain - 1) / std::max<int64_t>(grain, 1));
  if (chunks <= 1) {
    fn(int64_t{0}, n);
    return;
  }
#if defined(TERN_HAVE_OPENMP)
#pragma omp parallel for num_threads(static_cast <int>(chunks)) schedule(static, 1)
  for (int64_t c = 0; c < chunks; ++c) fn(n * c / chunks, n * (c + 1) / chunks);
#else
  fn(int64_t{0}, n);
#endif
}

}  // namespace tern
