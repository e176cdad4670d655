// Float32 InstanceNormalization and GroupNormalization on Tern's vectorised primitives: one task
// per (image, group) computes the group's mean and variance (VecOps::moments, 16 lanes) and
// writes each channel as one fused multiply-add (VecOps::affine). Rows of the reference kernel's
// double-precision loop cost 10x more (U-Net's and wav2vec's normalisations).
// On channel-blocked and channels-last activations (the layout of the convolution before it, so
// no reorder to plain and back), per-channel sums run over pixel chunks in the block's lanes, the
// groups' statistics combine them, and one per-channel multiply-add writes the output.
#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/vec/vec.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "ops/common/channel_affine.h"
#include "ops/common/op_utils.h"
#include "ops/norm.h"

namespace tern {
namespace {

struct VecGroupNorm {
  const VecOps* vec = nullptr;
  ops::GroupNormParams p;
  int64_t block = 0;  // > 0: nChw{block}c (block == C: channels-last), rank 4
};

// Pixels per task of the blocked passes, and per float partial sum inside one.
constexpr int64_t kBlockedChunk = 1024, kLaneRun = 64;

struct BlockedSplit {
  int64_t blocks, chunks, tasks;  // channel blocks per image, pixel chunks, blocks * chunks * n
};
BlockedSplit blocked_split(const ops::GroupNormParams& p, int64_t block) {
  BlockedSplit s{p.c / block, (p.spatial + kBlockedChunk - 1) / kBlockedChunk, 0};
  s.tasks = p.n * s.blocks * s.chunks;
  return s;
}

// Scratch of the blocked kernel: per task and lane the sums of d and d^2 (double), d = x - K
// with K the channel's first value (shifted sums: no cancellation when the mean is far from 0);
// then per (image, channel) K, the scale and the shift (float).
size_t blocked_scratch(const ops::GroupNormParams& p, int64_t block) {
  const BlockedSplit s = blocked_split(p, block);
  return 2 * static_cast<size_t>(s.tasks * block) * sizeof(double) +
         3 * static_cast<size_t>(p.n * p.c) * sizeof(float);
}

// s1[l], s2[l] = the sums over `pixels` rows of `width` lanes of d and d^2, d = x - k[l]:
// floats over runs of kLaneRun rows, doubles across runs. kWidth > 0 fixes the width at compile
// time (8 or 16: the accumulators stay in registers); 0 reads `width` (channels-last rows).
template <int kWidth>
void shifted_sums(const float* x, int64_t pixels, int64_t width, const float* k, double* s1,
                  double* s2) {
  const int64_t w = kWidth > 0 ? kWidth : width;
  float a1[kWidth > 0 ? kWidth : 1024], a2[kWidth > 0 ? kWidth : 1024];
  for (int64_t l0 = 0; l0 < w; l0 += 1024) {  // lanes in slices that fit the accumulators
    const int64_t lanes = std::min<int64_t>(w - l0, kWidth > 0 ? kWidth : 1024);
    for (int64_t l = 0; l < lanes; ++l) s1[l0 + l] = s2[l0 + l] = 0;
    for (int64_t q0 = 0; q0 < pixels; q0 += kLaneRun) {
      for (int64_t l = 0; l < lanes; ++l) a1[l] = a2[l] = 0;
      const int64_t q1 = std::min(pixels, q0 + kLaneRun);
      const float* xp = x + q0 * w + l0;
      const float* kp = k + l0;
      for (int64_t px = q0; px < q1; ++px, xp += w) {
        if constexpr (kWidth > 0) {
          for (int l = 0; l < kWidth; ++l) {
            const float d = xp[l] - kp[l];
            a1[l] += d;
            a2[l] += d * d;
          }
        } else {
          for (int64_t l = 0; l < lanes; ++l) {
            const float d = xp[l] - kp[l];
            a1[l] += d;
            a2[l] += d * d;
          }
        }
      }
      for (int64_t l = 0; l < lanes; ++l) {
        s1[l0 + l] += a1[l];
        s2[l0 + l] += a2[l];
      }
    }
  }
}

// Two passes over the data: the shifted sums of every (pixel chunk, channel block) task, then,
// once each group's mean and variance are combined from them, one multiply-add per element.
Status run_group_norm_blocked(const VecGroupNorm& k, const KernelArgs& a, const ExecContext& exec) {
  const ops::GroupNormParams& p = k.p;
  const int64_t blk = k.block, cpg = p.c / p.groups;
  const BlockedSplit sp = blocked_split(p, blk);
  const float* x = a.inputs[0]->data<float>();
  const float* scale = a.inputs[1]->data<float>();
  const float* bias = a.inputs[2]->data<float>();
  float* y = a.outputs[0]->data<float>();
  double* s1 = static_cast<double*>(a.workspace);
  double* s2 = s1 + sp.tasks * blk;
  float* shift_k = reinterpret_cast<float*>(s2 + sp.tasks * blk);  // [n, c]: first values
  float* mul = shift_k + p.n * p.c;
  float* add = mul + p.n * p.c;
  for (int64_t r = 0; r < p.n * sp.blocks && p.spatial > 0; ++r) {  // each block's pixel 0
    std::copy(x + r * p.spatial * blk, x + r * p.spatial * blk + blk, shift_k + r * blk);
  }
  parallel_for(sp.tasks, 1, exec.num_threads, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t r = t / sp.chunks, p0 = (t % sp.chunks) * kBlockedChunk;
      const int64_t n = std::min(p.spatial, p0 + kBlockedChunk) - p0;
      const float* xp = x + (r * p.spatial + p0) * blk;
      const float* kr = shift_k + r * blk;
      if (blk == 16) {
        shifted_sums<16>(xp, n, blk, kr, s1 + t * blk, s2 + t * blk);
      } else if (blk == 8) {
        shifted_sums<8>(xp, n, blk, kr, s1 + t * blk, s2 + t * blk);
      } else {
        shifted_sums<0>(xp, n, blk, kr, s1 + t * blk, s2 + t * blk);
      }
    }
  });
  // Per (image, group): the mean from the channels' shifted sums, then the deviations from it,
  // sum (x - mean)^2 = S2 + 2 (K - mean) S1 + n (K - mean)^2 per channel.
  const double per_channel = static_cast<double>(p.spatial), count = per_channel * cpg;
  for (int64_t image = 0; image < p.n; ++image) {
    for (int64_t g = 0; g < p.groups; ++g) {
      auto channel_sums = [&](int64_t ch, double* c1, double* c2) {
        const int64_t r = image * sp.blocks + ch / blk;
        *c1 = *c2 = 0;
        for (int64_t c = 0; c < sp.chunks; ++c) {
          *c1 += s1[(r * sp.chunks + c) * blk + ch % blk];
          *c2 += s2[(r * sp.chunks + c) * blk + ch % blk];
        }
      };
      double total = 0;
      for (int64_t ch = g * cpg; ch < (g + 1) * cpg; ++ch) {
        double c1, c2;
        channel_sums(ch, &c1, &c2);
        total += c1 + per_channel * shift_k[image * p.c + ch];
      }
      const double mean = total / count;
      double sq = 0;
      for (int64_t ch = g * cpg; ch < (g + 1) * cpg; ++ch) {
        double c1, c2;
        channel_sums(ch, &c1, &c2);
        const double dk = shift_k[image * p.c + ch] - mean;
        sq += c2 + 2 * dk * c1 + per_channel * dk * dk;
      }
      const float inv = static_cast<float>(1.0 / std::sqrt(std::max(0.0, sq / count) + p.eps));
      for (int64_t ch = g * cpg; ch < (g + 1) * cpg; ++ch) {
        const int64_t s = p.per_group_scale ? g : ch, at = image * p.c + ch;
        mul[at] = scale[s] * inv;
        add[at] = static_cast<float>(bias[s] - mean * mul[at]);
      }
    }
  }
  for (int64_t image = 0; image < p.n; ++image) {
    const int64_t off = image * p.c * p.spatial;
    ops::channel_affine(x + off, y + off, mul + image * p.c, add + image * p.c, 1, p.c, p.spatial,
                        blk, exec.num_threads);
  }
  return Status::ok();
}

Status run_group_norm(const VecGroupNorm& k, const KernelArgs& a, const ExecContext& exec) {
  const ops::GroupNormParams& p = k.p;
  const float* x = a.inputs[0]->data<float>();
  const float* scale = a.inputs[1]->data<float>();
  const float* bias = a.inputs[2]->data<float>();
  float* y = a.outputs[0]->data<float>();
  const int64_t cpg = p.c / p.groups, len = cpg * p.spatial;
  parallel_for(p.n * p.groups, std::max<int64_t>(1, 16384 / std::max<int64_t>(len, 1)),
               exec.num_threads, [&](int64_t b, int64_t e) {
                 for (int64_t task = b; task < e; ++task) {
                   const int64_t g = task % p.groups;
                   const float* xg = x + task * len;
                   float* yg = y + task * len;
                   float mean = 0, inv = 0;
                   k.vec->moments(xg, len, static_cast<float>(p.eps), &mean, &inv);
                   for (int64_t c = 0; c < cpg; ++c) {
                     const int64_t s = p.per_group_scale ? g : g * cpg + c;
                     const float mul = scale[s] * inv;
                     k.vec->affine(xg + c * p.spatial, mul, bias[s] - mean * mul,
                                   yg + c * p.spatial, p.spatial);
                   }
                 }
               });
  return Status::ok();
}

template <bool kInstance>
Expected<std::unique_ptr<Kernel>> make_group_norm(const OpContext& ctx) {
  for (size_t i = 0; i < 3; ++i) {
    if (ctx.inputs[i].dtype != DType::kFloat32) return ops::dtype_error(ctx, i, "float32");
  }
  VecGroupNorm k{&vec_ops(effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability))), {}};
  TERN_ASSIGN_OR_RETURN(k.p, ops::parse_group_norm(ctx, kInstance));
  const int blk = ctx.outputs[0].block;
  if (blk > 0 || ctx.inputs[0].block > 0) {  // an empty blocked tensor runs no task
    if (ctx.inputs[0].block != blk || ctx.inputs[0].shape.size() != 4 || k.p.c % blk != 0) {
      return unsupported("input layout (block ", ctx.inputs[0].block,
                         ") differs from the output's (", blk,
                         ") or is not whole channel blocks of a rank-4 tensor");
    }
    k.block = blk;
    return make_kernel(kInstance ? "instance_norm_blocked" : "group_norm_blocked", k,
                       run_group_norm_blocked, blocked_scratch(k.p, blk));
  }
  if (k.p.spatial == 0 || k.p.n == 0) return unsupported("an empty input (the reference runs it)");
  return make_kernel(str_cat(kInstance ? "instance_norm." : "group_norm.", k.vec->isa), k,
                     run_group_norm);
}

}  // namespace

TERN_REGISTRATION void register_cpu_norm_vec(KernelRegistry& r) {
  r.add("InstanceNormalization", "cpu", DType::kFloat32, make_group_norm<true>, /*priority=*/1);
  r.add("GroupNormalization", "cpu", DType::kFloat32, make_group_norm<false>, /*priority=*/1);
}

}  // namespace tern
