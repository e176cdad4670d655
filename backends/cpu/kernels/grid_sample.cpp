// GridSample on the CPU (float32 X and grid, plain layout, 1 to 3 spatial dims). Output points
// run in blocks: a block's taps (element offsets in a plane and weights, the same for every
// channel) are computed once, the padding folded in (border and reflection resolve the offset;
// zeros gives an outside tap weight 0 and an offset clamped to a neighbour the point reads anyway,
// and a point with no tap inside is written 0), and every channel's plane is then interpolated
// from them in a loop over the block's points with no branch but a final select. Blocks of all
// batches run on the intra-op threads.
#include <algorithm>
#include <limits>

#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "ops/common/op_utils.h"
#include "ops/grid_sample.h"

namespace tern {
namespace {

// (offset, weight) pairs of one block: 64 KiB, in the core's L2 cache while every channel reads
// them. A block's points read anywhere in each channel's plane (a random grid reads it all), so
// large blocks keep the planes' reads per run few.
constexpr int64_t kTapCapacity = 8192;
constexpr int64_t kMinBlock = 64;  // points: smaller blocks spend more on loop overhead than they
                                   // gain in parallelism
constexpr int kMaxSpatial = 3;     // 4^3 = 64 taps a point (cubic 3-D) at most

struct GridKernel {
  ops::GridSampleParams p;
  int taps = 1;       // per point: grid_taps(mode) ^ spatial rank
  int64_t block = 1;  // points per block
  int64_t plane = 1, points = 1;
  int slots = 1;  // per-thread blocks of taps in the workspace
};

// One tap of a point: the element's offset in a plane and its weight.
struct Tap {
  int32_t offset;
  float weight;
};

// Taps of one block in a thread's workspace slot, point-major ([point][tap]): the channel loop
// reads them as one sequential stream (tap-major rows a block apart alias in the L1 cache's
// sets and thrash it: cubic ran about 3x slower so); `inside` per point.
struct BlockTaps {
  Tap* taps;
  uint8_t* inside;
};

size_t slot_bytes(const GridKernel& k) {
  const auto entries = static_cast<size_t>(k.taps * k.block);
  return (entries * sizeof(Tap) + static_cast<size_t>(k.block) + 63) / 64 * 64;
}
BlockTaps slot_taps(const GridKernel& k, void* workspace, int64_t slot) {
  auto* base = static_cast<char*>(workspace) + static_cast<size_t>(slot) * slot_bytes(k);
  const auto entries = static_cast<size_t>(k.taps * k.block);
  return {reinterpret_cast<Tap*>(base), reinterpret_cast<uint8_t*>(base + entries * sizeof(Tap))};
}

// The taps of points [p0, p0 + count) of batch n.
void block_taps(const GridKernel& k, const float* grid, int64_t p0, int64_t count, BlockTaps* t) {
  const ops::GridSampleParams& p = k.p;
  const auto nd = static_cast<int>(p.in_dims.size());
  const int per_dim = ops::grid_taps(p.mode);
  for (int64_t q = 0; q < count; ++q) {
    const float* g = grid + (p0 + q) * nd;
    int32_t off[kMaxSpatial][4];
    float w[kMaxSpatial][4];
    bool any_inside = true;  // every dim has a tap inside
    for (int d = 0; d < nd; ++d) {
      const int64_t size = p.in_dims[static_cast<size_t>(d)];
      const float x = ops::grid_source_coord<float>(g[nd - 1 - d], size, p);
      const float f = std::floor(x);
      int64_t i0 = static_cast<int64_t>(f);
      if (p.mode == ops::GridMode::kNearest) {
        w[d][0] = 1;
      } else if (p.mode == ops::GridMode::kLinear) {
        w[d][0] = f + 1 - x;
        w[d][1] = x - f;
      } else {
        ops::grid_cubic_weights(x - f, w[d]);
        i0 -= 1;
      }
      bool dim_inside = false;
      for (int j = 0; j < per_dim; ++j) {
        bool in = true;
        off[d][j] = static_cast<int32_t>(ops::grid_tap_index(i0 + j, size, p, &in));
        if (!in) w[d][j] = 0;
        dim_inside = dim_inside || in;
      }
      any_inside = any_inside && dim_inside;
    }
    t->inside[q] = any_inside ? 1 : 0;
    // The tensor product of the dims' taps, dim 0 outermost.
    for (int tap = 0; tap < k.taps; ++tap) {
      int32_t o = 0;
      float wt = 1;
      for (int d = 0, rest = tap; d < nd; ++d) {
        const int j = rest % per_dim;
        rest /= per_dim;
        o = o * static_cast<int32_t>(p.in_dims[static_cast<size_t>(d)]) + off[d][j];
        wt *= w[d][j];
      }
      t->taps[q * k.taps + tap] = Tap{o, wt};
    }
  }
}

// For CHANNELS channels at once (planes `plane` apart in x, `points` apart in y): y[q] = the
// sum over q's taps of weight * x[offset], 0 where the point has no tap inside. Each tap is
// loaded once for all the channels. TAPS > 0 fixes the count at compile time so the loop unrolls.
template <int TAPS, int CHANNELS>
void apply_taps(const BlockTaps& t, int taps, const float* x, int64_t plane, int64_t count,
                float* y, int64_t points) {
  const int n = TAPS > 0 ? TAPS : taps;
  // Partial sums over every other tap: two dependency chains (a single-channel cubic point's sum
  // of 16 is otherwise bound by the add latency).
  constexpr int kChains = TAPS == 1 ? 1 : 2;
  const Tap* tap = t.taps;
  for (int64_t q = 0; q < count; ++q, tap += n) {
    float acc[kChains][CHANNELS] = {};
    for (int k = 0; k < n; k += kChains) {
      for (int h = 0; h < kChains && k + h < n; ++h) {
        for (int c = 0; c < CHANNELS; ++c) {
          acc[h][c] += tap[k + h].weight * x[c * plane + tap[k + h].offset];
        }
      }
    }
    for (int c = 0; c < CHANNELS; ++c) {
      float sum = acc[0][c];
      for (int h = 1; h < kChains; ++h) sum += acc[h][c];
      y[c * points + q] = t.inside[q] ? sum : 0.0f;
    }
  }
}

// Channels per pass over a block's taps: the taps are read once for four planes, and the four
// sums are independent chains (cubic 2-D, random grid: ~15% faster than one channel at a time).
constexpr int kChannelBlock = 4;

using ApplyFn = void (*)(const BlockTaps&, int, const float*, int64_t, int64_t, float*, int64_t);
struct ApplyFns {
  ApplyFn block, single;  // kChannelBlock channels, one channel
};

template <int TAPS>
ApplyFns apply_fns() {
  return {apply_taps<TAPS, kChannelBlock>, apply_taps<TAPS, 1>};
}

ApplyFns apply_for(int taps) {
  switch (taps) {
    case 1:
      return apply_fns<1>();
    case 2:
      return apply_fns<2>();
    case 4:
      return apply_fns<4>();
    case 8:
      return apply_fns<8>();
    case 16:
      return apply_fns<16>();
    default:
      return apply_fns<0>();
  }
}

Status run_grid_sample(const GridKernel& k, const KernelArgs& a, const ExecContext& exec) {
  const float* X = a.inputs[0]->data<float>();
  const float* G = a.inputs[1]->data<float>();
  float* Y = a.outputs[0]->data<float>();
  const ops::GridSampleParams& p = k.p;
  const auto nd = static_cast<int64_t>(p.in_dims.size());
  const int64_t blocks = (k.points + k.block - 1) / k.block;
  const ApplyFns apply = apply_for(k.taps);
  const int threads = std::min(exec.num_threads, k.slots);
  parallel_for_chunks(p.batch * blocks, 1, threads, [&](int64_t chunk, int64_t b0, int64_t b1) {
    BlockTaps taps = slot_taps(k, a.workspace, chunk);
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t n = b / blocks, p0 = (b % blocks) * k.block;
      const int64_t count = std::min(k.block, k.points - p0);
      block_taps(k, G + n * k.points * nd, p0, count, &taps);
      for (int64_t c = 0; c < p.channels;) {
        const int64_t nc = n * p.channels + c;
        const bool whole = c + kChannelBlock <= p.channels;
        (whole ? apply.block : apply.single)(taps, k.taps, X + nc * k.plane, k.plane, count,
                                             Y + nc * k.points + p0, k.points);
        c += whole ? kChannelBlock : 1;
      }
    }
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_grid_sample(const OpContext& ctx) {
  if (ctx.inputs[0].dtype != DType::kFloat32 || ctx.inputs[1].dtype != DType::kFloat32) {
    return unsupported("grid_sample takes float32 X and grid");
  }
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  GridKernel k;
  TERN_ASSIGN_OR_RETURN(k.p, ops::parse_grid_sample(ctx));
  const auto nd = static_cast<int>(k.p.in_dims.size());
  if (nd > kMaxSpatial) return unsupported("grid_sample takes 1 to 3 spatial dims");
  k.plane = numel(k.p.in_dims);
  k.points = numel(k.p.out_dims);
  if (k.plane > std::numeric_limits<int32_t>::max()) {
    return unsupported("grid_sample takes planes under 2^31 elements");
  }
  for (int d = 0; d < nd; ++d) k.taps *= ops::grid_taps(k.p.mode);
  // Blocks as large as the capacity allows, but enough of them for every thread.
  k.slots = std::max(1, static_cast<int>(ctx.flag(FlagId::kNumThreads)));
  const int64_t per_batch = std::max<int64_t>(1, k.slots / std::max<int64_t>(k.p.batch, 1));
  k.block = std::clamp((k.points + per_batch - 1) / per_batch, kMinBlock, kTapCapacity / k.taps);
  return make_kernel("grid_sample", k, run_grid_sample,
                     static_cast<size_t>(k.slots) * slot_bytes(k));
}

}  // namespace

TERN_REGISTRATION void register_cpu_grid_sample(KernelRegistry& r) {
  r.add("GridSample", "cpu", DType::kFloat32, make_grid_sample);
}

}  // namespace tern
