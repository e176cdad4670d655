// Pointwise convolution (1x1 kernel, stride 1, no padding, one group) on channels-last activations
// (NHWC, what the planner gives dense networks on AVX-512) as one matrix product on Tern's panel
// GEMM (panel_gemm.h): the pixels are A's rows, the input channels its columns, and the weights,
// IC x OC, are packed once per session. A plain input (NCHW) is transposed into A first. Bias, a
// residual and Relu are applied in the tile's registers; FusedConv's other epilogue steps right
// after each tile, while it is in cache.
//
// oneDNN's brgemm kernel split these shapes poorly across threads (ResNet-50's 256 -> 64 at 32x32:
// 0.18 ms at one thread and at two); the panel GEMM splits rows and panels evenly (the same
// product as a MatMul: 0.14 ms, 0.08 at two threads). Each output element is summed by one thread
// in one order, so results do not depend on the thread count.
#include <algorithm>
#include <string>

#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/cpu_libraries.h"
#include "backends/cpu/fused_steps.h"
#include "backends/cpu/panel_gemm.h"
#include "backends/cpu/transpose_f32.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "core/weight_memory.h"
#include "ops/fused_conv.h"

#if defined(__x86_64__)

namespace tern {
namespace {

constexpr int64_t kRowBlock = 48;  // pixels per work item: a multiple of panel::kTileRows
const char* const kPackedKey = "tern conv1x1 nhwc p16 v1";

class ChannelsLastPointwiseConv final : public Kernel {
 public:
  const char* name() const override { return name_; }
  size_t packed_bytes() const override { return own_copy_ ? blob_.data.byte_size() : 0; }
  std::vector<PackedWeight> packed_weights() const override { return {PackedWeight{1, blob_}}; }
  size_t workspace_bytes() const override {
    return plain_in_ ? static_cast<size_t>(rows_ * ic_) * sizeof(float) : 0;
  }

  static Expected<std::unique_ptr<Kernel>> create(const OpContext& ctx) {
    const CpuIsa isa = effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability));
    if (isa != CpuIsa::kAvx512 && isa != CpuIsa::kAvx2) {
      return unsupported("conv1x1_nhwc: the CPU (or cpu.max_capability) lacks AVX2");
    }
    if (ctx.flag(FlagId::kCpuConvAllowBf16) && onednn_native_bf16()) {
      return unsupported("conv1x1_nhwc: cpu.conv.allow_bf16 is on, oneDNN's bf16 kernel runs it");
    }
    TERN_ASSIGN_OR_RETURN(ops::FusedConvParams fp, ops::parse_conv_or_fused(ctx));
    const ops::ConvParams& p = fp.conv;
    if (p.x.size() != 4 || p.group != 1 || p.w[2] != 1 || p.w[3] != 1) {
      return unsupported("conv1x1_nhwc: not a 2-D pointwise convolution of one group");
    }
    for (size_t d = 0; d < 2; ++d) {
      if (p.win.strides[d] != 1 || p.win.pads_begin[d] != 0 || p.win.pads_end[d] != 0) {
        return unsupported("conv1x1_nhwc: strided or padded");
      }
    }
    // Channels-last: one block of all the channels. Plain activations of one pixel per image
    // (squeeze-and-excitation's convolutions after a global pooling) are laid out alike: taken
    // here, they need no oneDNN primitive, whose plain kernel is a GEMM that would be swapped
    // for its blocked one between reorders.
    const bool one_pixel = p.x[2] * p.x[3] == 1;
    const auto last = [&](const TensorInfo& t) {
      return (t.block > 0 && t.block == t.shape[1]) || (t.block == 0 && one_pixel);
    };
    // A plain input (after an op of plain data: ShuffleNetV2's channel shuffle) is transposed into
    // the workspace (what oneDNN's reorder did, with a primitive made for the shape).
    const bool plain_in = ctx.inputs[0].block == 0 && !one_pixel;
    if ((!last(ctx.inputs[0]) && !plain_in) || !last(ctx.outputs[0]) ||
        (fp.has_sum && !last(ctx.inputs[3]))) {
      return unsupported("conv1x1_nhwc: output (or residual) not channels-last");
    }
    const Tensor* w = ctx.inputs[1].value;
    if (!w) return unsupported("conv1x1_nhwc: weights not constant");
    // At one thread on AVX2 oneDNN's kernel adds a residual faster (ResNet-50 at one thread:
    // 23.3 against 23.9 ms a run); on AVX-512, and from two threads on, this kernel is as fast
    // or faster with one too (ResNet-50's residual 1x1 convolutions at one thread: 8.57 against
    // 8.75 ms a run). The same kernel at every thread count also keeps one packed layout: an
    // optimized .tern file made at two threads loads at one without packing again (ResNet-50's
    // session: 4.5 instead of 19 ms).
    if (fp.has_sum && isa == CpuIsa::kAvx2 && ctx.flag(FlagId::kNumThreads) <= 1) {
      return unsupported("conv1x1_nhwc: a residual at one thread on AVX2 (oneDNN's is faster)");
    }
    auto k = std::make_unique<ChannelsLastPointwiseConv>();
    k->isa_ = isa;
    k->name_ = isa == CpuIsa::kAvx512 ? "conv1x1_nhwc.avx512" : "conv1x1_nhwc.avx2";
    k->rows_ = p.x[0] * p.x[2] * p.x[3];
    k->pixels_ = p.x[2] * p.x[3];
    k->plain_in_ = plain_in;
    k->ic_ = p.x[1];
    k->oc_ = p.y[1];
    k->has_bias_ = p.has_bias;
    k->has_sum_ = fp.has_sum;
    k->relu_in_tile_ = fp.epilogue.size() == 1 && fp.epilogue[0].act == ops::FusedAct::kRelu;
    if (!k->relu_in_tile_) k->steps_ = fp.epilogue;
    TERN_RETURN_IF_ERROR(k->pack(ctx.inputs[1], *w, ctx.weights));
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Status run(const KernelArgs& a, const ExecContext& exec) const override {
    if (rows_ == 0 || oc_ == 0) return Status::ok();
    const float* x = a.inputs[0]->data<float>();
    const float* bias = has_bias_ ? a.inputs[2]->data<float>() : nullptr;
    const float* z = has_sum_ ? a.inputs[3]->data<float>() : nullptr;
    float* y = a.outputs[0]->data<float>();
    const int64_t panels = (oc_ + panel::kPanel - 1) / panel::kPanel;
    const int64_t group = panel::panels_per_tile(isa_);
    const int64_t groups = (panels + group - 1) / group;
    const int64_t blocks = (rows_ + kRowBlock - 1) / kRowBlock;
    const panel::Epilogue e{bias, 1.0f, relu_in_tile_, z, oc_};
    if (plain_in_) {
      // The plain input transposed into the workspace first (pixels x channels), in parallel.
      float* rows = static_cast<float*>(a.workspace);
      const int64_t images = rows_ / pixels_;
      const int64_t chunks = (pixels_ + kRowBlock - 1) / kRowBlock;
      parallel_for(images * chunks, 1, exec.num_threads, [&](int64_t begin, int64_t end) {
        for (int64_t item = begin; item < end; ++item) {
          const int64_t img = item / chunks, p0 = item % chunks * kRowBlock;
          const int64_t count = std::min(kRowBlock, pixels_ - p0);
          transpose_f32(x + img * ic_ * pixels_ + p0, pixels_, ic_, count,
                        rows + (img * pixels_ + p0) * ic_, ic_);
        }
      });
      x = rows;
    }
    // Consecutive work items share A's rows or B's panels, whichever moves fewer bytes.
    const bool rows_outer = blocks * ic_ * oc_ <= groups * rows_ * ic_;
    parallel_for(blocks * groups, 1, exec.num_threads, [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end; ++task) {
        const int64_t blk = rows_outer ? task / groups : task % blocks;
        const int64_t grp = rows_outer ? task % groups : task / blocks;
        const int64_t p0 = grp * group, p1 = std::min(panels, p0 + group);
        const int64_t r0 = blk * kRowBlock, r1 = std::min(rows_, r0 + kRowBlock);
        panel::multiply(isa_, x, ic_, w_, ic_, oc_, y, oc_, e, r0, r1, p0, p1);
        if (steps_.empty()) continue;
        const int64_t c0 = p0 * panel::kPanel, c1 = std::min(oc_, p1 * panel::kPanel);
        for (int64_t r = r0; r < r1; ++r)
          apply_fused_steps(vec_ops(isa_), steps_, y + r * oc_ + c0, c1 - c0);
      }
    });
    return Status::ok();
  }

 private:
  // The packed weights (core/weight_memory.h's packed_copy: the model's, the session's or own).
  Status pack(const TensorInfo& info, const Tensor& w, WeightCache* cache) {
    const size_t bytes = static_cast<size_t>(panel::packed_floats(ic_, oc_)) * sizeof(float);
    auto make = [&]() {
      // B (k, n) = W[n][k]: input channel k of output channel n.
      return packed_blob(bytes / sizeof(float), kPackedKey,
                         [&](float* out) { panel::pack(w.data<float>(), ic_, oc_, 1, ic_, out); });
    };
    TERN_ASSIGN_OR_RETURN(PackedCopy copy, packed_copy(info, kPackedKey, bytes, cache, make));
    blob_ = std::move(copy.data);
    own_copy_ = copy.own;
    w_ = static_cast<const float*>(blob_.data.raw());
    return Status::ok();
  }

  int64_t rows_ = 0, pixels_ = 0, ic_ = 0, oc_ = 0;
  bool has_bias_ = false, has_sum_ = false, relu_in_tile_ = false;
  bool plain_in_ = false;              // a plain input, transposed into the workspace
  bool own_copy_ = false;              // packed by this kernel, not shared through the session
  std::vector<ops::FusedStep> steps_;  // applied after each tile
  CpuIsa isa_ = CpuIsa::kAvx512;
  const char* name_ = "conv1x1_nhwc";
  const float* w_ = nullptr;
  PackedData blob_;
};

}  // namespace

TERN_REGISTRATION void register_cpu_conv1x1_nhwc(KernelRegistry& r) {
  // Ahead of oneDNN (priority 0), which takes whatever this declines.
  r.add("Conv", "cpu", DType::kFloat32, ChannelsLastPointwiseConv::create, 10);
  r.add("FusedConv", "cpu", DType::kFloat32, ChannelsLastPointwiseConv::create, 10);
}

}  // namespace tern

#else  // not x86-64: nothing to register

namespace tern {
void register_cpu_conv1x1_nhwc(KernelRegistry&) {}
}  // namespace tern

#endif
