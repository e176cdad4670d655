// 1-D convolution (Conv and FusedConv over plain [N, C, W], one group, constant weights) as one
// matrix product per image on Tern's panel GEMM (panel_gemm.h): Y (M x OW) = W (M x C*K) cols,
// where W is the weights as the model stores them ([M][C][K], read in place) and cols (C*K x OW)
// the image's im2col, packed each run straight into the panel layout (a row per input channel and
// tap: the channel's row at the tap's offset, zero where it reads padding; OW in panels of 16),
// one tile's panels at a time into a slot of the workspace per thread.
//
// It runs the dilated ones, and pointwise ones of any rank on plain activations in and out (a
// 1-D convolution over the pixels in a row): oneDNN reordered those to its layout and back, and
// generated code for each shape. For the dilated ones: past a few taps (a WaveNet / TCN stack's
// 8 ... 64) oneDNN's direct kernel declines them and its brgemm kernel generates its code per
// shape when the session is created, 2-3.5 ms for each of TCN's 64 -> 128 convolutions (16 of
// its 17 ms session, against 23 ms for ONNX Runtime's whole load); this kernel generates nothing
// and runs them as fast (91 against 90-95 us at one thread; at dilations 2 and 4, where the
// direct kernel takes them, 91 against 82-84). Undilated 1-D ones with wider kernels stay with
// oneDNN's direct kernel, ~10% faster. At stride 2 the columns are packed with AVX2
// deinterleaves (stride_copy_f32.h), at stride 3 or more one by one.
// Bias and FusedConv's epilogue are applied to each tile's rows right after it, a residual and
// Relu (without bias) in the tile's registers. Each output element is summed by one thread in one
// order: results do not depend on the thread count.
#include <algorithm>
#include <cstring>
#include <string>

#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/cpu_libraries.h"
#include "backends/cpu/fused_steps.h"
#include "backends/cpu/panel_gemm.h"
#include "backends/cpu/stride_copy_f32.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "ops/fused_conv.h"

#if defined(__x86_64__)

namespace tern {
namespace {

// A pointwise convolution (kernel 1, stride 1, no padding, any rank) over at least a panel's
// pixels per image is a 1-D one over the pixels in a row: `p` becomes that and true is returned.
// (Fewer pixels, squeeze-and-excitation's one: conv1x1_nhwc takes them.)
bool pointwise_row(ops::ConvParams* p) {
  int64_t pixels = 1;
  for (size_t d = 2; d < p->x.size(); ++d) {
    if (p->w[d] != 1 || p->win.strides[d - 2] != 1 || p->win.pads_begin[d - 2] != 0 ||
        p->win.pads_end[d - 2] != 0) {
      return false;
    }
    pixels *= p->x[d];
  }
  if (p->x.size() < 3 || pixels < panel::kPanel) return false;
  p->x = {p->x[0], p->x[1], pixels};
  p->w = {p->w[0], p->w[1], 1};
  p->y = {p->y[0], p->y[1], pixels};
  ops::Window& w = p->win;
  w.spatial = 1;
  w.in = w.out = {pixels};
  w.kernel = w.strides = w.dilations = {1};
  w.pads_begin = w.pads_end = {0};
  return true;
}

class PanelConv1d final : public Kernel {
 public:
  const char* name() const override { return name_; }
  size_t workspace_bytes() const override {
    return static_cast<size_t>(slots_ * slot_floats()) * sizeof(float);
  }

  static Expected<std::unique_ptr<Kernel>> create(const OpContext& ctx) {
    const CpuIsa isa = effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability));
    if (isa != CpuIsa::kAvx512 && isa != CpuIsa::kAvx2) {
      return unsupported("conv1d_panel: the CPU (or cpu.max_capability) lacks AVX2");
    }
    if (ctx.flag(FlagId::kCpuConvAllowBf16) && onednn_native_bf16()) {
      return unsupported("conv1d_panel: cpu.conv.allow_bf16 is on, oneDNN's bf16 kernel runs it");
    }
    TERN_ASSIGN_OR_RETURN(ops::FusedConvParams fp, ops::parse_conv_or_fused(ctx));
    ops::ConvParams& p = fp.conv;
    const bool dilated = p.x.size() == 3 && p.win.dilations[0] >= 2;
    const bool pointwise = pointwise_row(&p);
    if (p.group != 1 || !(dilated || pointwise)) {
      return unsupported(
          "conv1d_panel: neither a dilated 1-D convolution nor a pointwise one, of one group");
    }
    const auto plain = [](const TensorInfo& t) { return t.block == 0; };
    if (!plain(ctx.inputs[0]) || !plain(ctx.outputs[0]) || (fp.has_sum && !plain(ctx.inputs[3]))) {
      return unsupported("conv1d_panel: activations not plain");
    }
    const Tensor* w = ctx.inputs[1].value;
    const Tensor* b = p.has_bias ? ctx.inputs[2].value : nullptr;
    if (!w || (p.has_bias && !b)) return unsupported("conv1d_panel: weights or bias not constant");
    auto k = std::make_unique<PanelConv1d>();
    k->isa_ = isa;
    k->name_ = isa == CpuIsa::kAvx512 ? "conv1d_panel.avx512" : "conv1d_panel.avx2";
    k->p_ = p;
    k->w_ = *w;
    if (b) k->b_ = *b;
    k->ck_ = p.w[1] * p.w[2];
    k->ow_ = p.y[2];
    k->slots_ = std::max<int64_t>(1, ctx.flag(FlagId::kNumThreads));
    k->has_sum_ = fp.has_sum;
    // Relu goes into the tile where nothing comes between it and the product.
    k->relu_in_tile_ =
        !p.has_bias && fp.epilogue.size() == 1 && fp.epilogue[0].act == ops::FusedAct::kRelu;
    if (!k->relu_in_tile_) k->steps_ = fp.epilogue;
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Status run(const KernelArgs& a, const ExecContext& exec) const override {
    const int64_t n = p_.x[0], c = p_.x[1], iw = p_.x[2], m = p_.y[1];
    if (n == 0 || m == 0 || ow_ == 0) return Status::ok();
    float* cols = static_cast<float*>(a.workspace);
    const float* w = w_.data<float>();
    const float* bias = p_.has_bias ? b_.data<float>() : nullptr;
    const int64_t panels = (ow_ + panel::kPanel - 1) / panel::kPanel;
    const int64_t group = panel::panels_per_tile(isa_);
    const int64_t groups = (panels + group - 1) / group;
    const int threads = static_cast<int>(std::min<int64_t>(exec.num_threads, slots_));
    for (int64_t img = 0; img < n; ++img) {
      const float* x = a.inputs[0]->data<float>() + img * c * iw;
      float* y = a.outputs[0]->data<float>() + img * m * ow_;
      const float* z = has_sum_ ? a.inputs[3]->data<float>() + img * m * ow_ : nullptr;
      // A task packs one tile's panels into its thread's slot and multiplies every row by them:
      // one parallel region per image.
      parallel_for_slots(groups, 1, threads, [&](int slot, int64_t begin, int64_t end) {
        float* mine = cols + slot * slot_floats();
        for (int64_t g = begin; g < end; ++g) {
          const int64_t q0 = g * group, q1 = std::min(panels, q0 + group);
          const int64_t c0 = q0 * panel::kPanel, c1 = std::min(ow_, q1 * panel::kPanel);
          pack_cols(x, mine, q0, q1);
          // Columns c0.. of Y (and Z) as a product of their own, over the slot's panels.
          const panel::Epilogue e{nullptr, 1.0f, relu_in_tile_, z ? z + c0 : nullptr, ow_};
          panel::multiply(isa_, w, ck_, mine, ck_, ow_ - c0, y + c0, ow_, e, 0, m, 0, q1 - q0);
          if (!bias && steps_.empty()) continue;
          for (int64_t r = 0; r < m; ++r) {
            float* row = y + r * ow_ + c0;
            if (bias) {
              for (int64_t i = 0; i < c1 - c0; ++i) row[i] += bias[r];
            }
            if (!steps_.empty()) apply_fused_steps(vec_ops(isa_), steps_, row, c1 - c0);
          }
        }
      });
    }
    return Status::ok();
  }

 private:
  // One tile's panels: panels [p0, p1) of the image's im2col, panel p0 at `cols`; row (ci, tap) of
  // panel q holds the input at (16 q + j) * stride - pad + tap * dilation for j < 16, zero outside
  // the row (and past OW).
  int64_t slot_floats() const { return panel::panels_per_tile(isa_) * ck_ * panel::kPanel; }
  void pack_cols(const float* x, float* cols, int64_t p0, int64_t p1) const {
    const int64_t iw = p_.x[2], taps = p_.w[2];
    const int64_t stride = p_.win.strides[0], dil = p_.win.dilations[0];
    const int64_t pad = p_.win.pads_begin[0];
    for (int64_t q = p0; q < p1; ++q) {
      float* out = cols + (q - p0) * ck_ * panel::kPanel;
      const int64_t o0 = q * panel::kPanel;
      const int64_t cnt = std::min(panel::kPanel, ow_ - o0);
      for (int64_t r = 0; r < ck_; ++r) {
        const float* row = x + (r / taps) * iw;
        const int64_t first = o0 * stride - pad + (r % taps) * dil;  // input index of column 0
        float* dst = out + r * panel::kPanel;
        if (stride == 1 && first >= 0 && first + cnt <= iw) {
          std::memcpy(dst, row + first, static_cast<size_t>(cnt) * sizeof(float));
        } else if (stride == 2 && first >= 0 && first + 2 * (cnt - 1) < iw) {
          copy_stride2_f32(row + first, iw - first, cnt, dst);
        } else {
          for (int64_t j = 0; j < cnt; ++j) {
            const int64_t i = first + j * stride;
            dst[j] = i >= 0 && i < iw ? row[i] : 0.0f;
          }
        }
        for (int64_t j = cnt; j < panel::kPanel; ++j) dst[j] = 0.0f;
      }
    }
  }

  ops::ConvParams p_;
  Tensor w_, b_;  // the model's weights and bias, shared, read in place
  int64_t ck_ = 0, ow_ = 0;
  int64_t slots_ = 1;  // per-thread slots of the workspace: the session's intra-op threads
  bool has_sum_ = false, relu_in_tile_ = false;
  std::vector<ops::FusedStep> steps_;  // applied to each tile's rows after it
  CpuIsa isa_ = CpuIsa::kAvx512;
  const char* name_ = "conv1d_panel";
};

}  // namespace

TERN_REGISTRATION void register_cpu_conv1d_panel(KernelRegistry& r) {
  // Ahead of oneDNN (priority 0), which takes whatever this declines.
  r.add("Conv", "cpu", DType::kFloat32, PanelConv1d::create, 10);
  r.add("FusedConv", "cpu", DType::kFloat32, PanelConv1d::create, 10);
}

}  // namespace tern

#else  // not x86-64: nothing to register

namespace tern {
void register_cpu_conv1d_panel(KernelRegistry&) {}
}  // namespace tern

#endif
