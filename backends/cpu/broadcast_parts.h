// Parallel walk over a broadcast's rows (ops::BroadcastRows) in work items of ~16K elements:
// whole rows, or parts of one long row (a same-shape element-wise op is one row of every
// element). Shared by the element-wise kernels that broadcast (binary_vec, qlinear_add); at most
// four operands.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/parallel.h"
#include "ops/common/op_utils.h"

namespace tern {

// Calls fn(row, first, count, offsets) for each part: elements [first, first + count) of row
// `row`, `offsets` the operands' offsets at the row's start (BroadcastRows::row_offsets).
template <class Fn>
void parallel_broadcast_parts(const ops::BroadcastRows& br, int threads, Fn&& fn) {
  constexpr int64_t kItem = 16384;
  const int64_t inner = br.inner;
  const int64_t parts = std::max<int64_t>(1, inner / kItem);
  const int64_t part = (inner + parts - 1) / parts;
  parallel_for(br.rows * parts, std::max<int64_t>(1, kItem / std::max<int64_t>(inner, 1)), threads,
               [&](int64_t t0, int64_t t1) {
                 int64_t off[4];
                 for (int64_t t = t0; t < t1; ++t) {
                   const int64_t r = t / parts, j0 = (t % parts) * part;
                   br.row_offsets(r, off);
                   fn(r, j0, std::min(part, inner - j0), static_cast<const int64_t*>(off));
                 }
               });
}

}  // namespace tern
