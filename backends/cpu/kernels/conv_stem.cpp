// Convolutions over a few input channels of plain activations (Conv and FusedConv, one group,
// 1-D to 3-D, any kernel, stride, padding and dilation): the first layer of vision, video and
// audio networks, which reads the model's image, clip or waveform (1-4 channels), written in the
// layout the planner gives the network (channels-last, or channel blocks of 8 or 16 with the
// padding channels zero).
//
// oneDNN has no kernel made ahead of time for these shapes: its brgemm convolution generates code
// for each one when the session is created, 0.25-1.9 ms a layer (1.9 ms for a 5x5 filter over one
// channel, 0.6 ms for GoogLeNet's 7x7 over RGB), plus a reorder of the input to its layout; this
// kernel is compiled ahead of time and only packs the weights. Its tiles are oneDNN's direct
// kernel's: W output pixels of a row x J vectors of output channels stay in registers across the
// input lines (channel, kernel depth and height) that fall inside the input and the kernel's
// columns, each input value broadcast into the FMAs; for pixels whose window crosses the row's
// ends the tiles read zero-padded copies of the lines' ends. Weights are packed once per session
// (or found packed in the model) as [OC/L][taps][L], L the vector's lanes. Bias and FusedConv's
// steps are applied in registers, or, where one needs an exponential (Sigmoid, SiLU, Tanh), right
// after each row's pixels on the vector primitives (fused_steps.h). Each output element is summed
// by one thread in one order, so results do not depend on the thread count.
#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/cpu_libraries.h"
#include "backends/cpu/fused_steps.h"
#include "backends/cpu/kernels/channel_vectors.h"
#include "backends/cpu/kernels/conv_reg_steps.h"
#include "backends/cpu/kernels/conv_vec_ops.h"
#include "backends/cpu/transpose_f32.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "core/weight_memory.h"
#include "ops/common/window.h"
#include "ops/fused_conv.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace tern {
namespace {

constexpr int64_t kMaxChannels = 4;   // input channels: an image's, a clip's or a waveform's
constexpr int64_t kMaxLines = 256;    // input channels x kernel depth x kernel height
constexpr int64_t kItemPixels = 240;  // output pixels of one row per work item
constexpr int64_t kMaxVectors = 4;    // vectors of output channels per tile
constexpr int kMaxTile = 24;          // pixels per tile
constexpr int64_t kEdgeRun = 8;       // pixels per zero-padded copy of the lines' ends
constexpr int64_t kMaxSpan = 4096;    // floats of a line such a copy holds
constexpr int64_t kStage = 48;        // pixels per staging of a plain output

// One tile's inputs and where its outputs go.
struct StripArgs {
  const float* const* lines;  // the row's input lines inside the input (at column 0)
  const int64_t* taps;        // each line's first tap (kernel column 0) in the weights' order
  int nlines;
  int64_t x0;            // the input column of pixel 0's kernel column 0
  int64_t sw, dw, kw;    // stride, dilation and kernel width
  const float* w;        // packed weights at the tile's first vector
  int64_t wstride;       // floats from one vector's weights to the next (taps x lanes)
  const float* bias;     // padded with zeros, at the tile's first vector
  const RegStep* steps;  // FusedConv's steps applied in registers
  int nsteps;
  // Where vector j of pixel p goes: out[j] + p * step, all lanes, or the first `lanes` lanes of
  // the last vector (channels-last); with 8-channel blocks and 16 lanes (halves) the lower half
  // there, the upper one at out_hi[j] + p * step (null: past the padded channels).
  float* out[kMaxVectors];
  float* out_hi[kMaxVectors];
  int64_t step;
  int lanes;
  bool halves;
};

using TileFn = void (*)(const StripArgs&);
struct Tiles {
  // Tiles of W pixels x J vectors, [J - 1][W - 1] (null past the widest), and the widest at
  // strides 1 and 2 (its pixels' offsets constants), [J - 1][stride - 1].
  std::array<std::array<TileFn, kMaxTile>, kMaxVectors> tile;
  std::array<std::array<TileFn, 2>, kMaxVectors> wide;
  int lanes;
  std::array<int, kMaxVectors> max_tile;  // the widest tile of J vectors
  int64_t group;                          // vectors per tile, at most: FMA-bound tiles
};

#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx2,fma"))), apply_to = function)
#endif
namespace avx512 {
struct V : conv_vec::Avx512 {
  // 24 accumulators at most, of 32 registers (the broadcasts are the FMAs' memory operands;
  // kMaxTile is the widest).
  static constexpr int max_tile(int j) { return j == 1 ? 24 : j == 2 ? 12 : j == 3 ? 8 : 6; }
  static constexpr int64_t group = kMaxVectors;
  // The halves into two 8-channel blocks (masked lanes neither read nor fault).
  static void store_lo(float* p, T v) { _mm512_mask_storeu_ps(p, 0x00FF, v); }
  static void store_hi(float* p, T v) { _mm512_mask_storeu_ps(p - 8, 0xFF00, v); }
};
#include "backends/cpu/kernels/conv_stem_strip.inc"
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
  // At most 12 accumulators, the J weight vectors and a broadcast in 16 registers; tiles of at
  // most 2 vectors (3 and 4 would fit only 3 and 2 pixels: a weight load for every 2 or 3 FMAs).
  static constexpr int max_tile(int j) { return j == 1 ? 12 : 6; }
  static constexpr int64_t group = 2;
};
#include "backends/cpu/kernels/conv_stem_strip.inc"

}  // namespace avx2
#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options

class StemConv final : public Kernel {
 public:
  const char* name() const override { return name_; }
  size_t packed_bytes() const override { return own_copy_ ? blob_.data.byte_size() : 0; }
  size_t workspace_bytes() const override {
    return static_cast<size_t>(slots_ * slot_floats()) * sizeof(float);
  }
  std::vector<PackedWeight> packed_weights() const override { return {PackedWeight{1, blob_}}; }

  static Expected<std::unique_ptr<Kernel>> create(const OpContext& ctx) {
    const CpuIsa isa = effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability));
    if (isa != CpuIsa::kAvx512 && isa != CpuIsa::kAvx2) {
      return unsupported("conv_stem: the CPU (or cpu.max_capability) lacks AVX2");
    }
    if (ctx.flag(FlagId::kCpuConvAllowBf16) && onednn_native_bf16()) {
      return unsupported("conv_stem: cpu.conv.allow_bf16 is on, oneDNN's bf16 kernel runs it");
    }
    TERN_ASSIGN_OR_RETURN(ops::FusedConvParams fp, ops::parse_conv_or_fused(ctx));
    const ops::ConvParams& p = fp.conv;
    if (p.x.size() < 3 || p.x.size() > 5 || p.group != 1 || p.x[1] > kMaxChannels) {
      return unsupported("conv_stem: not a 1-D to 3-D convolution of one group over at most ",
                         kMaxChannels, " channels");
    }
    if (fp.has_sum) return unsupported("conv_stem: a residual");
    if (ctx.inputs[0].block != 0) return unsupported("conv_stem: input not plain");
    const int64_t oc = p.y[1];
    const int block = ctx.outputs[0].block;
    if (block != 0 && block != oc && block != 8 && block != 16) {
      return unsupported("conv_stem: output blocked by ", block);
    }
    const ops::Window w3 = ops::as_3d(p.win);
    if (p.x[1] * w3.kernel[0] * w3.kernel[1] > kMaxLines) {
      return unsupported("conv_stem: over ", kMaxLines, " input lines a pixel");
    }
    const Tensor* w = ctx.inputs[1].value;
    const Tensor* b = p.has_bias ? ctx.inputs[2].value : nullptr;
    if (!w || (p.has_bias && !b)) return unsupported("conv_stem: weights or bias not constant");
    auto k = std::make_unique<StemConv>();
    k->tiles_ = isa == CpuIsa::kAvx512 ? &avx512::kTiles : &avx2::kTiles;
    k->vec_ = &vec_ops(isa);
    k->name_ = isa == CpuIsa::kAvx512 ? "conv_stem.avx512" : "conv_stem.avx2";
    k->win_ = w3;
    k->n_ = p.x[0];
    k->ic_ = p.x[1];
    k->oc_ = oc;
    k->taps_ = p.x[1] * w3.kernel[0] * w3.kernel[1] * w3.kernel[2];
    k->pixels_ = w3.out[0] * w3.out[1] * w3.out[2];
    k->block_ = block == oc ? -1 : block;  // (plain: 0)
    const int64_t lanes = k->tiles_->lanes;
    k->vectors_ = (oc + lanes - 1) / lanes;
    // The pixels whose window lies within the input row: [lo_, hi_).
    const int64_t sw = w3.strides[2], pw = w3.pads_begin[2];
    const int64_t last = w3.in[2] - 1 + pw - (w3.kernel[2] - 1) * w3.dilations[2];
    k->lo_ = (pw + sw - 1) / sw;
    k->hi_ = last < 0 ? 0 : std::min(w3.out[2], last / sw + 1);
    k->lines_ = p.x[1] * w3.kernel[0] * w3.kernel[1];
    k->span_ = (kEdgeRun - 1) * sw + (w3.kernel[2] - 1) * w3.dilations[2] + 1;
    if (k->span_ > kMaxSpan) return unsupported("conv_stem: a window over ", kMaxSpan, " wide");
    k->slots_ = std::max<int64_t>(1, ctx.flag(FlagId::kNumThreads));
    k->image_floats_ = oc * k->pixels_;
    if (k->block_ > 0) k->image_floats_ = (oc + block - 1) / block * block * k->pixels_;
    for (int64_t v = 0; v < k->vectors_; ++v) {
      const int64_t c = v * lanes;  // the vector's first channel
      if (k->block_ <= 0) {         // channels-last, or plain through the slot's staging rows
        k->out_at_.push_back(c);
        k->out_hi_.push_back(-1);
        continue;
      }
      k->out_at_.push_back(c / block * k->pixels_ * block + c % block);
      const bool hi = block < lanes && c / block + 1 < (oc + block - 1) / block;
      k->out_hi_.push_back(hi ? k->out_at_.back() + k->pixels_ * block : -1);
    }
    k->bias_.assign(static_cast<size_t>(k->vectors_ * lanes), 0.0f);
    if (b) std::copy_n(b->data<float>(), oc, k->bias_.begin());
    // The steps go into the registers unless one needs an exponential: then all of them run
    // after each row, on the vector primitives.
    k->reg_steps_ = reg_steps_of(fp.epilogue);
    if (k->reg_steps_.size() != fp.epilogue.size()) k->steps_ = fp.epilogue;
    TERN_RETURN_IF_ERROR(k->pack(ctx.inputs[1], *w, ctx.weights));
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Status run(const KernelArgs& a, const ExecContext& exec) const override {
    const ops::Window& w = win_;
    const int64_t rows = n_ * w.out[0] * w.out[1], ow = w.out[2];
    if (rows == 0 || ow == 0 || oc_ == 0) return Status::ok();
    const int64_t chunks = (ow + kItemPixels - 1) / kItemPixels;
    const float* x = a.inputs[0]->data<float>();
    float* y = a.outputs[0]->data<float>();
    float* workspace = static_cast<float*>(a.workspace);
    const int threads = static_cast<int>(std::min<int64_t>(exec.num_threads, slots_));
    parallel_for_slots(rows * chunks, 1, threads, [&](int slot, int64_t begin, int64_t end) {
      const float* lines[kMaxLines];
      const float* padded[kMaxLines];
      int64_t taps[kMaxLines];
      float* copies = workspace + slot * slot_floats();
      float* stage = copies + lines_ * span_;
      for (int64_t item = begin; item < end; ++item) {
        const int64_t row = item / chunks, o0 = item % chunks * kItemPixels;
        const int64_t o1 = std::min(ow, o0 + kItemPixels);
        const int64_t img = row / (w.out[0] * w.out[1]);
        const int64_t od = row / w.out[1] % w.out[0], oh = row % w.out[1];
        const int nlines = row_lines(x, img, od, oh, lines, taps);
        float* image = y + img * image_floats_;
        const int64_t pix_row = (od * w.out[1] + oh) * ow;  // the row's first pixel in the image
        // Runs of pixels whose windows lie inside the row, and of at most kEdgeRun pixels whose
        // windows cross its ends, on zero-padded copies of the lines' parts they read.
        for (int64_t o = o0; o < o1;) {
          const bool inside = o >= lo_ && o < hi_;
          int64_t e = inside ? std::min(o1, hi_) : o + 1;
          if (!inside) {
            while (e < o1 && e - o < kEdgeRun && (e < lo_ || e >= hi_)) ++e;
          }
          int64_t x0 = o * w.strides[2] - w.pads_begin[2];
          const float* const* use = lines;
          if (!inside) {
            pad_lines(lines, nlines, x0, e - o, copies, padded);
            use = padded;
            x0 = 0;
          }
          if (block_ != 0) {
            run_pixels(use, taps, nlines, x0, image, pix_row + o, e - o);
          } else {
            // Plain: channels-last rows of up to kStage pixels in the slot, then transposed.
            for (int64_t q = 0; q < e - o; q += kStage) {
              const int64_t n = std::min(kStage, e - o - q);
              run_pixels(use, taps, nlines, x0 + q * w.strides[2], stage, 0, n);
              transpose_f32(stage, vectors_ * tiles_->lanes, n, oc_, image + pix_row + o + q,
                            pixels_);
            }
          }
          o = e;
        }
        finish(image, pix_row + o0, o1 - o0);
      }
    });
    return Status::ok();
  }

 private:
  // A slot: the zero-padded line copies, then (plain output) the staging rows.
  int64_t slot_floats() const {
    return lines_ * span_ + (block_ == 0 ? kStage * vectors_ * tiles_->lanes : 0);
  }

  // The input lines (channel, kernel depth, kernel height) that output row (img, od, oh) reads
  // inside the input, and the first tap of each in the weights' order.
  int row_lines(const float* x, int64_t img, int64_t od, int64_t oh, const float** lines,
                int64_t* taps) const {
    const ops::Window& w = win_;
    const int64_t id = w.in[0], ih = w.in[1], iw = w.in[2];
    const float* image = x + img * ic_ * id * ih * iw;
    int n = 0;
    for (int64_t c = 0; c < ic_; ++c) {
      for (int64_t fd = 0; fd < w.kernel[0]; ++fd) {
        const int64_t zd = od * w.strides[0] - w.pads_begin[0] + fd * w.dilations[0];
        if (zd < 0 || zd >= id) continue;
        for (int64_t fh = 0; fh < w.kernel[1]; ++fh) {
          const int64_t zh = oh * w.strides[1] - w.pads_begin[1] + fh * w.dilations[1];
          if (zh < 0 || zh >= ih) continue;
          lines[n] = image + ((c * id + zd) * ih + zh) * iw;
          taps[n] = ((c * w.kernel[0] + fd) * w.kernel[1] + fh) * w.kernel[2];
          ++n;
        }
      }
    }
    return n;
  }

  // Pixels [pix, pix + count) of an image (at `image`), every vector of output channels, from
  // `lines`, pixel pix's first tap at column x0 of them.
  void run_pixels(const float* const* lines, const int64_t* taps, int nlines, int64_t x0,
                  float* image, int64_t pix, int64_t count) const {
    const int64_t lanes = tiles_->lanes, sw = win_.strides[2];
    StripArgs t{};
    t.lines = lines;
    t.taps = taps;
    t.nlines = nlines;
    t.sw = sw;
    t.dw = win_.dilations[2];
    t.kw = win_.kernel[2];
    t.wstride = taps_ * lanes;
    t.steps = reg_steps_.data();
    t.nsteps = static_cast<int>(reg_steps_.size());
    t.step = block_ < 0 ? oc_ : block_ == 0 ? vectors_ * lanes : block_;
    t.halves = block_ > 0 && block_ < lanes;
    for (int64_t v0 = 0; v0 < vectors_; v0 += tiles_->group) {
      const int64_t nv = std::min(tiles_->group, vectors_ - v0);
      const size_t j = static_cast<size_t>(nv - 1);
      t.w = w_ + v0 * t.wstride;
      t.bias = bias_.data() + v0 * lanes;
      // Channels-last: the last vector's lanes within the channels (blocks and the staging rows
      // are padded).
      t.lanes = block_ < 0 && v0 + nv == vectors_ ? static_cast<int>(oc_ - (vectors_ - 1) * lanes)
                                                  : static_cast<int>(lanes);
      const int64_t widest = tiles_->max_tile[j];
      for (int64_t p = 0; p < count;) {
        const int64_t width = std::min(widest, count - p);
        t.x0 = x0 + p * sw;
        for (int64_t v = 0; v < nv; ++v) {
          const int64_t at = (pix + p) * t.step;
          t.out[v] = image + out_at_[static_cast<size_t>(v0 + v)] + at;
          const int64_t hi = out_hi_[static_cast<size_t>(v0 + v)];
          t.out_hi[v] = hi < 0 ? nullptr : image + hi + at;
        }
        if (width == widest && sw <= 2) {
          tiles_->wide[j][static_cast<size_t>(sw - 1)](t);
        } else {
          tiles_->tile[j][static_cast<size_t>(width - 1)](t);
        }
        p += width;
      }
    }
  }

  // Zero-padded copies of the lines' columns that `count` pixels read, the first pixel's first
  // tap at column x0 (it, or later ones, outside the row): padded[l] holds line l's columns
  // x0 ... at 0 ...
  void pad_lines(const float* const* lines, int nlines, int64_t x0, int64_t count, float* copies,
                 const float** padded) const {
    const int64_t iw = win_.in[2];
    const int64_t span =
        (count - 1) * win_.strides[2] + (win_.kernel[2] - 1) * win_.dilations[2] + 1;
    for (int l = 0; l < nlines; ++l) {
      float* copy = copies + l * span_;
      for (int64_t i = 0; i < span; ++i) {
        const int64_t col = x0 + i;
        copy[i] = col >= 0 && col < iw ? lines[l][col] : 0.0f;
      }
      padded[l] = copy;
    }
  }

  // After a row's pixels [pix, pix + count) of an image (at `image`): FusedConv's other steps,
  // then zeros in the last block's padding channels (where a step made them non-zero, or no
  // vector reached).
  void finish(float* image, int64_t pix, int64_t count) const {
    if (block_ == 0) {
      if (steps_.empty()) return;
      for (int64_t c = 0; c < oc_; ++c) {
        apply_fused_steps(*vec_, steps_, image + c * pixels_ + pix, count);
      }
      return;
    }
    if (block_ < 0) {
      if (!steps_.empty()) apply_fused_steps(*vec_, steps_, image + pix * oc_, count * oc_);
      return;
    }
    const int64_t b = block_, blocks = (oc_ + b - 1) / b;
    if (!steps_.empty()) {
      for (int64_t k = 0; k < blocks; ++k) {
        apply_fused_steps(*vec_, steps_, image + (k * pixels_ + pix) * b, count * b);
      }
    }
    const int64_t used = oc_ - (blocks - 1) * b;  // channels of the last block
    if (used == b) return;
    float* last = image + ((blocks - 1) * pixels_ + pix) * b;
    for (int64_t i = 0; i < count; ++i) std::fill(last + i * b + used, last + (i + 1) * b, 0.0f);
  }

  // The packed weights (core/weight_memory.h's packed_copy: the model's, the session's or own):
  // [vectors][taps][lanes], output channels past OC zero.
  Status pack(const TensorInfo& info, const Tensor& w, WeightCache* cache) {
    const int64_t lanes = tiles_->lanes;
    TERN_ASSIGN_OR_RETURN(
        PackedCopy copy,
        pack_channel_vectors(info, w, oc_, taps_, lanes,
                             lanes == 16 ? "tern conv stem l16 v1" : "tern conv stem l8 v1",
                             cache));
    blob_ = std::move(copy.data);
    own_copy_ = copy.own;
    w_ = static_cast<const float*>(blob_.data.raw());
    return Status::ok();
  }

  ops::Window win_;  // as 3-D (D, H, W)
  int64_t n_ = 0, ic_ = 0, oc_ = 0, taps_ = 0, pixels_ = 0, vectors_ = 0;
  int64_t lo_ = 0, hi_ = 0;   // the pixels of a row whose window lies within the input row
  int64_t lines_ = 0;         // input lines a pixel reads at most: channels x kernel depth x height
  int64_t span_ = 0;          // columns a zero-padded copy of a line holds
  int64_t slots_ = 1;         // per-thread slots of the workspace: the session's intra-op threads
  int64_t image_floats_ = 0;  // one image of the output, padding channels included
  // Each vector's first channel in an image of the output at its pixel 0, and with 16 lanes and
  // 8-channel blocks its upper half's (-1: past the padded channels).
  std::vector<int64_t> out_at_, out_hi_;
  int block_ = -1;  // the output's channel block: 8 or 16, -1 channels-last
  bool own_copy_ = false;
  std::vector<RegStep> reg_steps_;     // applied in the tiles' registers
  std::vector<float> bias_;            // padded with zeros to whole vectors
  std::vector<ops::FusedStep> steps_;  // else applied after each row's pixels
  const Tiles* tiles_ = nullptr;
  const VecOps* vec_ = nullptr;
  const char* name_ = "conv_stem";
  const float* w_ = nullptr;
  PackedData blob_;
};

}  // namespace

TERN_REGISTRATION void register_cpu_conv_stem(KernelRegistry& r) {
  // Ahead of oneDNN (priority 0), which takes whatever this declines.
  r.add("Conv", "cpu", DType::kFloat32, StemConv::create, 10);
  r.add("FusedConv", "cpu", DType::kFloat32, StemConv::create, 10);
}

}  // namespace tern

#else  // not x86-64: nothing to register

namespace tern {
void register_cpu_conv_stem(KernelRegistry&) {}
}  // namespace tern

#endif
