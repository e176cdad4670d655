// Broadcast iteration for elementwise ops with any number of inputs: fn(out_index, offsets)
// is called for every output element with each input's element offset.
#pragma once

#include <algorithm>

#include "core/parallel.h"
#include "ops/common/op_utils.h"

namespace tern::ops {

template <size_t N, class Fn>
void broadcast_for_each(const BroadcastRows& br, int threads, Fn&& fn) {
  const int64_t inner = br.inner;
  int64_t step[N];
  for (size_t k = 0; k < N; ++k) step[k] = br.in_strides[k].back();
  parallel_for(br.rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)), threads,
               [&](int64_t r0, int64_t r1) {
                 int64_t base[N], off[N];
                 for (int64_t r = r0; r < r1; ++r) {
                   br.row_offsets(r, base);
                   for (int64_t i = 0; i < inner; ++i) {
                     for (size_t k = 0; k < N; ++k) off[k] = base[k] + i * step[k];
                     fn(r * inner + i, static_cast<const int64_t*>(off));
                   }
                 }
               });
}

}  // namespace tern::ops
