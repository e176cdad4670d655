// Depthwise convolutions (Conv and FusedConv with one input and one output channel per group,
// 1-D to 3-D, any kernel, stride, padding and dilation) over activations in channel blocks of 8
// or 16, the layout the planner gives MobileNet, EfficientNet, MNASNet and their kin.
//
// oneDNN has no depthwise kernel made ahead of time: its jit_dw generates code for each shape when
// the session is created (40-140 us a layer, 10-17 layers in those networks), plus the first
// primitive's one-time setup where a network has no other oneDNN layer. This kernel is compiled
// ahead of time and only packs the weights. Its tiles keep W output pixels of a row of one
// channel block in registers across the kernel's lines that fall inside the input:
// - Square kernels of 3 or 5 at stride 1 or 2 (dilated along the row: stride 1): the lines and
//   columns unrolled, each input column a line gives the tile loaded once and used by every pixel
//   and kernel column that reads it (jit_dw loads it once for each); columns outside the row read
//   as zeros. With a dilation D along the row, the row is D interleaved rows of its own.
// - Other kernels: each kernel column's weights held in registers, its FMAs reading the input;
//   in tiles whose pixels' windows cross the row's ends, each kernel column skips the pixels that
//   would read outside the row.
// On eight-lane tiles (AVX2, or blocks of 8) rows under 8 pixels and dilated ones stay with
// oneDNN, 1.4-1.5x faster there.
// Weights are packed once per session (or found packed in the model) as [C/B][taps][B], B the
// block. Bias and FusedConv's steps are applied in registers, or, where one needs an exponential
// (Sigmoid, SiLU, Tanh), after each run of rows on the vector primitives (fused_steps.h). Each
// output element is summed by one thread in one order, so results do not depend on the thread
// count.
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/cpu_libraries.h"
#include "backends/cpu/fused_steps.h"
#include "backends/cpu/kernels/channel_vectors.h"
#include "backends/cpu/kernels/conv_reg_steps.h"
#include "backends/cpu/kernels/conv_vec_ops.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "core/weight_memory.h"
#include "ops/common/window.h"
#include "ops/fused_conv.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace tern {
namespace {

constexpr int64_t kMaxLines = 64;  // kernel depth x kernel height
constexpr int kMaxTile = 8;        // pixels per tile
constexpr int kMaxFast = 8;        // pixels per tile of a square kernel's

// The pixels of an edge tile that read a kernel column inside the row: [first, end).
struct PixelRange {
  int8_t first, end;
};

// One tile call's inputs and where its outputs go.
struct DwArgs {
  const float* const* lines;  // the row's input lines inside the input (at column 0), block 0
  const int64_t* taps;        // each line's first tap (kernel column 0) in the weights' order
  int nlines;
  int64_t x0;            // the input column of pixel 0's kernel column 0
  int64_t sw, dw, kw;    // stride, dilation and kernel width
  int64_t iw;            // the input row's width
  int64_t phase;         // square kernels' tiles: floats from one output pixel to the next
  const float* w;        // block 0's packed weights, [taps][B]
  const float* bias;     // block 0's bias (B floats)
  const RegStep* steps;  // FusedConv's steps applied in registers
  int nsteps;
  float* out;                   // block 0's pixel 0's output (B floats a pixel)
  int64_t count;                // tiles, one after another along the row
  int64_t blocks;               // channel blocks, one after another
  int64_t in_block, out_block;  // floats from one block's input and output to the next
  int64_t w_block;              // floats from one block's weights to the next
  const PixelRange* bounds;     // an edge tile's, [kw]
};

using DwTileFn = void (*)(const DwArgs&);
struct DwTiles {
  // Tiles of W pixels of a K x K kernel (3 or 5) at stride S along the row, [S - 1][K / 2 - 1]
  // [W - 1], and dilated along it at stride 1, [2][K / 2 - 1][W - 1] (null past the widest).
  std::array<std::array<std::array<DwTileFn, kMaxFast>, 2>, 3> fast;
  int min_fast, max_fast;  // (max_fast 0: none)
  // Other kernels' tiles of W pixels, [edge][W - 1] (null past the widest).
  std::array<std::array<DwTileFn, kMaxTile>, 2> tile;
  int max_tile;
};

#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx2,fma"))), apply_to = function)
#endif
namespace avx512 {
struct V : conv_vec::Avx512 {
  static constexpr int kRegisters = 32;
  // 8 accumulators, and the columns of the input they read (a square kernel's tiles), of 32
  // registers.
  static constexpr int max_tile(int) { return 8; }
  static constexpr int min_fast(int) { return 4; }  // (a row of 4 or more as 4 ... 8)
  static constexpr int max_fast(int) { return 8; }
};
#include "backends/cpu/kernels/conv_depthwise_tile.inc"
const DwTiles kBlock16 = tiles_for<1>();
}  // namespace avx512
#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma")
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#endif
namespace avx2 {
struct V : conv_vec::Avx2 {
  static constexpr int kRegisters = 16;
  // At most 8 accumulators and their weights, of 16 registers; a square kernel's tiles (the
  // columns of the input they read in registers too) only for one vector a pixel.
  static constexpr int max_tile(int j) { return j == 1 ? 8 : 4; }
  static constexpr int min_fast(int) { return 2; }  // (a row of 2 or more as 2 ... 4)
  static constexpr int max_fast(int j) { return j == 1 ? 4 : 0; }
};
#include "backends/cpu/kernels/conv_depthwise_tile.inc"
const DwTiles kBlock8 = tiles_for<1>();
const DwTiles kBlock16 = tiles_for<2>();
}  // namespace avx2
#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options

class DepthwiseConv final : public Kernel {
 public:
  const char* name() const override { return name_; }
  size_t packed_bytes() const override { return own_copy_ ? blob_.data.byte_size() : 0; }
  std::vector<PackedWeight> packed_weights() const override { return {PackedWeight{1, blob_}}; }

  static Expected<std::unique_ptr<Kernel>> create(const OpContext& ctx) {
    const CpuIsa isa = effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability));
    if (isa != CpuIsa::kAvx512 && isa != CpuIsa::kAvx2) {
      return unsupported("conv_depthwise: the CPU (or cpu.max_capability) lacks AVX2");
    }
    if (ctx.flag(FlagId::kCpuConvAllowBf16) && onednn_native_bf16()) {
      return unsupported("conv_depthwise: cpu.conv.allow_bf16 is on, oneDNN's bf16 kernel runs it");
    }
    TERN_ASSIGN_OR_RETURN(ops::FusedConvParams fp, ops::parse_conv_or_fused(ctx));
    const ops::ConvParams& p = fp.conv;
    if (p.x.size() < 3 || p.x.size() > 5 || p.group < 2 || p.x[1] != p.group || p.y[1] != p.group) {
      return unsupported(
          "conv_depthwise: not a 1-D to 3-D convolution with one input and one output channel "
          "per group");
    }
    if (fp.has_sum) return unsupported("conv_depthwise: a residual");
    const int block = ctx.inputs[0].block;
    // (A block of all the channels is channels-last, the same bytes.)
    if ((block != 8 && block != 16) || ctx.outputs[0].block != block) {
      return unsupported("conv_depthwise: activations not in channel blocks of 8 or 16");
    }
    const ops::Window w3 = ops::as_3d(p.win);
    if (w3.kernel[0] * w3.kernel[1] > kMaxLines) {
      return unsupported("conv_depthwise: over ", kMaxLines, " input lines a pixel");
    }
    const Tensor* w = ctx.inputs[1].value;
    const Tensor* b = p.has_bias ? ctx.inputs[2].value : nullptr;
    if (!w || (p.has_bias && !b)) {
      return unsupported("conv_depthwise: weights or bias not constant");
    }
    // Eight-lane tiles (AVX2, or blocks of 8) hold too few pixels of a row narrower than 8, or of
    // a dilated one's interleaved rows: there oneDNN's kernel is faster (1.4-1.5x).
    const bool eight = block == 8 || isa != CpuIsa::kAvx512;
    if (eight && (w3.dilations[2] > 1 || w3.out[2] < 8)) {
      return unsupported(
          "conv_depthwise: a row under 8 pixels, or dilated, on eight-lane tiles (oneDNN's kernel "
          "is faster there)");
    }
    auto k = std::make_unique<DepthwiseConv>();
    k->tiles_ = block == 8               ? &avx2::kBlock8
                : isa == CpuIsa::kAvx512 ? &avx512::kBlock16
                                         : &avx2::kBlock16;
    k->vec_ = &vec_ops(isa);
    k->name_ = isa == CpuIsa::kAvx512 ? "conv_depthwise.avx512" : "conv_depthwise.avx2";
    k->win_ = w3;
    k->n_ = p.x[0];
    k->c_ = p.x[1];
    k->block_ = block;
    k->blocks_ = (k->c_ + block - 1) / block;
    k->taps_ = w3.kernel[0] * w3.kernel[1] * w3.kernel[2];
    // Work items: runs of rows (64 pixels or more) of groups of blocks whose lines a row reads
    // fit in 24 kB (half an L1 data cache), and at least 4 items a thread.
    const int64_t oh = w3.out[1], ow = w3.out[2];
    const int64_t line_bytes = w3.in[2] * block * static_cast<int64_t>(sizeof(float));
    const int64_t row_bytes = std::max<int64_t>(1, w3.kernel[0] * w3.kernel[1] * line_bytes);
    int64_t group = std::clamp<int64_t>(24 * 1024 / row_bytes, 1, k->blocks_);
    int64_t rows = std::clamp<int64_t>((64 + ow - 1) / std::max<int64_t>(1, ow), 1, oh);
    const int64_t threads = std::max<int64_t>(1, ctx.flag(FlagId::kNumThreads));
    auto items = [&] {
      return k->n_ * w3.out[0] * ((oh + rows - 1) / rows) * ((k->blocks_ + group - 1) / group);
    };
    while (threads > 1 && items() < 4 * threads && (group > 1 || rows > 1)) {
      if (group > 1) {
        group = (group + 1) / 2;
      } else {
        rows = (rows + 1) / 2;
      }
    }
    k->group_blocks_ = group;
    k->chunk_rows_ = rows;
    // Square kernels of 3 or 5 at stride 1 or 2 (dilated along the row: stride 1), rows of a few
    // pixels or more, on their own tiles (each input column loaded once, the kernel unrolled);
    // the others on the general ones.
    const int64_t kk = w3.kernel[2];
    k->fast_ = k->tiles_->max_fast > 0 && w3.kernel[0] == 1 && w3.kernel[1] == kk &&
               (kk == 3 || kk == 5) && w3.strides[2] <= 2 &&
               (w3.dilations[2] == 1 || w3.strides[2] == 1) &&
               w3.out[2] / w3.dilations[2] >= k->tiles_->min_fast;
    k->make_segments();
    k->bias_.assign(static_cast<size_t>(k->blocks_ * block), 0.0f);
    if (b) std::copy_n(b->data<float>(), k->c_, k->bias_.begin());
    // The steps go into the registers unless one needs an exponential: then all of them run
    // after each row, on the vector primitives.
    k->reg_steps_ = reg_steps_of(fp.epilogue);
    if (k->reg_steps_.size() != fp.epilogue.size()) k->steps_ = fp.epilogue;
    // The last block's padding channels: zero in, zero weights and bias; the steps may make them
    // non-zero (Clip, HardSigmoid, Affine, Sigmoid).
    k->zero_padding_ = k->c_ % block != 0 && !fp.epilogue.empty();
    TERN_RETURN_IF_ERROR(k->pack(ctx.inputs[1], *w, ctx.weights));
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Status run(const KernelArgs& a, const ExecContext& exec) const override {
    const ops::Window& w = win_;
    const int64_t chunks = (w.out[1] + chunk_rows_ - 1) / chunk_rows_;
    const int64_t groups = (blocks_ + group_blocks_ - 1) / group_blocks_;
    const int64_t items = n_ * groups * w.out[0] * chunks;
    if (items == 0 || w.out[2] == 0) return Status::ok();
    const float* x = a.inputs[0]->data<float>();
    float* y = a.outputs[0]->data<float>();
    // Consecutive items of a thread share input lines.
    parallel_for(items, 1, exec.num_threads, [&](int64_t begin, int64_t end) {
      for (int64_t item = begin; item < end; ++item) {
        const int64_t img = item / (groups * w.out[0] * chunks);
        const int64_t g = item / (w.out[0] * chunks) % groups;
        const int64_t od = item / chunks % w.out[0], oh0 = item % chunks * chunk_rows_;
        const int64_t cb = g * group_blocks_;
        run_rows(x, y, img, cb, std::min(blocks_, cb + group_blocks_) - cb, od, oh0,
                 std::min(w.out[1], oh0 + chunk_rows_));
      }
    });
    return Status::ok();
  }

 private:
  // A row's pixels as runs of tiles of one width: inner ones, whose windows lie within the input
  // row, and edge ones (one a run), whose windows cross its ends.
  struct Segment {
    int64_t first, width, count;     // first pixel, pixels a tile, tiles
    std::vector<PixelRange> bounds;  // an edge tile's, [kw]; empty: inner
  };

  // The row's segments: the pixels whose windows cross its start, those whose windows lie within
  // it, and those whose windows cross its end, each part as tiles of two widths a pixel apart,
  // the widest that fit the registers at most.
  void make_segments() {
    const ops::Window& w = win_;
    if (fast_) {
      // Each phase's pixels (every pixel undilated; with a dilation D along the row, pixels r,
      // r + D, ... for each r < D) as tiles of two widths a pixel apart, the widest that fit the
      // registers at most.
      const int64_t d = w.dilations[2];
      for (int64_t r = 0; r < std::min(d, w.out[2]); ++r) {
        const int64_t n = (w.out[2] - r + d - 1) / d, max_tile = tiles_->max_fast;
        const int64_t ntiles = (n + max_tile - 1) / max_tile;
        const int64_t wide = n / ntiles + (n % ntiles ? 1 : 0);
        const int64_t wide_tiles = n % ntiles ? n % ntiles : ntiles;
        segments_.push_back(Segment{r, wide, wide_tiles, {}});
        if (wide_tiles < ntiles) {
          segments_.push_back(
              Segment{r + wide * wide_tiles * d, wide - 1, ntiles - wide_tiles, {}});
        }
      }
      return;
    }
    const int64_t iw = w.in[2], ow = w.out[2], sw = w.strides[2], dw = w.dilations[2];
    const int64_t kw = w.kernel[2], pw = w.pads_begin[2];
    // [lo, hi): the pixels whose windows lie within the row.
    const int64_t last = iw - 1 + pw - (kw - 1) * dw;  // p sw at most, for p's last tap inside
    int64_t lo = std::min(ow, (pw + sw - 1) / sw);
    int64_t hi = last < 0 ? 0 : std::min(ow, last / sw + 1);
    if (hi <= lo) lo = hi = ow;  // every pixel's window crosses an end
    auto add = [&](int64_t from, int64_t to, bool edge) {
      const int64_t n = to - from, max_tile = tiles_->max_tile;
      if (n <= 0) return;
      const int64_t ntiles = (n + max_tile - 1) / max_tile;
      const int64_t wide = n / ntiles + (n % ntiles ? 1 : 0),
                    wide_tiles = n % ntiles ? n % ntiles : ntiles;
      for (int64_t i = 0, first = from; i < ntiles; ++i) {
        const int64_t width = i < wide_tiles ? wide : wide - 1;
        std::vector<PixelRange> bounds;
        if (edge) {
          for (int64_t fw = 0; fw < kw; ++fw) {
            // The tile's pixels that read column fw inside the row: a run (none: 0, 0).
            int64_t a = width, e = 0;
            for (int64_t q = 0; q < width; ++q) {
              const int64_t col = (first + q) * sw - pw + fw * dw;
              if (col >= 0 && col < iw) {
                a = std::min(a, q);
                e = q + 1;
              }
            }
            if (a >= e) a = e = 0;
            bounds.push_back({static_cast<int8_t>(a), static_cast<int8_t>(e)});
          }
        }
        Segment* prev = segments_.empty() ? nullptr : &segments_.back();
        if (!edge && prev && prev->bounds.empty() && prev->width == width) {
          ++prev->count;
        } else {
          segments_.push_back(Segment{first, width, 1, std::move(bounds)});
        }
        first += width;
      }
    };
    add(0, lo, true);
    add(lo, hi, false);
    add(hi, ow, true);
  }

  // Output rows [oh0, oh1) at depth od of blocks [cb, cb + nb) of image img.
  void run_rows(const float* x, float* y, int64_t img, int64_t cb, int64_t nb, int64_t od,
                int64_t oh0, int64_t oh1) const {
    const ops::Window& w = win_;
    const int64_t id = w.in[0], ih = w.in[1], iw = w.in[2], ow = w.out[2], b = block_;
    const int64_t in_block = id * ih * iw * b, out_block = w.out[0] * w.out[1] * ow * b;
    const float* in = x + (img * blocks_ + cb) * in_block;
    float* plane = y + (img * blocks_ + cb) * out_block + od * w.out[1] * ow * b;
    const float* lines[kMaxLines];
    int64_t taps[kMaxLines];
    DwArgs t{};
    t.lines = lines;
    t.taps = taps;
    t.sw = w.strides[2];
    t.dw = w.dilations[2];
    t.kw = w.kernel[2];
    t.w = w_ + cb * taps_ * b;
    t.bias = bias_.data() + cb * b;
    t.steps = reg_steps_.data();
    t.nsteps = static_cast<int>(reg_steps_.size());
    t.in_block = in_block;
    t.out_block = out_block;
    t.w_block = taps_ * b;
    t.blocks = nb;
    t.iw = iw;
    t.phase = t.dw * b;
    const int64_t k = w.kernel[2];
    const DwTileFn* fast = nullptr;  // a square kernel's tiles
    if (fast_) {
      const size_t kind = w.dilations[2] > 1 ? 2 : static_cast<size_t>(t.sw - 1);
      fast = tiles_->fast[kind][static_cast<size_t>(k / 2 - 1)].data();
    }
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      int n = 0;
      if (fast) {  // the kernel's lines (one deep), null outside the input
        const int64_t zd = od * w.strides[0] - w.pads_begin[0];
        for (int64_t fh = 0; fh < k; ++fh) {
          const int64_t zh = oh * w.strides[1] - w.pads_begin[1] + fh * w.dilations[1];
          const bool inside = zd >= 0 && zd < id && zh >= 0 && zh < ih;
          lines[fh] = inside ? in + (zd * ih + zh) * iw * b : nullptr;
        }
      } else {  // the lines (kernel depth and height) inside the input, and their first taps
        for (int64_t fd = 0; fd < w.kernel[0]; ++fd) {
          const int64_t zd = od * w.strides[0] - w.pads_begin[0] + fd * w.dilations[0];
          if (zd < 0 || zd >= id) continue;
          for (int64_t fh = 0; fh < w.kernel[1]; ++fh) {
            const int64_t zh = oh * w.strides[1] - w.pads_begin[1] + fh * w.dilations[1];
            if (zh < 0 || zh >= ih) continue;
            lines[n] = in + (zd * ih + zh) * iw * b;
            taps[n] = (fd * w.kernel[1] + fh) * w.kernel[2];
            ++n;
          }
        }
      }
      t.nlines = n;
      float* row = plane + oh * ow * b;
      for (const Segment& g : segments_) {
        // The segment's first pixel's first tap: outside the row only in a square kernel's tile
        // (which reads zeros there) or an edge tile (whose pixels skip it).
        t.x0 = g.first * t.sw - w.pads_begin[2];
        t.out = row + g.first * b;
        t.count = g.count;
        t.bounds = g.bounds.data();
        const size_t width = static_cast<size_t>(g.width - 1);
        if (fast) {
          fast[width](t);
        } else {
          tiles_->tile[g.bounds.empty() ? 0 : 1][width](t);
        }
      }
    }
    // The rows are contiguous in each block.
    for (int64_t i = 0; i < nb; ++i) {
      finish(plane + i * out_block + oh0 * ow * b, (oh1 - oh0) * ow, cb + i);
    }
  }

  // After `count` pixels of block cb (at `row`): FusedConv's other steps, then zeros in the last
  // block's padding channels where a step may have made them non-zero.
  void finish(float* row, int64_t count, int64_t cb) const {
    const int64_t b = block_;
    if (!steps_.empty()) apply_fused_steps(*vec_, steps_, row, count * b);
    if (!zero_padding_ || cb != blocks_ - 1) return;
    const int64_t used = c_ - cb * b;
    for (int64_t i = 0; i < count; ++i) {
      std::fill(row + i * b + used, row + (i + 1) * b, 0.0f);
    }
  }

  // The packed weights (core/weight_memory.h's packed_copy: the model's, the session's or own):
  // [blocks][taps][block], channels past C zero.
  Status pack(const TensorInfo& info, const Tensor& w, WeightCache* cache) {
    const int64_t lanes = block_;
    TERN_ASSIGN_OR_RETURN(
        PackedCopy copy,
        pack_channel_vectors(info, w, c_, taps_, lanes,
                             lanes == 16 ? "tern conv dw b16 v1" : "tern conv dw b8 v1", cache));
    blob_ = std::move(copy.data);
    own_copy_ = copy.own;
    w_ = static_cast<const float*>(blob_.data.raw());
    return Status::ok();
  }

  ops::Window win_;  // as 3-D (D, H, W)
  int64_t n_ = 0, c_ = 0, taps_ = 0, block_ = 16, blocks_ = 0;
  int64_t group_blocks_ = 1;       // channel blocks per work item
  int64_t chunk_rows_ = 1;         // output rows per work item
  bool fast_ = false;              // a square kernel's tiles (DwTiles::fast)
  std::vector<Segment> segments_;  // a row's tiles
  bool own_copy_ = false, zero_padding_ = false;
  std::vector<RegStep> reg_steps_;     // applied in the tiles' registers
  std::vector<float> bias_;            // padded with zeros to whole blocks
  std::vector<ops::FusedStep> steps_;  // else applied after each row
  const DwTiles* tiles_ = nullptr;
  const VecOps* vec_ = nullptr;
  const char* name_ = "conv_depthwise";
  const float* w_ = nullptr;
  PackedData blob_;
};

}  // namespace

TERN_REGISTRATION void register_cpu_conv_depthwise(KernelRegistry& r) {
  // Ahead of oneDNN (priority 0), which takes whatever this declines.
  r.add("Conv", "cpu", DType::kFloat32, DepthwiseConv::create, 10);
  r.add("FusedConv", "cpu", DType::kFloat32, DepthwiseConv::create, 10);
}

}  // namespace tern

#else  // not x86-64: nothing to register

namespace tern {
void register_cpu_conv_depthwise(KernelRegistry&) {}
}  // namespace tern

#endif
