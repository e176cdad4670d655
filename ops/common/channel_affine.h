// y = x * k[c] + shift[c], one scale and shift per channel of an [N, C, ...] float32 tensor, then
// max(y, 0) when `relu` (a fused Relu: NaN stays NaN), in the
// plain layout or channel-blocked (nChw8c / nChw16c; block == C is channels-last): what
// BatchNormalization computes and what Group/InstanceNormalization's blocked kernels write once
// their statistics are known. Splits across `threads`; y may be x.
#pragma once

#include <cstdint>

namespace tern::ops {

// block 0: plain ([N, C, pixels]); otherwise C % block == 0 and the data is [N, C / block,
// pixels, block].
void channel_affine(const float* x, float* y, const float* k, const float* shift, int64_t n,
                    int64_t c, int64_t pixels, int64_t block, int threads, bool relu = false);

}  // namespace tern::ops
