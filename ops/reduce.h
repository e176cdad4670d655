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

}  // namespace tern::ops
