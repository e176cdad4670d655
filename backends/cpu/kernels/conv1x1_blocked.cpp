// Pointwise convolution (1x1 kernel, no padding, one group) on channel-blocked
// activations (nChw16c or nChw8c, each side its own) with AVX-512, FusedConv's residual and
// element-wise epilogue applied in registers. It is compiled ahead of time: creating it costs
// nothing, where oneDNN generates code for every distinct 1x1 shape at session creation (~0.18 ms
// each, most of MobileNetV2's load). The planner blocks channels by 8 where they are not a
// multiple of 16 (MobileNetV3's 24, 40, 72, 120): oneDNN's AVX-512 kernels do not take nChw8c,
// and its AVX2 ones ran those layers up to 1.8x slower than ONNX Runtime.
//
// Weights are packed once, or found packed in the model, as [OC/16][IC][16]: for each input
// channel the 16 output channels of a block. A tile of R spatial positions x J vectors of 16
// output channels stays in registers across all input channels; every input value is broadcast
// into the FMAs. On an 8-blocked output a vector's halves are two blocks. Each output element is
// summed by one thread in one order, so results do not depend on the thread count.
#include <array>
#include <cmath>
#include <cstring>
#include <utility>

#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/cpu_libraries.h"
#include "backends/cpu/transpose_f32.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "core/weight_memory.h"
#include "ops/fused_conv.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace tern {
namespace {

constexpr int kBlock = 16;     // output channels per vector (and per packed weight block)
constexpr int kMaxGroup = 4;   // output vectors per tile
constexpr int64_t kRows = 24;  // positions per work item: a multiple of each J's tallest tile
constexpr size_t kBigWeights = 512 << 10;

// The tallest tile for a group of J output vectors: J * R accumulators, J weight vectors and a
// broadcast fit the 32 vector registers.
constexpr int max_rows(int j) {
  return j == 1 ? 24 : j == 2 ? 12 : j == 3 ? 8 : 6;
}

struct Step {
  ops::FusedAct act;
  float a = 0, b = 0;
};

struct TileArgs {
  const float* src;    // input at (n, channel block 0, first row)
  int64_t src_stride;  // floats between input channel blocks
  const float* w;      // packed weights of the group's first 16 output channels
  int64_t w_stride;    // floats between packed blocks of 16 output channels (IC * 16)
  int64_t ic;          // input channels
  const float* bias;   // padded bias at the group's first channel
  const float* z;      // residual at (n, the group's first output block, first row), or null
  float* dst;          // output at (n, the group's first output block, first row)
  int64_t dst_stride;  // floats between output channel blocks (of dst and z)
  const Step* steps;
  int num_steps;
  __mmask16 last_mask;  // real channels of the group's last vector
};

#define TERN_AVX512 __attribute__((target("avx512f,fma")))

// max / min through the all-lanes masked forms: GCC 12 warns inside its own _mm512_max_ps and
// _mm512_min_ps (their _mm512_undefined_ps operand). The same instruction comes out.
TERN_AVX512 inline __m512 vmax(__m512 a, __m512 b) {
  return _mm512_mask_max_ps(a, 0xFFFF, a, b);
}
TERN_AVX512 inline __m512 vmin(__m512 a, __m512 b) {
  return _mm512_mask_min_ps(a, 0xFFFF, a, b);
}

// The element-wise steps as functors, applied to a whole tile of accumulators by each().
struct ClipOp {
  __m512 lo, hi;
  TERN_AVX512 __m512 operator()(__m512 v) const { return vmin(hi, vmax(lo, v)); }
};
struct LeakyOp {
  __m512 alpha;
  TERN_AVX512 __m512 operator()(__m512 v) const {
    return _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ), v, alpha);
  }
};
struct AffineOp {  // v * a + b, clipped to [0, 1] for HardSigmoid
  __m512 a, b;
  bool clip01;
  TERN_AVX512 __m512 operator()(__m512 v) const {
    v = _mm512_fmadd_ps(v, a, b);
    return clip01 ? vmin(_mm512_set1_ps(1.0f), vmax(_mm512_setzero_ps(), v)) : v;
  }
};
struct HardSwishOp {
  TERN_AVX512 __m512 operator()(__m512 v) const {
    const __m512 g = _mm512_fmadd_ps(v, _mm512_set1_ps(1.0f / 6.0f), _mm512_set1_ps(0.5f));
    return _mm512_mul_ps(v, vmin(_mm512_set1_ps(1.0f), vmax(_mm512_setzero_ps(), g)));
  }
};

// 1 + exp(x); exp as in vec_impl.inc's exp_v (Cephes' polynomial on the reduced argument, 2^n by
// scalef): relative error ~1e-7.
TERN_AVX512 inline __m512 one_plus_exp(__m512 x) {
  x = vmax(vmin(x, _mm512_set1_ps(88.7f)), _mm512_set1_ps(-87.3f));
  // The all-lanes masked forms, as vmax/vmin above (GCC 12 warns inside the plain ones).
  const __m512 t = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f));
  const __m512 fx =
      _mm512_mask_roundscale_ps(t, 0xFFFF, t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 m = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
  return _mm512_add_ps(_mm512_set1_ps(1.0f), _mm512_mask_scalef_ps(m, 0xFFFF, m, fx));
}

// x * sigmoid(alpha x) = x / (1 + exp(-alpha x)). NaN stays NaN.
struct SwishOp {
  __m512 neg_alpha;
  TERN_AVX512 __m512 operator()(__m512 v) const {
    return _mm512_div_ps(v, one_plus_exp(_mm512_mul_ps(v, neg_alpha)));
  }
};

// 1 / (1 + exp(-x)) (squeeze-excitation's gate). NaN stays NaN.
struct SigmoidOp {
  TERN_AVX512 __m512 operator()(__m512 v) const {
    const __m512 s =
        _mm512_div_ps(_mm512_set1_ps(1.0f), one_plus_exp(_mm512_sub_ps(_mm512_setzero_ps(), v)));
    return _mm512_mask_mov_ps(s, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), v);
  }
};

template <int J, int R, class Op>
TERN_AVX512 inline void each(__m512 (&acc)[R][J], const Op& op) {
#pragma GCC unroll 24
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) acc[r][j] = op(acc[r][j]);
  }
}

// The epilogue forms a tile is compiled for: none, one clip (Relu is a clip at 0, Relu6 one at
// 0 and 6: with the residual add, all of MobileNet's), and any steps.
enum class Epilogue { kNone, kClip, kSteps };

template <int J, int R>
TERN_AVX512 void apply_steps(__m512 (&acc)[R][J], const Step* steps, int n) {
  for (int s = 0; s < n; ++s) {
    const Step& st = steps[s];
    switch (st.act) {
      case ops::FusedAct::kRelu:
        each(acc, ClipOp{_mm512_setzero_ps(), _mm512_set1_ps(INFINITY)});
        break;
      case ops::FusedAct::kLeakyRelu:
        each(acc, LeakyOp{_mm512_set1_ps(st.a)});
        break;
      case ops::FusedAct::kClip:
        each(acc, ClipOp{_mm512_set1_ps(st.a), _mm512_set1_ps(st.b)});
        break;
      case ops::FusedAct::kHardSigmoid:
      case ops::FusedAct::kAffine:
        each(acc, AffineOp{_mm512_set1_ps(st.a), _mm512_set1_ps(st.b),
                           st.act == ops::FusedAct::kHardSigmoid});
        break;
      case ops::FusedAct::kHardSwish:
        each(acc, HardSwishOp{});
        break;
      case ops::FusedAct::kSwish:
        each(acc, SwishOp{_mm512_set1_ps(-st.a)});
        break;
      case ops::FusedAct::kSigmoid:
        each(acc, SigmoidOp{});
        break;
      case ops::FusedAct::kTanh:
        break;  // declined at creation
    }
  }
}

// One tile: R positions x J vectors of 16 output channels, input blocked by IB channels, output
// by OB (8: a vector's halves are blocks 2j and 2j + 1; the second half of the last vector is
// absent when the output channels are an odd number of 8-blocks).
template <int J, int R, Epilogue E, int IB, int OB>
TERN_AVX512 void tile(const TileArgs& t) {
  __m512 acc[R][J];
#pragma GCC unroll 4
  for (int j = 0; j < J; ++j) {
    const __m512 b = _mm512_loadu_ps(t.bias + j * kBlock);
#pragma GCC unroll 24
    for (int r = 0; r < R; ++r) acc[r][j] = b;
  }
  const int64_t full = t.ic / IB;
  const int rest = static_cast<int>(t.ic % IB);
  for (int64_t cb = 0; cb <= full; ++cb) {
    const int n = cb < full ? IB : rest;
    const float* s = t.src + cb * t.src_stride;
    const float* w = t.w + cb * IB * kBlock;
    for (int i = 0; i < n; ++i) {
      __m512 wv[J];
#pragma GCC unroll 4
      for (int j = 0; j < J; ++j) wv[j] = _mm512_loadu_ps(w + j * t.w_stride + i * kBlock);
#pragma GCC unroll 24
      for (int r = 0; r < R; ++r) {
        const __m512 x = _mm512_set1_ps(s[r * IB + i]);
#pragma GCC unroll 4
        for (int j = 0; j < J; ++j) acc[r][j] = _mm512_fmadd_ps(x, wv[j], acc[r][j]);
      }
    }
  }
  // Where vector j's 16 channels lie: one block (OB 16), or two (OB 8) of which the second may
  // be absent.
  const bool half_last = OB == 8 && t.last_mask != 0xFFFF;
  auto lo_at = [&](auto* p, int j, int r) { return p + j * (kBlock / OB) * t.dst_stride + r * OB; };
  if (t.z) {
#pragma GCC unroll 24
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int j = 0; j < J; ++j) {
        // On 8-blocks, each half through a masked load: lanes 8-15 from the next block.
        const float* p = lo_at(t.z, j, r);
        __m512 z = OB == 16 ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(0x00FF, p);
        if (OB == 8 && !(j == J - 1 && half_last)) {
          z = _mm512_mask_loadu_ps(z, 0xFF00, p + t.dst_stride - 8);
        }
        acc[r][j] = _mm512_add_ps(acc[r][j], z);
      }
    }
  }
  if (E == Epilogue::kClip) {
    each(acc, ClipOp{_mm512_set1_ps(t.steps[0].a), _mm512_set1_ps(t.steps[0].b)});
  } else if (E == Epilogue::kSteps) {
    apply_steps(acc, t.steps, t.num_steps);
  }
#pragma GCC unroll 4
  for (int j = 0; j < J; ++j) {
#pragma GCC unroll 24
    for (int r = 0; r < R; ++r) {
      __m512 v = acc[r][j];
      float* d = lo_at(t.dst, j, r);
      if (OB == 16) {
        if (j == J - 1) v = _mm512_maskz_mov_ps(t.last_mask, v);  // padding channels stay 0
        _mm512_storeu_ps(d, v);
      } else {
        _mm512_mask_storeu_ps(d, 0x00FF, v);
        if (j < J - 1 || !half_last) _mm512_mask_storeu_ps(d + t.dst_stride - 8, 0xFF00, v);
      }
    }
  }
}

using TileFn = void (*)(const TileArgs&);

// Tile heights compiled per J: the tallest that fits, for the bulk of the positions, and powers
// of two below it for the last few of an image (a rest of 11 runs as 8 + 2 + 1).
constexpr int kHeights = 6;
constexpr int tile_rows(int j, int k) {
  const int heights[kHeights] = {max_rows(j), 16, 8, 4, 2, 1};
  return heights[k] <= max_rows(j) && (k == 0 || heights[k] < max_rows(j)) ? heights[k] : 0;
}
using TileRow = std::array<TileFn, kHeights>;  // by k of tile_rows; null where none is compiled

template <int J, Epilogue E, int IB, int OB, int R>
constexpr TileFn tile_or_null() {
  if constexpr (R == 0) {
    return nullptr;
  } else {
    return &tile<J, R, E, IB, OB>;
  }
}
template <int J, Epilogue E, int IB, int OB, size_t... Ks>
constexpr TileRow tile_row(std::index_sequence<Ks...>) {
  return TileRow{{tile_or_null<J, E, IB, OB, tile_rows(J, static_cast<int>(Ks))>()...}};
}
using TileTable = std::array<TileRow, kMaxGroup>;  // [J - 1]
template <Epilogue E, int IB, int OB>
constexpr TileTable tile_table() {
  constexpr auto ks = std::make_index_sequence<kHeights>();
  return {tile_row<1, E, IB, OB>(ks), tile_row<2, E, IB, OB>(ks), tile_row<3, E, IB, OB>(ks),
          tile_row<4, E, IB, OB>(ks)};
}
template <int IB, int OB>
constexpr std::array<TileTable, 3> tile_tables() {
  return {tile_table<Epilogue::kNone, IB, OB>(), tile_table<Epilogue::kClip, IB, OB>(),
          tile_table<Epilogue::kSteps, IB, OB>()};
}
// kTiles[input block is 8][output block is 8][epilogue][J - 1][k]
const std::array<std::array<std::array<TileTable, 3>, 2>, 2> kTiles = {
    {{tile_tables<16, 16>(), tile_tables<16, 8>()}, {tile_tables<8, 16>(), tile_tables<8, 8>()}}};

// The tallest compiled tile of J vectors not above `rows`: (its k, its height).
std::pair<int, int> pick_tile(int j, int64_t rows) {
  for (int k = 0; k < kHeights; ++k) {
    const int r = tile_rows(j, k);
    if (r > 0 && r <= rows) return {k, r};
  }
  return {kHeights - 1, 1};
}

// "tern conv1x1" packing: [OC/16][IC][16] floats, output channels past OC zero.
const char* const kPackedKey = "tern conv1x1 b16 v1";

class BlockedPointwiseConv final : public Kernel {
 public:
  const char* name() const override { return "conv1x1_avx512"; }
  size_t packed_bytes() const override { return in_place_ ? 0 : blob_.data.byte_size(); }
  std::vector<PackedWeight> packed_weights() const override { return {PackedWeight{1, blob_}}; }

  static Expected<std::unique_ptr<Kernel>> create(const OpContext& ctx) {
    if (effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability)) != CpuIsa::kAvx512) {
      return unsupported("conv1x1_avx512: the CPU (or cpu.max_capability) lacks AVX-512");
    }
    if (ctx.flag(FlagId::kCpuConvAllowBf16) && onednn_native_bf16()) {
      return unsupported("conv1x1_avx512: cpu.conv.allow_bf16 is on, oneDNN's bf16 kernel runs it");
    }
    TERN_ASSIGN_OR_RETURN(ops::FusedConvParams fp, ops::parse_conv_or_fused(ctx));
    const ops::ConvParams& p = fp.conv;
    if (p.x.size() != 4 || p.group != 1 || p.w[2] != 1 || p.w[3] != 1) {
      return unsupported("conv1x1_avx512: not a 2-D pointwise convolution of one group");
    }
    for (size_t d = 0; d < 2; ++d) {
      if (p.win.pads_begin[d] != 0 || p.win.pads_end[d] != 0) {
        return unsupported("conv1x1_avx512: padded");
      }
    }
    int ib = ctx.inputs[0].block, ob = ctx.outputs[0].block;
    // One pixel (squeeze-excitation's convolutions after a global pool, planned plain): an
    // [N, C, 1, 1] tensor is laid out alike plain and in whole blocks, and an input of one image
    // alike in 16-blocks whatever C (the last block's rest is read channel by channel).
    if (p.x[2] * p.x[3] == 1) {
      if (ib == 0) ib = p.x[1] % kBlock == 0 || p.x[0] == 1 ? kBlock : p.x[1] % 8 == 0 ? 8 : 0;
      if (ob == 0) ob = p.y[1] % kBlock == 0 ? kBlock : p.y[1] % 8 == 0 ? 8 : 0;
    }
    // A plain input of more pixels (after window attention's reshapes: MaxViT's MBConv) is
    // transposed into 16-channel blocks in the workspace first; a blocked output is what the
    // planner gives these.
    const bool strided = p.win.strides[0] != 1 || p.win.strides[1] != 1;
    // (A blocked output of all the channels is channels-last: conv1x1_nhwc's.)
    const bool plain_in = ib == 0 && ob != 0 && ob != p.y[1] && !strided && p.x[2] * p.x[3] > 1;
    if (plain_in) ib = kBlock;
    const int zb = fp.has_sum && ctx.inputs[3].block == 0 && p.x[2] * p.x[3] == 1
                       ? ob
                       : (fp.has_sum ? ctx.inputs[3].block : 0);
    if ((ib != 8 && ib != kBlock) || (ob != 8 && ob != kBlock) || (fp.has_sum && zb != ob)) {
      return unsupported("conv1x1_avx512: activations not blocked by 8 or 16 channels");
    }
    if (ob == 8 && p.y[1] % 8 != 0) {  // a vector's halves are whole 8-blocks or absent
      return unsupported("conv1x1_avx512: output channels not whole 8-blocks");
    }
    const Tensor* w = ctx.inputs[1].value;
    const Tensor* b = p.has_bias ? ctx.inputs[2].value : nullptr;
    if (!w || (p.has_bias && !b)) {
      return unsupported("conv1x1_avx512: weights or bias not constant");
    }
    auto k = std::make_unique<BlockedPointwiseConv>();
    for (const ops::FusedStep& st : fp.epilogue) {
      if (st.act == ops::FusedAct::kTanh) {
        return unsupported("conv1x1_avx512: no vector Tanh epilogue");
      }
      Step s{st.act};
      if (!st.params.empty()) s.a = st.params[0];
      if (st.params.size() > 1) s.b = st.params[1];
      if (st.act == ops::FusedAct::kRelu) s = Step{ops::FusedAct::kClip, 0.0f, INFINITY};
      k->steps_.push_back(s);
    }
    k->epilogue_ = k->steps_.empty() ? Epilogue::kNone
                   : k->steps_.size() == 1 && k->steps_[0].act == ops::FusedAct::kClip
                       ? Epilogue::kClip
                       : Epilogue::kSteps;
    k->ib_ = ib;
    k->ob_ = ob;
    k->n_ = p.x[0];
    k->ic_ = p.x[1];
    k->oc_ = p.y[1];
    k->hw_ = p.y[2] * p.y[3];
    // Strided (a ResNet's or RegNet's downsampling shortcut): the pixels it reads are copied into
    // the workspace first, as a stride-1 one's input.
    k->strided_ = strided;
    k->plain_in_ = plain_in;
    k->x_ = {p.x[2], p.x[3]};
    k->y_ = {p.y[2], p.y[3]};
    k->stride_ = {p.win.strides[0], p.win.strides[1]};
    k->ocb_ = (k->oc_ + kBlock - 1) / kBlock;
    k->has_sum_ = fp.has_sum;
    k->bias_.assign(static_cast<size_t>(k->ocb_ * kBlock), 0.0f);
    if (b) std::memcpy(k->bias_.data(), b->data<float>(), static_cast<size_t>(k->oc_) * 4);
    // Output vectors in groups of at most four, as even as they come (9 vectors: 3 + 3 + 3).
    const int64_t groups = (k->ocb_ + kMaxGroup - 1) / kMaxGroup;
    for (int64_t g = 0, first = 0; g < groups; ++g) {
      const int64_t size = k->ocb_ / groups + (g < k->ocb_ % groups ? 1 : 0);
      k->groups_.emplace_back(first, static_cast<int>(size));
      first += size;
    }
    TERN_RETURN_IF_ERROR(k->pack(ctx.inputs[1], *w, ctx.weights));
    return std::unique_ptr<Kernel>(std::move(k));
  }

  size_t workspace_bytes() const override {
    if (!strided_ && !plain_in_) return 0;
    return static_cast<size_t>(n_ * ((ic_ + ib_ - 1) / ib_) * hw_ * ib_) * sizeof(float);
  }

  Status run(const KernelArgs& a, const ExecContext& exec) const override {
    const float* x = a.inputs[0]->data<float>();
    if (strided_) x = subsample(x, static_cast<float*>(a.workspace), exec);
    if (plain_in_) x = to_blocks(x, static_cast<float*>(a.workspace), exec);
    const float* z = has_sum_ ? a.inputs[3]->data<float>() : nullptr;
    float* y = a.outputs[0]->data<float>();
    const int64_t icb = (ic_ + ib_ - 1) / ib_;  // blocks of the input, of the output
    const int64_t ocb = (oc_ + ob_ - 1) / ob_;
    const int64_t chunks = (hw_ + kRows - 1) / kRows;
    const int64_t groups = static_cast<int64_t>(groups_.size());
    // Large weights: walk one group's weights over all positions (they stay in cache), else
    // every group over one chunk of positions (its inputs stay in cache).
    const bool group_outer = blob_.data.byte_size() > kBigWeights;
    const int64_t items = n_ * chunks * groups;
    const int last_lanes = static_cast<int>(oc_ - (ocb_ - 1) * kBlock);
    const auto& tiles = kTiles[ib_ == 8][ob_ == 8][static_cast<size_t>(epilogue_)];
    parallel_for(items, 2, exec.num_threads, [&](int64_t begin, int64_t end) {
      for (int64_t it = begin; it < end; ++it) {
        const int64_t n = it / (chunks * groups), rest = it % (chunks * groups);
        const int64_t g = group_outer ? rest / chunks : rest % groups;
        const int64_t c = group_outer ? rest % chunks : rest / groups;
        const int64_t first = groups_[static_cast<size_t>(g)].first;  // in vectors of 16
        const int j = groups_[static_cast<size_t>(g)].second;
        const int64_t first_block = first * (kBlock / ob_);
        TileArgs t;
        t.src_stride = hw_ * ib_;
        t.w = w_ + first * ic_ * kBlock;
        t.w_stride = ic_ * kBlock;
        t.ic = ic_;
        t.bias = bias_.data() + first * kBlock;
        t.dst_stride = hw_ * ob_;
        t.steps = steps_.data();
        t.num_steps = static_cast<int>(steps_.size());
        t.last_mask = first + j == ocb_ ? static_cast<__mmask16>((1u << last_lanes) - 1) : 0xFFFF;
        const TileRow& row = tiles[static_cast<size_t>(j - 1)];
        const int64_t r_end = std::min(hw_, (c + 1) * kRows);
        for (int64_t r = c * kRows; r < r_end;) {
          const auto [k, rows] = pick_tile(j, r_end - r);
          t.src = x + (n * icb * hw_ + r) * ib_;
          const int64_t out = ((n * ocb + first_block) * hw_ + r) * ob_;
          t.z = z ? z + out : nullptr;
          t.dst = y + out;
          row[static_cast<size_t>(k)](t);
          r += rows;
        }
      }
    });
    return Status::ok();
  }

 private:
  // The input pixels a strided convolution reads, into `ws` as a stride-1 one's input (each
  // input block's plane of output pixels); returns ws.
  const float* subsample(const float* x, float* ws, const ExecContext& exec) const {
    const int64_t planes = n_ * ((ic_ + ib_ - 1) / ib_);
    const int64_t ih = x_[0], iw = x_[1], oh = y_[0], ow = y_[1];
    const size_t bytes = static_cast<size_t>(ib_) * sizeof(float);
    parallel_for(planes * oh, 8, exec.num_threads, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t plane = r / oh, h = r % oh;
        const float* src = x + ((plane * ih + h * stride_[0]) * iw) * ib_;
        float* dst = ws + ((plane * oh + h) * ow) * ib_;
        for (int64_t w = 0; w < ow; ++w)
          std::memcpy(dst + w * ib_, src + w * stride_[1] * ib_, bytes);
      }
    });
    return ws;
  }

  // A plain input into `ws` in blocks of 16 channels (8x8 transposes; the last block's lanes past
  // the channels left as they are: never read); returns ws.
  const float* to_blocks(const float* x, float* ws, const ExecContext& exec) const {
    const int64_t icb = (ic_ + kBlock - 1) / kBlock;
    parallel_for(n_ * icb, 1, exec.num_threads, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t n = i / icb, cb = i % icb;
        const int64_t rows = std::min<int64_t>(kBlock, ic_ - cb * kBlock);
        transpose_f32(x + (n * ic_ + cb * kBlock) * hw_, hw_, rows, hw_, ws + i * hw_ * kBlock,
                      kBlock);
      }
    });
    return ws;
  }

  // The packed weights (core/weight_memory.h's packed_copy: the model's, the session's or own).
  Status pack(const TensorInfo& info, const Tensor& w, WeightCache* cache) {
    const size_t bytes = static_cast<size_t>(ocb_ * ic_ * kBlock) * sizeof(float);
    auto make = [&]() {
      return packed_blob(bytes / sizeof(float), kPackedKey, [&](float* out) {
        const float* src = w.data<float>();
        for (int64_t ob = 0; ob < ocb_; ++ob) {
          for (int64_t c = 0; c < ic_; ++c) {
            float* row = out + (ob * ic_ + c) * kBlock;
            for (int l = 0; l < kBlock; ++l) {
              const int64_t o = ob * kBlock + l;
              row[l] = o < oc_ ? src[o * ic_ + c] : 0.0f;
            }
          }
        }
      });
    };
    TERN_ASSIGN_OR_RETURN(PackedCopy copy, packed_copy(info, kPackedKey, bytes, cache, make));
    blob_ = std::move(copy.data);
    in_place_ = !copy.own;
    w_ = static_cast<const float*>(blob_.data.raw());
    return Status::ok();
  }

  int ib_ = kBlock, ob_ = kBlock;  // channel blocks of the input and the output: 8 or 16
  int64_t n_ = 0, ic_ = 0, oc_ = 0, hw_ = 0, ocb_ = 0;  // ocb_: vectors of 16 output channels
  bool has_sum_ = false, in_place_ = false;  // in place: weights not the kernel's own copy
  bool strided_ = false;                     // the input subsampled into the workspace first
  bool plain_in_ = false;  // the input transposed into blocks in the workspace first
  std::array<int64_t, 2> x_{}, y_{}, stride_{};  // input and output (H, W), strides
  Epilogue epilogue_ = Epilogue::kNone;
  std::vector<Step> steps_;
  std::vector<float> bias_;                      // padded to whole blocks
  std::vector<std::pair<int64_t, int>> groups_;  // (first output vector, vectors)
  const float* w_ = nullptr;
  PackedData blob_;
};

}  // namespace

TERN_REGISTRATION void register_cpu_conv1x1_blocked(KernelRegistry& r) {
  // Ahead of oneDNN (priority 0), which takes whatever this declines.
  r.add("Conv", "cpu", DType::kFloat32, BlockedPointwiseConv::create, 10);
  r.add("FusedConv", "cpu", DType::kFloat32, BlockedPointwiseConv::create, 10);
}

}  // namespace tern

#else  // not x86-64: nothing to register

namespace tern {
void register_cpu_conv1x1_blocked(KernelRegistry&) {}
}  // namespace tern

#endif
