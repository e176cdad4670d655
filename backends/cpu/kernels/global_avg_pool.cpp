// GlobalAveragePool (float32, [N, C, spatial...]) on plain, channel-blocked (8 or 16) and
// channels-last activations, the [N, C, 1...] output plain (its bytes are the same in every
// layout): each channel's mean over its pixels, summed in AVX2 vectors of 8 channels (blocked and
// channels-last) or of 8 pixels (plain). oneDNN made a pooling primitive for each shape when the
// session was created (~15 us each, 16-17 in RegNetY-400MF's and EfficientNet-B0's
// squeeze-and-excitation blocks); this kernel is compiled ahead of time. Each mean is summed by
// one thread in one order, so results do not depend on the thread count (it also serves
// deterministic_algorithms, where oneDNN's average pooling declines).
#include <algorithm>

#include "backends/cpu/cpu_capability.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace tern {
namespace {

#define TERN_AVX2 __attribute__((target("avx2,fma")))

constexpr int64_t kGrainFloats = 16384;  // floats read per parallel chunk, at least

struct GlobalMean {
  int64_t n = 0, c = 0, pixels = 0;
  int block = 0;  // 8 or 16, -1 channels-last, 0 plain
};

// The sum of v's 8 lanes.
TERN_AVX2 inline float lanes_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Lanes [0, n) set, for masked loads of a row's last channels.
TERN_AVX2 inline __m256i first_lanes(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Blocked: item = (image, block); its b channels' sums over the pixels, 8 at a time.
TERN_AVX2 void blocked_means(const GlobalMean& g, const float* x, float* y, int64_t i0,
                             int64_t i1) {
  const int64_t b = g.block, blocks = (g.c + b - 1) / b;
  const float inv = 1.0f / static_cast<float>(g.pixels);
  for (int64_t item = i0; item < i1; ++item) {
    const int64_t img = item / blocks, blk = item % blocks;
    const float* src = x + item * g.pixels * b;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t p = 0; p < g.pixels; ++p) {
      for (int64_t k = 0; k < b / 8; ++k) {
        acc[k] = _mm256_add_ps(acc[k], _mm256_loadu_ps(src + p * b + k * 8));
      }
    }
    alignas(32) float sums[16];
    for (int64_t k = 0; k < b / 8; ++k) _mm256_store_ps(sums + k * 8, acc[k]);
    const int64_t first = blk * b, used = std::min(b, g.c - first);
    for (int64_t l = 0; l < used; ++l) y[img * g.c + first + l] = sums[l] * inv;
  }
}

// Channels-last: item = (image, run of up to 64 channels); 8 vectors summed down the pixels.
TERN_AVX2 void channels_last_means(const GlobalMean& g, const float* x, float* y, int64_t i0,
                                   int64_t i1) {
  const int64_t runs = (g.c + 63) / 64;
  const float inv = 1.0f / static_cast<float>(g.pixels);
  for (int64_t item = i0; item < i1; ++item) {
    const int64_t img = item / runs, c0 = item % runs * 64;
    const int64_t width = std::min<int64_t>(64, g.c - c0);
    const int64_t vectors = (width + 7) / 8;
    const __m256i tail = first_lanes(static_cast<int>(width - (vectors - 1) * 8));
    __m256 acc[8];
    for (int64_t k = 0; k < 8; ++k) acc[k] = _mm256_setzero_ps();
    const float* src = x + img * g.pixels * g.c + c0;
    for (int64_t p = 0; p < g.pixels; ++p, src += g.c) {
      for (int64_t k = 0; k + 1 < vectors; ++k) {
        acc[k] = _mm256_add_ps(acc[k], _mm256_loadu_ps(src + k * 8));
      }
      const int64_t k = vectors - 1;  // (the run's last channels: not past the row's end)
      acc[k] = _mm256_add_ps(acc[k], _mm256_maskload_ps(src + k * 8, tail));
    }
    alignas(32) float sums[64];
    for (int64_t k = 0; k < vectors; ++k) _mm256_store_ps(sums + k * 8, acc[k]);
    for (int64_t l = 0; l < width; ++l) y[img * g.c + c0 + l] = sums[l] * inv;
  }
}

// Plain: item = (image, channel); its pixels summed 8 at a time.
TERN_AVX2 void plain_means(const GlobalMean& g, const float* x, float* y, int64_t i0, int64_t i1) {
  const float inv = 1.0f / static_cast<float>(g.pixels);
  const int64_t whole = g.pixels / 8 * 8;
  for (int64_t item = i0; item < i1; ++item) {
    const float* src = x + item * g.pixels;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t p = 0; p < whole; p += 8) acc = _mm256_add_ps(acc, _mm256_loadu_ps(src + p));
    float s = lanes_sum(acc);
    for (int64_t p = whole; p < g.pixels; ++p) s += src[p];
    y[item] = s * inv;
  }
}

Status run_means(const GlobalMean& g, const KernelArgs& a, const ExecContext& exec) {
  const float* x = a.inputs[0]->data<float>();
  float* y = a.outputs[0]->data<float>();
  if (g.n == 0 || g.c == 0) return Status::ok();
  const int64_t items = g.block > 0   ? g.n * ((g.c + g.block - 1) / g.block)
                        : g.block < 0 ? g.n * ((g.c + 63) / 64)
                                      : g.n * g.c;
  const int64_t per_item = std::max<int64_t>(1, g.n * g.c * g.pixels / items);
  const int64_t grain = std::max<int64_t>(1, kGrainFloats / per_item);
  parallel_for(items, grain, exec.num_threads, [&](int64_t i0, int64_t i1) {
    if (g.block > 0) {
      blocked_means(g, x, y, i0, i1);
    } else if (g.block < 0) {
      channels_last_means(g, x, y, i0, i1);
    } else {
      plain_means(g, x, y, i0, i1);
    }
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_global_mean(const OpContext& ctx) {
  const CpuIsa isa = effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability));
  if (isa != CpuIsa::kAvx512 && isa != CpuIsa::kAvx2) {
    return unsupported("global_mean: the CPU (or cpu.max_capability) lacks AVX2");
  }
  const TensorInfo& in = ctx.inputs[0];
  if (in.dtype != DType::kFloat32 || in.shape.size() < 3) {
    return unsupported("global_mean: float32 [N, C, spatial...] only");
  }
  if (ctx.outputs[0].block != 0) return unsupported("global_mean: a blocked output");
  GlobalMean g;
  g.n = in.shape[0];
  g.c = in.shape[1];
  g.pixels = 1;
  for (size_t d = 2; d < in.shape.size(); ++d) g.pixels *= in.shape[d];
  if (g.pixels == 0) return unsupported("global_mean: no pixels");
  if (in.block == g.c && in.block > 0) {
    g.block = -1;
  } else if (in.block == 0 || in.block == 8 || in.block == 16) {
    g.block = in.block;
  } else {
    return unsupported("global_mean: input blocked by ", in.block);
  }
  return make_kernel("global_mean", g, run_means);
}

}  // namespace

TERN_REGISTRATION void register_cpu_global_avg_pool(KernelRegistry& r) {
  // Ahead of oneDNN (priority 0), which takes whatever this declines.
  r.add("GlobalAveragePool", "cpu", DType::kFloat32, make_global_mean, 10);
}

}  // namespace tern

#else  // not x86-64: nothing to register

namespace tern {
void register_cpu_global_avg_pool(KernelRegistry&) {}
}  // namespace tern

#endif
