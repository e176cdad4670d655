// GroupNormalization and InstanceNormalization's parameters, shared by the reference kernel
// (ops/norm.cpp) and the CPU's vectorised one (backends/cpu/kernels/norm_vec.cpp).
#pragma once

#include "core/kernel.h"

namespace tern::ops {

struct GroupNormParams {
  double eps;
  int64_t n, c, groups, spatial;  // InstanceNormalization: groups == c
  bool per_group_scale;           // GroupNormalization before opset 21: scale/bias per group
};

// Reads and checks the node's attributes and input shapes (`instance`: InstanceNormalization).
Expected<GroupNormParams> parse_group_norm(const OpContext& ctx, bool instance);

}  // namespace tern::ops
