// Which dims a Reduce* node reduces (axes from the attribute or the input, by opset), shared by
// the backends' kernels.
#pragma once

#include <vector>

#include "core/kernel.h"

namespace tern::ops {

struct ReduceSpec {
  std::vector<bool> reduced;  // per input dim
  bool keepdims = true;
  bool identity = false;  // noop_with_empty_axes with no axes
};

Expected<ReduceSpec> reduce_spec(const OpContext& ctx);

// The input as [outer, r, inner] with r the reduced elements, for device kernels that reduce one
// contiguous run of dims (dims of size 1 count as either); UNSUPPORTED for any other set.
struct ReduceRows {
  int64_t outer = 1, r = 1, inner = 1;
};
Expected<ReduceRows> reduce_rows(const Shape& x, const ReduceSpec& spec);

}  // namespace tern::ops
