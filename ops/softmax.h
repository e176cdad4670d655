// Softmax, LogSoftmax and Hardmax: the span they normalise, shared by the portable kernels and
// the backends' own.
#pragma once

#include "core/kernel.h"

namespace tern::ops {

// `outer` runs of `axis_len` elements at stride `inner`. Before opset 13 the input is coerced to
// 2-D at `axis` (default 1), so the span is every trailing dim and `inner` is 1; from opset 13 it
// is one axis (default -1). Checks the dtype (float types) and the axis.
struct SoftmaxSpan {
  int64_t outer = 1, axis_len = 1, inner = 1;
};
Expected<SoftmaxSpan> parse_softmax_span(const OpContext& ctx);

}  // namespace tern::ops
