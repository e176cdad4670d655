#include "ops/common/channel_affine.h"

#include <algorithm>

#include "core/parallel.h"

namespace tern::ops {

namespace {

// y = x * k + shift, then, kRelu, max(y, 0) (std::max(NaN, 0) is NaN: NaN stays, as Relu keeps
// it).
template <bool kRelu>
void affine(const float* x, float* y, const float* k, const float* shift, int64_t n, int64_t c,
            int64_t pixels, int64_t block, int threads) {
  auto out = [](float v) { return kRelu ? std::max(v, 0.0f) : v; };
  if (block <= 0) {
    parallel_for(n * c, std::max<int64_t>(1, 16384 / std::max<int64_t>(pixels, 1)), threads,
                 [&](int64_t b, int64_t e) {
                   for (int64_t plane = b; plane < e; ++plane) {
                     const int64_t ch = plane % c;
                     const float kc = k[ch], sc = shift[ch];
                     const float* xp = x + plane * pixels;
                     float* yp = y + plane * pixels;
                     for (int64_t i = 0; i < pixels; ++i) yp[i] = out(xp[i] * kc + sc);
                   }
                 });
    return;
  }
  // Runs of `block` channels, one per pixel; a task is a range of pixels of one channel block
  // (channels-last has one block per image, so its pixels are what splits across threads).
  const int64_t blocks = n * (c / block), grain = std::max<int64_t>(1, 16384 / block);
  const int64_t chunks = (pixels + grain - 1) / grain;
  parallel_for(blocks * chunks, 1, threads, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t r = t / chunks, p0 = (t % chunks) * grain;
      const int64_t p1 = std::min(pixels, p0 + grain);
      const float* kr = k + (r % (c / block)) * block;
      const float* sr = shift + (r % (c / block)) * block;
      const float* xp = x + (r * pixels + p0) * block;
      float* yp = y + (r * pixels + p0) * block;
      for (int64_t px = p0; px < p1; ++px, xp += block, yp += block) {
        for (int64_t l = 0; l < block; ++l) yp[l] = out(xp[l] * kr[l] + sr[l]);
      }
    }
  });
}

}  // namespace

void channel_affine(const float* x, float* y, const float* k, const float* shift, int64_t n,
                    int64_t c, int64_t pixels, int64_t block, int threads, bool relu) {
  (relu ? affine<true> : affine<false>)(x, y, k, shift, n, c, pixels, block, threads);
}

}  // namespace tern::ops
