// Conv and FusedConv on oneDNN. Activations plain (NCHW) or channel-blocked (nChw8c/nChw16c) as
// the planner chose; a plain source with many channels is reordered to the blocked layout in the
// workspace first, since oneDNN's direct JIT kernels need it (its plain-layout fallback is an
// im2col GEMM several times slower). Weights are packed once per session and layout, and a
// layout packed for another shape is tried first, so one copy serves every image size.
// FusedConv's epilogue becomes eltwise post-ops (from a second Affine on, which oneDNN 2.6 gets
// wrong, it runs after the primitive) and its residual a sum post-op (the residual is copied into
// the destination first).
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/float_rows.h"
#include "backends/cpu/fused_steps.h"
#include "backends/cpu/onednn/onednn_common.h"
#include "backends/cpu/onednn/winograd.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "ops/common/window.h"
#include "ops/fused_conv.h"

namespace tern {
namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;
using alg = dnnl::algorithm;

void append_step(dnnl::post_ops& po, const ops::FusedStep& st) {
  const std::vector<float>& q = st.params;
  switch (st.act) {
    case ops::FusedAct::kRelu:
      po.append_eltwise(1.0f, alg::eltwise_relu, 0.0f, 0.0f);
      return;
    case ops::FusedAct::kLeakyRelu:
      po.append_eltwise(1.0f, alg::eltwise_relu, q[0], 0.0f);
      return;
    case ops::FusedAct::kClip:
      po.append_eltwise(1.0f, alg::eltwise_clip_v2, q[0], q[1]);
      return;
    case ops::FusedAct::kSigmoid:
      po.append_eltwise(1.0f, alg::eltwise_logistic, 0.0f, 0.0f);
      return;
    case ops::FusedAct::kHardSigmoid:  // clip(alpha * x + beta, 0, 1)
      po.append_eltwise(1.0f, alg::eltwise_linear, q[0], q[1]);
      po.append_eltwise(1.0f, alg::eltwise_clip_v2, 0.0f, 1.0f);
      return;
    case ops::FusedAct::kHardSwish:
      po.append_eltwise(1.0f, alg::eltwise_hardswish, 0.0f, 0.0f);
      return;
    case ops::FusedAct::kTanh:
      po.append_eltwise(1.0f, alg::eltwise_tanh, 0.0f, 0.0f);
      return;
    case ops::FusedAct::kAffine:
      po.append_eltwise(1.0f, alg::eltwise_linear, q[0], q[1]);
      return;
    case ops::FusedAct::kSwish:  // x * sigmoid(alpha x)
      po.append_eltwise(1.0f, alg::eltwise_swish, q[0], 0.0f);
      return;
  }
}

// Cuts the kernel taps that read only padding, at every output position, from p (kernel size,
// pads; the output size stays) where the pads stay non-negative; returns the first tap kept per
// spatial dim, or nothing when no tap is cut. Along a dim of size `in`, tap t reads
// o*s - pb + t*d for outputs o = 0..out-1.
std::vector<int64_t> cut_padding_taps(ops::ConvParams& p) {
  ops::Window& w = p.win;
  std::vector<int64_t> first(w.spatial, 0);
  bool cut = false;
  for (size_t a = 0; a < w.spatial; ++a) {
    const int64_t in = w.in[a], out = w.out[a], s = w.strides[a], d = w.dilations[a];
    const int64_t pb = w.pads_begin[a], pe = w.pads_end[a], kk = w.kernel[a];
    int64_t k0 = 0, k1 = kk - 1;
    while (k0 < k1 && (out - 1) * s - pb + k0 * d < 0) ++k0;  // reads before the input only
    while (k1 > k0 && -pb + k1 * d >= in) --k1;               // reads past it only
    const int64_t nb = pb - k0 * d, ne = pe - (kk - 1 - k1) * d;
    if ((k0 == 0 && k1 == kk - 1) || nb < 0 || ne < 0) continue;
    first[a] = k0;
    w.kernel[a] = k1 - k0 + 1;
    w.pads_begin[a] = nb;
    w.pads_end[a] = ne;
    p.w[2 + a] = k1 - k0 + 1;
    cut = true;
  }
  return cut ? first : std::vector<int64_t>();
}

// How many neighbouring groups to compute as one (block-diagonal weights, zeros between) so that
// each merged group's input and output channels are whole blocks of `block`; 1 when none fits
// (or the groups are whole blocks already).
int64_t merge_factor(const ops::ConvParams& p, int block) {
  if (p.group <= 1 || block <= 1) return 1;
  const int64_t icg = p.w[1], ocg = p.w[0] / p.group;
  if (icg % block == 0 && ocg % block == 0) return 1;
  for (int64_t m = 2; m <= p.group && m * std::min(icg, ocg) <= 4 * block; ++m) {
    if (p.group % m == 0 && (m * icg) % block == 0 && (m * ocg) % block == 0) return m;
  }
  return 1;
}

// Names the weights a kernel derived from the model's: taps cut (first kept tap and count per
// dim, tap0 and cut's kernel) and groups merged. Empty when they are the model's. (Trailing taps
// cut with the first kept, as in a length-1 input padded (0, 2) for 3 taps, change the count only.)
std::string variant(const std::vector<int64_t>& tap0, const ops::ConvParams& cut, int64_t merge) {
  std::string v;
  if (!tap0.empty()) {
    v = "taps";
    for (size_t a = 0; a < tap0.size(); ++a) v = str_cat(v, ",", tap0[a], "x", cut.w[2 + a]);
  }
  if (merge > 1) v = str_cat(v, v.empty() ? "" : " ", "merge", merge);
  return v;
}

// The weights of `cut` (taps cut from `orig`'s, starting at tap0) with `merge` groups as one:
// [M, C/group * merge, k...], zero where an output channel's merged group does not read.
Expected<Tensor> derive_weights(const Tensor& w, const ops::ConvParams& orig,
                                const ops::ConvParams& cut, const std::vector<int64_t>& tap0,
                                int64_t merge) {
  const int64_t M = orig.w[0], icg = orig.w[1], ocg = M / orig.group;
  Shape shape = cut.w;
  shape[1] = icg * merge;
  TERN_ASSIGN_OR_RETURN(Tensor out, Tensor::allocate(DType::kFloat32, shape));
  const ops::Window o3 = ops::as_3d(orig.win), c3 = ops::as_3d(cut.win);
  std::vector<int64_t> t3(3, 0);
  for (size_t a = 0; a < tap0.size(); ++a) t3[3 - tap0.size() + a] = tap0[a];
  const int64_t otaps = o3.kernel[0] * o3.kernel[1] * o3.kernel[2];
  const int64_t ctaps = c3.kernel[0] * c3.kernel[1] * c3.kernel[2];
  const float* src = w.data<float>();
  float* dst = out.data<float>();
  for (int64_t m = 0; m < M; ++m) {
    const int64_t j = (m % (ocg * merge)) / ocg;  // which of the merged groups m belongs to
    for (int64_t i = 0; i < icg; ++i) {
      const float* from = src + (m * icg + i) * otaps;
      float* to = dst + (m * icg * merge + j * icg + i) * ctaps;
      for (int64_t kd = 0; kd < c3.kernel[0]; ++kd) {
        for (int64_t kh = 0; kh < c3.kernel[1]; ++kh) {
          for (int64_t kw = 0; kw < c3.kernel[2]; ++kw) {
            to[(kd * c3.kernel[1] + kh) * c3.kernel[2] + kw] =
                from[((kd + t3[0]) * o3.kernel[1] + kh + t3[1]) * o3.kernel[2] + kw + t3[2]];
          }
        }
      }
    }
  }
  return out;
}

class OnednnConv final : public onednn::PackedWeightKernel {
 public:
  const char* name() const override { return name_.c_str(); }
  size_t workspace_bytes() const override { return src_reorder_bytes_ + dst_reorder_bytes_; }

  static Expected<std::unique_ptr<Kernel>> create(const OpContext& ctx) {
    auto k = create_as(ctx, true);
    // A bf16 reading of a float32 convolution that oneDNN has only its reference kernel for
    // (group widths its bf16 kernels decline): the float32 kernels instead.
    if (k && std::string((*k)->name()).rfind("onednn(ref)", 0) == 0 &&
        ctx.inputs[0].dtype == DType::kFloat32 && ctx.flag(FlagId::kCpuConvAllowBf16)) {
      return create_as(ctx, false);
    }
    return k;
  }

  // allow_bf16: whether cpu.conv.allow_bf16 may make a float32 convolution read bf16.
  static Expected<std::unique_ptr<Kernel>> create_as(const OpContext& ctx, bool allow_bf16) {
    TERN_RETURN_IF_ERROR(onednn::require_onednn_sizes(ctx));
    if (ctx.flag(FlagId::kDeterministicAlgorithms)) {
      // oneDNN picks its work split from the thread count, so bits may change with it.
      return unsupported("oneDNN Conv is not deterministic across thread counts");
    }
    TERN_ASSIGN_OR_RETURN(ops::FusedConvParams fp, ops::parse_conv_or_fused(ctx, true));
    ops::ConvParams p = fp.conv;
    // oneDNN 2.6's direct kernels crash (a segmentation fault in their JIT code, seen with a 3-D
    // convolution padded by one frame around a kernel one frame deep) on a residual sum followed
    // by an activation where some output reads only padding: such a convolution runs elsewhere.
    if (fp.has_sum && !fp.epilogue.empty()) {
      for (size_t d = 0; d < p.win.spatial; ++d) {
        const int64_t extent = (p.w[d + 2] - 1) * p.win.dilations[d] + 1;
        if (p.win.pads_begin[d] >= extent || p.win.pads_end[d] >= extent) {
          return unsupported("oneDNN 2.6 mishandles a residual and an activation where outputs ",
                             "read only padding");
        }
      }
    }
    auto k = std::make_unique<OnednnConv>();
    // oneDNN 2.6's depthwise kernel computes a second eltwise_linear post-op in one chain wrongly:
    // the epilogue from its second Affine on runs here, on the destination, after the primitive.
    auto second_affine = fp.epilogue.begin();
    for (int affines = 0; second_affine != fp.epilogue.end(); ++second_affine) {
      if (second_affine->act == ops::FusedAct::kAffine && ++affines == 2) break;
    }
    k->tail_.assign(second_affine, fp.epilogue.end());
    k->vec_ = &vec_ops(effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability)));
    fp.epilogue.erase(second_affine, fp.epilogue.end());
    const Tensor* wconst = ctx.inputs[1].value;
    // bfloat16: oneDNN's bf16 kernel where the activations, the (constant) weights, the bias and
    // the residual are all bf16; any other mix runs widened to float32 (widened_kernel.h).
    const bool bf16 = ctx.inputs[0].dtype == DType::kBFloat16;
    if (bf16) {
      TERN_RETURN_IF_ERROR(onednn::require_native_bf16());
      bool all_bf16 = wconst && k->tail_.empty();
      for (const auto* list : {&ctx.inputs, &ctx.outputs}) {
        for (const TensorInfo& t : *list)
          all_bf16 = all_bf16 && (!t.present || t.dtype == DType::kBFloat16);
      }
      if (!all_bf16) {
        return unsupported(
            "oneDNN bf16 Conv takes bf16 activations, constant weights, bias and "
            "residual only");
      }
    } else if (ctx.inputs[0].dtype != DType::kFloat32) {
      return unsupported("oneDNN Conv here takes float32 or bfloat16");
    }
    // cpu.conv.allow_bf16: a float32 convolution reads its source and weights as bf16 (the source
    // rounded in the workspace by the reorder that may also change its layout), accumulates in
    // float32 and writes float32.
    const bool f32_as_bf16 = allow_bf16 && !bf16 && wconst && ctx.flag(FlagId::kCpuConvAllowBf16) &&
                             onednn::require_native_bf16().is_ok();
    const dt adt = bf16 ? dt::bf16 : dt::f32;                 // the activations' type in memory
    const dt cdt = bf16 || f32_as_bf16 ? dt::bf16 : dt::f32;  // what the primitive reads
    // Taps that read only padding at every output position are cut (constant weights): ASPP's
    // dilation-24 3x3 on a 14x14 map is a 1x1 convolution, which oneDNN also has a direct kernel
    // for where it has none for the dilated one.
    const std::vector<int64_t> tap0 = wconst ? cut_padding_taps(p) : std::vector<int64_t>();
    const size_t s = p.win.spatial;
    dnnl::memory::dims dil;
    for (int64_t d : p.win.dilations) dil.push_back(d - 1);
    const int in_block = ctx.inputs[0].block, out_block = ctx.outputs[0].block;
    const int z_block = fp.has_sum ? ctx.inputs[3].block : 0;
    try {
      k->user_src_md_ =
          dnnl::memory::desc(onednn::to_dims(p.x), adt, onednn::layout_tag(p.x.size(), in_block));
      k->user_dst_md_ =
          dnnl::memory::desc(onednn::to_dims(p.y), adt, onednn::layout_tag(p.y.size(), out_block));
      // The layouts the primitive reads and writes, when they differ from the planned ones
      // (reordered in the workspace before and after it):
      // - a blocked source with a plain destination (output channels not a whole number of
      //   blocks): oneDNN has only its reference kernel for that mix, so the convolution writes
      //   a padded blocked copy;
      // - an 8-blocked destination on AVX-512 (24 output channels in PP-OCR's detection neck):
      //   the 16-block kernel into a padded copy is faster (3x3, 96 -> 24 channels at 160x160:
      //   7.6 against 10.8 ms at one thread, reorders ~0.3 ms), unless the kernel is 1x1;
      // - a source in another layout than the destination (plain past the first layer's few
      //   channels, the other block size; always for channels-last): reordered so a direct
      //   kernel runs, not oneDNN's reference fallback;
      // - channels-last (or plain) for both, where oneDNN has only its reference kernel for the
      //   planned layout: groups of a width that is not a whole number of channel blocks, some
      //   dilations (see below).
      const bool avx512 = effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability)) == CpuIsa::kAvx512;
      // 1x1 kernels compute little per output element: there the reorders would cost more.
      const bool pointwise =
          std::all_of(p.w.begin() + 2, p.w.end(), [](int64_t d) { return d == 1; });
      int planned_block = out_block;
      if (in_block != 0 && out_block == 0) {
        planned_block = in_block;
      } else if (avx512 && out_block == 8 && !pointwise &&
                 (in_block == 16 || (in_block == 0 && p.x[1] > 4))) {
        planned_block = 16;
      }
      // The source and destination layouts of a candidate writing `dst_block`; their reorders
      // are made once, for the chosen candidate (below).
      auto set_layout = [&](int dst_block) {
        const bool last_out = onednn::is_channels_last(onednn::layout_tag(p.y.size(), dst_block));
        k->src_md_ = k->user_src_md_;
        k->src_reorder_bytes_ = 0;
        const bool relayout = in_block != dst_block && (dst_block != 0 || in_block != 0) &&
                              (p.x[1] > 4 || last_out || dst_block == 0);
        if (relayout || cdt != adt) {
          k->src_md_ =
              dnnl::memory::desc(onednn::to_dims(p.x), cdt,
                                 onednn::layout_tag(p.x.size(), relayout ? dst_block : in_block));
          k->src_reorder_bytes_ = k->src_md_.get_size();
        }
        k->dst_md_ = k->user_dst_md_;
        k->dst_reorder_bytes_ = 0;
        if (dst_block != out_block) {
          k->dst_md_ = dnnl::memory::desc(onednn::to_dims(p.y), adt,
                                          onednn::layout_tag(p.y.size(), dst_block));
          k->dst_reorder_bytes_ = k->dst_md_.get_size();
        }
      };
      dnnl::memory::desc b_md;
      if (p.has_bias) b_md = dnnl::memory::desc({p.w[0]}, adt, tag::x);
      dnnl::primitive_attr attr = onednn::user_scratchpad_attr();
      dnnl::post_ops po;
      if (fp.has_sum) po.append_sum(1.0f);
      for (const ops::FusedStep& st : fp.epilogue) append_step(po, st);
      attr.set_post_ops(po);
      using Pd = dnnl::convolution_forward::primitive_desc;
      // The primitive for `merge` groups computed as one (block-diagonal weights) in layout
      // `dst_block`; its plain weight layout in `plain_w`.
      dnnl::memory::desc plain_w;
      dnnl::algorithm conv_alg = alg::convolution_direct;
      // The layouts of the candidate writing `dst_block` with `merge` groups computed as one.
      auto adopt = [&](int dst_block, int64_t merge) {
        set_layout(dst_block);
        const int64_t g = p.group / merge;
        dnnl::memory::dims wdims;
        if (p.group > 1) {
          wdims = {g, p.w[0] / g, p.w[1] * merge};
          wdims.insert(wdims.end(), p.w.begin() + 2, p.w.end());
        } else {
          wdims = onednn::to_dims(p.w);
        }
        const tag wtag = p.group > 1 ? (s == 1   ? tag::goiw
                                        : s == 2 ? tag::goihw
                                                 : tag::goidhw)
                                     : (s == 1   ? tag::oiw
                                        : s == 2 ? tag::oihw
                                                 : tag::oidhw);
        plain_w = dnnl::memory::desc(wdims, dt::f32, wtag);
        return wdims;
      };
      auto make = [&](int dst_block, int64_t merge) -> Pd {
        const dnnl::memory::dims wdims = adopt(dst_block, merge);
        auto make_pd = [&](const dnnl::memory::desc& w_md) {
          auto desc = dnnl::convolution_forward::desc(
              dnnl::prop_kind::forward_inference, conv_alg, k->src_md_, w_md, b_md, k->dst_md_,
              onednn::to_dims(p.win.strides), dil, onednn::to_dims(p.win.pads_begin),
              onednn::to_dims(p.win.pads_end));
          return Pd(desc, attr, onednn::engine());
        };
        // Constant weights: a layout the session packed them in for another shape or thread
        // count, when one of oneDNN's optimized kernels takes it (one copy for every image size),
        // else the layout oneDNN picks, packed once. Its reference kernel takes any layout: a
        // 1-thread plan made after a 2-thread one got it for GoogLeNet's 10x10 convolutions
        // (1.4 s a run instead of 13 ms).
        if (wconst) {
          for (const auto& known :
               onednn::known_layouts(ctx.inputs[1], ctx.weights, variant(tap0, p, merge))) {
            try {
              auto candidate = make_pd(known);
              if (candidate.weights_desc() == known &&
                  std::string(candidate.impl_info_str()).rfind("ref", 0) != 0) {
                return candidate;
              }
            } catch (const dnnl::error&) {  // no implementation takes that layout here
            }
          }
        }
        return make_pd(wconst ? dnnl::memory::desc(wdims, cdt, tag::any) : plain_w);
      };
      auto is_ref = [](const Pd& pd) {
        return std::string(pd.impl_info_str()).rfind("ref", 0) == 0;
      };
      // Plain activations (1-D and 3-D convolutions always, 2-D ones whose channels are not
      // whole blocks) get oneDNN's im2col GEMM, several times slower than a direct kernel on a
      // channels-last or blocked copy (the reorders in the workspace cost far less). 1x1 kernels
      // too: theirs is one GEMM, but oneDNN's GEMM builds its JIT code on its first call in a
      // process (~30 ms: a cold start of several times the model's run).
      const int isa_block =
          avx512                                                                    ? 16
          : effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability)) == CpuIsa::kAvx2 ? 8
                                                                                    : 0;
      auto is_gemm = [](const Pd& pd) {
        const std::string impl = pd.impl_info_str();
        return impl.find("gemm") != std::string::npos && impl.find("brg") == std::string::npos;
      };
      constexpr int kChannelsLast = 1;  // any block other than 8 and 16 means channels-last
      int64_t merge = 1;
      int layout = planned_block;
      std::optional<Pd> chosen;
      // Groups whose channels are not whole blocks of `blk` (RegNetY's 8 a group, ResNeXt's 4,
      // at AVX-512's 16): only oneDNN's reference kernel takes them in that blocked layout, so
      // that descriptor is not made.
      const bool depthwise = p.x[1] == p.group && p.y[1] == p.group;
      auto narrow_groups = [&](int blk) {
        return p.group > 1 && !depthwise && (blk == 8 || blk == 16) &&
               ((p.x[1] / p.group) % blk != 0 || (p.y[1] / p.group) % blk != 0);
      };
      // A direct kernel on a blocked, else channels-last, copy of plain activations: true when
      // one takes them (then chosen).
      auto direct_on_copy = [&]() {
        for (int blk : {isa_block, kChannelsLast}) {
          if (narrow_groups(blk)) continue;
          std::optional<Pd> candidate;
          try {
            candidate = make(blk, merge);
          } catch (const dnnl::error&) {
            continue;
          }
          if (is_ref(*candidate) || is_gemm(*candidate)) continue;
          chosen = std::move(candidate);
          layout = blk;
          return true;
        }
        return false;
      };
      // cpu.conv.winograd: 3x3 stride-1 convolutions (onednn::winograd_shape) run oneDNN's
      // Winograd kernels (AVX-512, float32) where it has one: F(2x2,3x3) or F(4x4,3x3), 2.25-4x
      // fewer multiplications. They read and write 16-channel blocks: from channels-last
      // activations through reorders in the workspace, which cost far less than the transform
      // saves from 16 channels on (SqueezeNet's 16 -> 64 and 32 -> 128 at 39x39 and 19x19: 111
      // -> 88 and 103 -> 52 us at one thread; the U-Net's 32 and 64: 8.3 -> 6.5 ms a run). A
      // first layer's few channels stay on the direct kernel.
      const bool wino_shape = wconst && avx512 && cdt == dt::f32 && s == 2 && p.group == 1 &&
                              variant(tap0, p, 1).empty() && ctx.flag(FlagId::kCpuConvWinograd) &&
                              onednn::winograd_shape({p.w[2], p.w[3]}, p.win.strides,
                                                     p.win.dilations, {p.y.begin() + 2, p.y.end()});
      bool wino_tried = false;
      // True when a Winograd kernel takes the convolution (then chosen, in 16-channel blocks).
      auto winograd = [&]() {
        wino_tried = true;
        conv_alg = alg::convolution_winograd;
        bool wino = false;
        auto try_winograd = [&] {
          try {
            std::optional<Pd> candidate = make(16, 1);
            wino = std::string(candidate->impl_info_str()).find("wino") != std::string::npos;
            if (wino) {
              chosen = std::move(candidate);
              layout = 16;
            }
          } catch (const dnnl::error&) {  // no Winograd kernel for this shape or post-op chain
          }
        };
        try_winograd();
        // oneDNN's Winograd kernels decline most activations (SiLU, GELU...): the convolution
        // (and its residual) there, the activations as a pass of their own over the output
        // (EfficientNetV2-S's 48 -> 192 at 32x32 with SiLU: 776 us direct, 347 + 55 so), where
        // that output is whole channel blocks (the pass sees its elements as a flat run).
        if (!wino && !fp.epilogue.empty() &&
            (out_block == 0 || out_block == p.y[1] || p.y[1] % out_block == 0)) {
          // (A fresh attribute: oneDNN 2.6 keeps the old chain when given an empty one.)
          dnnl::primitive_attr full = attr;
          attr = onednn::user_scratchpad_attr();
          dnnl::post_ops sum_only;
          if (fp.has_sum) sum_only.append_sum(1.0f);
          attr.set_post_ops(sum_only);
          try_winograd();
          if (wino) {
            k->tail_.insert(k->tail_.begin(), fp.epilogue.begin(), fp.epilogue.end());
          } else {
            attr = full;
          }
        }
        if (!wino) conv_alg = alg::convolution_direct;
        return wino;
      };
      // The layouts the Winograd kernels are worth their reorders from.
      auto wino_layout = [&](int l) {
        return l == 16 || (l != 0 && l != 8 && std::min(p.x[1], p.y[1]) >= 16);
      };
      // Where the planned layout is one of them, they are asked for first: the direct kernel's
      // primitive descriptor is made only when they decline.
      if (!(wino_shape && wino_layout(planned_block) && winograd())) {
        // In their own layout float32 plain activations only get the GEMM (or the reference
        // kernel), so the copies are asked for first: one primitive descriptor instead of two or
        // three per convolution (an optimized .tern's load at one thread: the 1-D audio stack
        // 3.76 -> 3.40 ms, the TCN 3.20 -> 2.84).
        const bool plain_first = planned_block == 0 && isa_block != 0 && cdt == dt::f32;
        // Narrow groups in the planned blocked layout: the candidates below are asked for at once.
        if (!(plain_first && direct_on_copy()) && !narrow_groups(planned_block)) {
          chosen = make(layout, 1);
        }
        if (!chosen || is_ref(*chosen)) {
          // oneDNN's direct kernels take channels-last for groups of any width and for dilations
          // its blocked kernels decline (AVX-512); on AVX2 merging narrow groups into groups of
          // whole blocks (zero weights between them) keeps a direct kernel in the planned layout.
          std::vector<std::pair<int, int64_t>> tries;
          const bool rank4 = p.x.size() == 4;
          if (rank4) tries.emplace_back(kChannelsLast, 1);
          const int64_t m = wconst ? merge_factor(p, planned_block) : 1;
          if (m > 1) tries.emplace_back(planned_block, m);
          tries.emplace_back(0, 1);  // plain: oneDNN's im2col GEMM
          for (const auto& [blk, mg] : tries) {
            std::optional<Pd> candidate;
            try {
              candidate = make(blk, mg);
            } catch (const dnnl::error&) {
              continue;
            }
            // Channels-last only for a direct kernel: its GEMM is no faster than the plain one.
            const std::string impl = candidate->impl_info_str();
            if (is_ref(*candidate) ||
                (blk == kChannelsLast && impl.find("gemm") != std::string::npos))
              continue;
            chosen = std::move(candidate);
            layout = blk;
            merge = mg;
            break;
          }
          if (!chosen) chosen = make(layout, 1);  // the planned layout after all
          adopt(layout, merge);                   // the layouts of the chosen candidate
        }
        if (!plain_first && layout == 0 && planned_block == 0 && isa_block && is_gemm(*chosen)) {
          direct_on_copy();
          adopt(layout, merge);
        }
        if (!wino_tried && wino_shape && merge == 1 && wino_layout(layout)) winograd();
        adopt(layout, merge);  // the layouts of the chosen candidate
      }
      const Pd& pd = *chosen;
      if (k->src_reorder_bytes_) {
        k->src_reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(
            onednn::engine(), k->user_src_md_, onednn::engine(), k->src_md_));
      }
      if (k->dst_reorder_bytes_) {
        k->dst_reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(
            onednn::engine(), k->dst_md_, onednn::engine(), k->user_dst_md_));
      }
      k->prim_ = dnnl::convolution_forward(pd);
      k->has_bias_ = p.has_bias;
      k->has_sum_ = fp.has_sum;
      if (fp.has_sum && (z_block != out_block || k->dst_reorder_bytes_)) {
        dnnl::memory::desc z_md(onednn::to_dims(p.y), adt, onednn::layout_tag(p.y.size(), z_block));
        k->z_md_ = z_md;
        k->z_reorder_ = dnnl::reorder(
            dnnl::reorder::primitive_desc(onednn::engine(), z_md, onednn::engine(), k->dst_md_));
        k->z_needs_reorder_ = true;
      }
      k->name_ = onednn::impl_kernel_name(pd.impl_info_str());
      if (f32_as_bf16) k->name_ += " bf16";  // float32 computed in bf16 (cpu.conv.allow_bf16)
      if (wconst) {
        const std::string v = variant(tap0, p, merge);
        // What is packed, made only where the weights are packed here: bf16 weights from a
        // float32 copy, the taps cut / groups merged there.
        onednn::DeriveWeights derive;
        if (bf16 || !v.empty()) {
          derive = [&]() -> Expected<Tensor> {
            std::optional<Tensor> wide;
            if (bf16) {
              TERN_ASSIGN_OR_RETURN(wide, Tensor::allocate(DType::kFloat32, wconst->shape()));
              widen_row(nullptr, DType::kBFloat16, wconst->data<uint16_t>(), wide->data<float>(),
                        wconst->numel());
            }
            if (v.empty()) return std::move(*wide);
            return derive_weights(wide ? *wide : *wconst, fp.conv, p, tap0, merge);
          };
        }
        TERN_ASSIGN_OR_RETURN(k->packed_w_,
                              onednn::pack_weights(plain_w, pd.weights_desc(), ctx.inputs[1],
                                                   ctx.weights, v, derive));
        k->packed_ = true;
      }
      k->args_ =
          onednn::ArgPool::weighted(k->src_md_, wconst ? pd.weights_desc() : plain_w,
                                    p.has_bias ? &b_md : nullptr, k->dst_md_, pd.scratchpad_desc());
    } catch (const dnnl::error& e) {
      return unsupported("oneDNN declined this convolution: ", e.what());
    }
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Status run(const KernelArgs& a, const ExecContext& exec) const override {
    auto& eng = onednn::engine();
    void* src = a.inputs[0]->raw();
    void* dst = dst_reorder_bytes_ ? static_cast<uint8_t*>(a.workspace) + src_reorder_bytes_
                                   : a.outputs[0]->raw();
    try {
      if (src_reorder_bytes_) {
        dnnl::memory from(user_src_md_, eng, src), to(src_md_, eng, a.workspace);
        src_reorder_.execute(onednn::thread_stream(), from, to);
        src = a.workspace;
      }
      if (has_sum_) {
        if (z_needs_reorder_) {
          dnnl::memory from(z_md_, eng, a.inputs[3]->raw()), to(dst_md_, eng, dst);
          z_reorder_.execute(onednn::thread_stream(), from, to);
        } else if (dst != a.inputs[3]->raw()) {
          std::memcpy(dst, a.inputs[3]->raw(), dst_md_.get_size());
        }
      }
    } catch (const dnnl::error& e) {
      return internal_error("oneDNN reorder: ", e.what());
    }
    void* w = packed_ ? packed_w_.memory.get_data_handle() : a.inputs[1]->raw();
    TERN_RETURN_IF_ERROR(
        args_.execute_weighted(prim_, src, w, has_bias_ ? a.inputs[2]->raw() : nullptr, dst));
    if (dst_reorder_bytes_) {
      try {
        dnnl::memory from(dst_md_, eng, dst), to(user_dst_md_, eng, a.outputs[0]->raw());
        dst_reorder_.execute(onednn::thread_stream(), from, to);
      } catch (const dnnl::error& e) {
        return internal_error("oneDNN reorder: ", e.what());
      }
    }
    if (!tail_.empty()) {  // element-wise: the same on any layout of whole channel blocks
      float* y = a.outputs[0]->data<float>();
      parallel_for(a.outputs[0]->numel(), 16384, exec.num_threads,
                   [&](int64_t b, int64_t e) { apply_fused_steps(*vec_, tail_, y + b, e - b); });
    }
    return Status::ok();
  }

 private:
  std::string name_ = "onednn";
  const VecOps* vec_ = &vec_ops(CpuIsa::kScalar);
  dnnl::convolution_forward prim_;
  dnnl::reorder src_reorder_, z_reorder_, dst_reorder_;
  dnnl::memory::desc user_src_md_, src_md_, user_dst_md_, dst_md_, z_md_;
  onednn::ArgPool args_;
  size_t src_reorder_bytes_ = 0, dst_reorder_bytes_ = 0;
  bool packed_ = false, has_bias_ = false, has_sum_ = false, z_needs_reorder_ = false;
  std::vector<ops::FusedStep> tail_;  // epilogue steps oneDNN cannot take, run after it
};

// A 3-D convolution one frame deep (kernel depth 1, stride 1, no padding or dilation in depth:
// R(2+1)D's and MC3's 1x3x3 ones) convolves each frame alone: it runs as the 2-D convolution of
// its frames, so oneDNN's 2-D kernels take it, Winograd among them. The planned (plain NCDHW)
// activations are reordered in the workspace into frames of channel blocks, [N][D][C/b][H][W][b]
// (a 2-D nChw{b}c tensor of N * D images), and the result back; the 3-D kernel's reorders into
// nCdhw{b}c cost the same.
class FramewiseConv final : public Kernel {
 public:
  const char* name() const override { return name_.c_str(); }
  size_t workspace_bytes() const override {
    return src_bytes_ + dst_bytes_ + inner_->workspace_bytes();
  }
  size_t packed_bytes() const override { return inner_->packed_bytes(); }
  std::vector<PackedWeight> packed_weights() const override { return inner_->packed_weights(); }

  // UNSUPPORTED where the convolution is not one frame deep or its layouts are not plain.
  static Expected<std::unique_ptr<Kernel>> create(const OpContext& ctx) {
    TERN_ASSIGN_OR_RETURN(ops::FusedConvParams fp, ops::parse_conv_or_fused(ctx, true));
    const ops::ConvParams& p = fp.conv;
    const CpuIsa isa = effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability));
    const int blk = isa == CpuIsa::kAvx512 ? 16 : isa == CpuIsa::kAvx2 ? 8 : 0;
    const bool plain = ctx.inputs[0].block == 0 && ctx.outputs[0].block == 0 &&
                       (!fp.has_sum || ctx.inputs[3].block == 0);
    if (p.x.size() != 5 || p.group != 1 || p.w[2] != 1 || p.win.strides[0] != 1 ||
        p.win.pads_begin[0] != 0 || p.win.pads_end[0] != 0 || p.win.dilations[0] != 1 ||
        !ctx.inputs[1].value || ctx.inputs[0].dtype != DType::kFloat32 || !plain || blk == 0 ||
        p.x[1] <= 4) {  // (a first layer's few channels: the 3-D kernel reads them plain)
      return unsupported("not a plain float32 3-D convolution one frame deep");
    }
    // Epilogue steps the inner kernel runs itself after oneDNN (from a second Affine on) treat
    // its output as whole channel blocks.
    const auto affines =
        std::count_if(fp.epilogue.begin(), fp.epilogue.end(),
                      [](const ops::FusedStep& st) { return st.act == ops::FusedAct::kAffine; });
    if (affines > 1 && (p.x[1] % blk != 0 || p.y[1] % blk != 0)) {
      return unsupported("an epilogue run after oneDNN on channels that are not whole blocks");
    }
    auto k = std::make_unique<FramewiseConv>();
    const int64_t frames = p.x[0] * p.x[2];
    const Shape x2 = {frames, p.x[1], p.x[3], p.x[4]}, y2 = {frames, p.y[1], p.y[3], p.y[4]};
    // The 2-D node: the same attributes over H and W.
    k->node_ = *ctx.node;
    Attributes attrs;
    for (const auto& kv : ctx.attrs().all()) {
      if (kv.first != "auto_pad") attrs.set(kv.first, kv.second);
    }
    const auto hw = [](const std::vector<int64_t>& v) {
      return Attribute::of_ints(std::vector<int64_t>(v.begin() + 1, v.end()));
    };
    attrs.set("kernel_shape", hw(std::vector<int64_t>(p.w.begin() + 2, p.w.end())));
    attrs.set("strides", hw(p.win.strides));
    attrs.set("dilations", hw(p.win.dilations));
    attrs.set("pads", Attribute::of_ints({p.win.pads_begin[1], p.win.pads_begin[2],
                                          p.win.pads_end[1], p.win.pads_end[2]}));
    k->node_.attrs = std::move(attrs);
    OpContext inner = ctx;
    inner.node = &k->node_;
    inner.inputs[0].shape = x2;
    inner.inputs[0].block = blk;
    // The weights without their depth of 1: the same bytes, so the model's constant itself stays
    // the value (the session's weight cache is keyed by it; its packed layouts are keyed by their
    // 4-D descriptions, which no 3-D kernel's equals).
    inner.inputs[1].shape = {p.w[0], p.w[1], p.w[3], p.w[4]};
    inner.outputs[0].shape = y2;
    inner.outputs[0].block = blk;
    if (fp.has_sum) {
      inner.inputs[3].shape = y2;
      inner.inputs[3].block = blk;
    }
    TERN_ASSIGN_OR_RETURN(k->inner_, OnednnConv::create(inner));
    k->name_ = std::string(k->inner_->name()) + " framewise";
    k->x2_ = x2;
    k->y2_ = y2;
    k->has_sum_ = fp.has_sum;
    try {
      const auto plain_md = [](const Shape& s) {
        return dnnl::memory::desc(onednn::to_dims(s), dt::f32, tag::ncdhw);
      };
      k->frames_src_ = frames_md(p.x, blk);
      k->frames_dst_ = frames_md(p.y, blk);
      auto& eng = onednn::engine();
      k->src_in_ =
          dnnl::reorder(dnnl::reorder::primitive_desc(eng, plain_md(p.x), eng, k->frames_src_));
      k->dst_out_ =
          dnnl::reorder(dnnl::reorder::primitive_desc(eng, k->frames_dst_, eng, plain_md(p.y)));
      if (fp.has_sum) {
        k->z_in_ =
            dnnl::reorder(dnnl::reorder::primitive_desc(eng, plain_md(p.y), eng, k->frames_dst_));
      }
      k->src_md_ = plain_md(p.x);
      k->dst_md_ = plain_md(p.y);
      k->src_bytes_ = align64(k->frames_src_.get_size());
      k->dst_bytes_ = align64(k->frames_dst_.get_size());
    } catch (const dnnl::error& e) {
      return unsupported("oneDNN declined the frames' reorders: ", e.what());
    }
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Status run(const KernelArgs& a, const ExecContext& exec) const override {
    auto& eng = onednn::engine();
    auto* ws = static_cast<uint8_t*>(a.workspace);
    uint8_t* src = ws;
    uint8_t* dst = ws + src_bytes_;
    try {
      dnnl::memory from(src_md_, eng, a.inputs[0]->raw()), to(frames_src_, eng, src);
      src_in_.execute(onednn::thread_stream(), from, to);
      if (has_sum_) {
        dnnl::memory z(dst_md_, eng, a.inputs[3]->raw()), zf(frames_dst_, eng, dst);
        z_in_.execute(onednn::thread_stream(), z, zf);
      }
    } catch (const dnnl::error& e) {
      return internal_error("oneDNN reorder: ", e.what());
    }
    Tensor x2 = Tensor::wrap(DType::kFloat32, x2_, src, nullptr);
    Tensor y2 = Tensor::wrap(DType::kFloat32, y2_, dst, nullptr);
    KernelArgs b;
    b.inputs = a.inputs;
    b.inputs[0] = &x2;
    if (has_sum_) b.inputs[3] = &y2;
    b.outputs = {&y2};
    b.workspace = ws + src_bytes_ + dst_bytes_;
    TERN_RETURN_IF_ERROR(inner_->run(b, exec));
    try {
      dnnl::memory from(frames_dst_, eng, dst), to(dst_md_, eng, a.outputs[0]->raw());
      dst_out_.execute(onednn::thread_stream(), from, to);
    } catch (const dnnl::error& e) {
      return internal_error("oneDNN reorder: ", e.what());
    }
    return Status::ok();
  }

 private:
  static size_t align64(size_t n) { return (n + 63) / 64 * 64; }

  // [N][D][C/blk][H][W][blk] as a 5-D (N, C, D, H, W) layout: nCdhw{blk}c with the depth
  // outside the channel blocks.
  static dnnl::memory::desc frames_md(const Shape& x, int blk) {
    dnnl::memory::desc md(onednn::to_dims(x), dt::f32, blk == 16 ? tag::nCdhw16c : tag::nCdhw8c);
    auto& b = md.data.format_desc.blocking;
    const int64_t blocks = md.data.padded_dims[1] / blk, d = x[2], h = x[3], w = x[4];
    b.strides[4] = blk;
    b.strides[3] = w * blk;
    b.strides[1] = h * w * blk;
    b.strides[2] = blocks * h * w * blk;
    b.strides[0] = d * blocks * h * w * blk;
    return md;
  }

  std::string name_;
  std::unique_ptr<Kernel> inner_;
  Node node_;  // the 2-D node inner_ was made for
  Shape x2_, y2_;
  dnnl::memory::desc src_md_, dst_md_, frames_src_, frames_dst_;
  dnnl::reorder src_in_, z_in_, dst_out_;
  size_t src_bytes_ = 0, dst_bytes_ = 0;
  bool has_sum_ = false;
};

Expected<std::unique_ptr<Kernel>> create_conv(const OpContext& ctx) {
  auto framewise = FramewiseConv::create(ctx);
  if (framewise || framewise.status().code() != Code::kUnsupported) return framewise;
  return OnednnConv::create(ctx);
}

}  // namespace

TERN_REGISTRATION void register_cpu_onednn_conv(KernelRegistry& r) {
  for (DType t : {DType::kFloat32, DType::kBFloat16}) {
    r.add("Conv", "cpu", t, create_conv);
    r.add("FusedConv", "cpu", t, create_conv);
  }
}

}  // namespace tern
