// Convolutions with few output pixels and many weights on channels-last activations (NHWC), with
// AVX-512: the last stage of ResNets, 3x3 over 512 channels on a 4x4 map. There every weight is
// used by 16 pixels only, so the time goes into streaming the weights (9.4 MB for 512 -> 512),
// and oneDNN's brgemm kernel ran at ~100 GFLOP/s, 1.2-1.5x ONNX Runtime's time (ResNet-50's
// layer4 3x3s at one thread: 757 against 503-651 us).
//
// Each image's patches are gathered once per run into the workspace as Aᵀ, (tap, input channel)
// x pixel, so the FMAs' broadcasts of one k come from one cache line; the weights, packed once per
// session in the panel GEMM's layout ([OC/16][K][16], panel_gemm.h, K = taps x input channels),
// stream through exactly once: a task keeps all (at most 16) pixels x 16 output channels in
// registers across all of K. Bias, a residual and Relu are
// applied in registers, FusedConv's other epilogue steps right after the tile. Each output is
// summed by one thread in one order, so results do not depend on the thread count.
#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/cpu_libraries.h"
#include "backends/cpu/fused_steps.h"
#include "backends/cpu/panel_gemm.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "core/weight_memory.h"
#include "ops/fused_conv.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace tern {
namespace {

// At most this many output pixels per image, one accumulator each (ResNets' 4x4 maps): at 49
// (ResNet-18's 7x7) each weight is reused often enough for oneDNN's kernel to be the faster.
constexpr int64_t kMaxPixels = 16;
// At least this many weights: below, the product fits in cache and oneDNN's kernel is as fast.
constexpr int64_t kMinWeights = 1 << 20;
const char* const kPackedKey = "tern conv small nhwc p16 v1";

#define TERN_AVX512 __attribute__((target("avx512f,fma")))

struct TileArgs {
  const float* at;    // Aᵀ at k 0: k's pixels are `lda` floats apart
  int64_t lda;        // pixels of the image (Aᵀ's row length)
  const float* w;     // the panel's packed weights, K x 16
  int64_t k;          // K
  const float* bias;  // at the panel's first channel, or null
  const float* z;     // residual at (pixel 0, the panel's first channel), or null
  float* y;           // output at the same place
  int64_t ldy;        // output channels (row stride of y and z)
  bool relu;
};

template <int R>
TERN_AVX512 void tile(const TileArgs& t) {
  __m512 acc[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  const float* a = t.at;
  const float* w = t.w;
  for (int64_t k = 0; k < t.k; ++k, a += t.lda, w += panel::kPanel) {
    const __m512 wv = _mm512_load_ps(w);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(a[r]), wv, acc[r]);
  }
  const __m512 b = t.bias ? _mm512_loadu_ps(t.bias) : _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    __m512 v = _mm512_add_ps(acc[r], b);
    if (t.z) v = _mm512_add_ps(v, _mm512_loadu_ps(t.z + r * t.ldy));
    if (t.relu) v = _mm512_mask_max_ps(v, 0xFFFF, v, _mm512_setzero_ps());
    _mm512_storeu_ps(t.y + r * t.ldy, v);
  }
}

using TileFn = void (*)(const TileArgs&);
template <size_t... Rs>
constexpr std::array<TileFn, sizeof...(Rs)> tiles(std::index_sequence<Rs...>) {
  return {&tile<static_cast<int>(Rs) + 1>...};
}
const std::array<TileFn, kMaxPixels> kTiles = tiles(std::make_index_sequence<kMaxPixels>());

class SmallMapConv final : public Kernel {
 public:
  const char* name() const override { return "conv_small_nhwc.avx512"; }
  size_t workspace_bytes() const override {
    return static_cast<size_t>(pixels_ * k_) * sizeof(float);
  }
  size_t packed_bytes() const override { return own_copy_ ? blob_.data.byte_size() : 0; }
  std::vector<PackedWeight> packed_weights() const override { return {PackedWeight{1, blob_}}; }

  static Expected<std::unique_ptr<Kernel>> create(const OpContext& ctx) {
    if (effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability)) != CpuIsa::kAvx512) {
      return unsupported("conv_small_nhwc: the CPU (or cpu.max_capability) lacks AVX-512");
    }
    if (ctx.flag(FlagId::kCpuConvAllowBf16) && onednn_native_bf16()) {
      return unsupported(
          "conv_small_nhwc: cpu.conv.allow_bf16 is on, oneDNN's bf16 kernel runs it");
    }
    TERN_ASSIGN_OR_RETURN(ops::FusedConvParams fp, ops::parse_conv_or_fused(ctx));
    const ops::ConvParams& p = fp.conv;
    if (p.x.size() != 4 || p.group != 1) {
      return unsupported("conv_small_nhwc: not a 2-D convolution of one group");
    }
    const auto last = [](const TensorInfo& t) { return t.block > 0 && t.block == t.shape[1]; };
    if (!last(ctx.inputs[0]) || !last(ctx.outputs[0]) || (fp.has_sum && !last(ctx.inputs[3]))) {
      return unsupported("conv_small_nhwc: activations not channels-last");
    }
    const int64_t pixels = p.y[2] * p.y[3], taps = p.w[2] * p.w[3];
    bool pointwise = taps == 1;
    for (size_t d = 0; d < 2; ++d) {
      pointwise = pointwise && p.win.strides[d] == 1 && p.win.pads_begin[d] == 0;
    }
    if (pointwise) return unsupported("conv_small_nhwc: a pointwise convolution (conv1x1_nhwc's)");
    if (pixels > kMaxPixels || pixels == 0) {
      return unsupported("conv_small_nhwc: more than ", kMaxPixels, " output pixels");
    }
    if (p.y[1] % panel::kPanel != 0) {
      return unsupported("conv_small_nhwc: output channels not a multiple of 16");
    }
    if (p.w[0] * p.w[1] * taps < kMinWeights) {
      return unsupported("conv_small_nhwc: weights small enough for oneDNN's kernel");
    }
    const Tensor* w = ctx.inputs[1].value;
    if (!w || (p.has_bias && !ctx.inputs[2].value)) {
      return unsupported("conv_small_nhwc: weights or bias not constant");
    }
    auto k = std::make_unique<SmallMapConv>();
    k->p_ = p;
    k->pixels_ = pixels;
    k->taps_ = taps;
    k->k_ = p.x[1] * taps;
    k->oc_ = p.y[1];
    k->has_sum_ = fp.has_sum;
    if (p.has_bias) {
      const float* b = ctx.inputs[2].value->data<float>();
      k->bias_.assign(b, b + k->oc_);
    }
    k->relu_ = fp.epilogue.size() == 1 && fp.epilogue[0].act == ops::FusedAct::kRelu;
    if (!k->relu_) k->steps_ = fp.epilogue;
    TERN_RETURN_IF_ERROR(k->pack(ctx.inputs[1], *w, ctx.weights));
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Status run(const KernelArgs& a, const ExecContext& exec) const override {
    const float* x = a.inputs[0]->data<float>();
    const float* z = has_sum_ ? a.inputs[3]->data<float>() : nullptr;
    float* y = a.outputs[0]->data<float>();
    auto* at = static_cast<float*>(a.workspace);
    const int64_t ic = p_.x[1], ih = p_.x[2], iw = p_.x[3], ow = p_.y[3];
    const int64_t kw = p_.w[3];
    const int64_t panels = oc_ / panel::kPanel;
    for (int64_t n = 0; n < p_.x[0]; ++n) {
      const float* xn = x + n * ih * iw * ic;
      // Aᵀ[(tap, c)][pixel]: the input under each tap of each output pixel, 0 in the padding.
      parallel_for(taps_, 1, exec.num_threads, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t ky = t / kw, kx = t % kw;
          float* col = at + t * ic * pixels_;
          for (int64_t q = 0; q < pixels_; ++q) {
            const int64_t iy =
                q / ow * p_.win.strides[0] - p_.win.pads_begin[0] + ky * p_.win.dilations[0];
            const int64_t ix =
                q % ow * p_.win.strides[1] - p_.win.pads_begin[1] + kx * p_.win.dilations[1];
            if (iy < 0 || iy >= ih || ix < 0 || ix >= iw) {
              for (int64_t c = 0; c < ic; ++c) col[c * pixels_ + q] = 0.0f;
              continue;
            }
            const float* src = xn + (iy * iw + ix) * ic;
            for (int64_t c = 0; c < ic; ++c) col[c * pixels_ + q] = src[c];
          }
        }
      });
      float* yn = y + n * pixels_ * oc_;
      const float* zn = z ? z + n * pixels_ * oc_ : nullptr;
      // One task per panel of 16 output channels: all the pixels, its weights streamed once.
      parallel_for(panels, 1, exec.num_threads, [&](int64_t begin, int64_t end) {
        for (int64_t pn = begin; pn < end; ++pn) {
          const int64_t c0 = pn * panel::kPanel;
          TileArgs t;
          t.at = at;
          t.lda = pixels_;
          t.w = w_ + pn * k_ * panel::kPanel;
          t.k = k_;
          t.bias = bias_.empty() ? nullptr : bias_.data() + c0;
          t.z = zn ? zn + c0 : nullptr;
          t.y = yn + c0;
          t.ldy = oc_;
          t.relu = relu_;
          kTiles[static_cast<size_t>(pixels_ - 1)](t);
          if (steps_.empty()) continue;
          for (int64_t r = 0; r < pixels_; ++r) {
            apply_fused_steps(vec_ops(CpuIsa::kAvx512), steps_, t.y + r * oc_, panel::kPanel);
          }
        }
      });
    }
    return Status::ok();
  }

 private:
  // The packed weights (core/weight_memory.h's packed_copy: the model's, the session's or own).
  Status pack(const TensorInfo& info, const Tensor& w, WeightCache* cache) {
    const size_t bytes = static_cast<size_t>(panel::packed_floats(k_, oc_)) * sizeof(float);
    auto make = [&]() {
      return packed_blob(bytes / sizeof(float), kPackedKey, [&](float* out) {
        // B (k, n) with k = tap * IC + c: W[n][c][tap], reordered to [n][tap][c] first so that
        // k has one stride.
        const int64_t ic = k_ / taps_;
        std::vector<float> byk(static_cast<size_t>(oc_ * k_));
        const float* src = w.data<float>();
        for (int64_t n = 0; n < oc_; ++n)
          for (int64_t c = 0; c < ic; ++c)
            for (int64_t t = 0; t < taps_; ++t) {
              byk[static_cast<size_t>(n * k_ + t * ic + c)] = src[(n * ic + c) * taps_ + t];
            }
        panel::pack(byk.data(), k_, oc_, 1, k_, out);
      });
    };
    TERN_ASSIGN_OR_RETURN(PackedCopy copy, packed_copy(info, kPackedKey, bytes, cache, make));
    blob_ = std::move(copy.data);
    own_copy_ = copy.own;
    w_ = static_cast<const float*>(blob_.data.raw());
    return Status::ok();
  }

  ops::ConvParams p_;
  int64_t pixels_ = 0, taps_ = 0, k_ = 0, oc_ = 0;
  bool has_sum_ = false, relu_ = false;
  bool own_copy_ = false;              // packed by this kernel, not shared through the session
  std::vector<float> bias_;            // empty: none
  std::vector<ops::FusedStep> steps_;  // applied after each tile
  const float* w_ = nullptr;
  PackedData blob_;
};

}  // namespace

TERN_REGISTRATION void register_cpu_conv_small_nhwc(KernelRegistry& r) {
  // Ahead of oneDNN (priority 0), which takes whatever this declines.
  r.add("Conv", "cpu", DType::kFloat32, SmallMapConv::create, 10);
  r.add("FusedConv", "cpu", DType::kFloat32, SmallMapConv::create, 10);
}

}  // namespace tern

#else  // not x86-64: nothing to register

namespace tern {
void register_cpu_conv_small_nhwc(KernelRegistry&) {}
}  // namespace tern

#endif
