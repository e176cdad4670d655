// Conv and FusedConv on oneDNN. Activations plain (NCHW) or channel-blocked (nChw8c/nChw16c) as
// the planner chose; a plain source with many channels is reordered to the blocked layout in the
// workspace first, since oneDNN's direct JIT kernels need it (its plain-layout fallback is an
// im2col GEMM several times slower). Weights are packed once per session and layout, and a
// layout packed for another shape is tried first, so one copy serves every image size.
// FusedConv's epilogue becomes eltwise post-ops (from a second Affine on, which oneDNN 2.6 gets
// wrong, it runs after the primitive) and its residual a sum post-op (the residual is copied into
// the destination first).
#include <cstring>
#include <optional>

#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/onednn/onednn_common.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"
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
  }
}

class OnednnConv final : public onednn::PackedWeightKernel {
 public:
  const char* name() const override { return name_; }
  size_t workspace_bytes() const override { return src_reorder_bytes_ + dst_reorder_bytes_; }

  static Expected<std::unique_ptr<Kernel>> create(const OpContext& ctx) {
    TERN_RETURN_IF_ERROR(onednn::require_onednn_sizes(ctx));
    if (ctx.flag(FlagId::kDeterministicAlgorithms)) {
      // oneDNN picks its work split from the thread count, so bits may change with it.
      return unsupported("oneDNN Conv is not deterministic across thread counts");
    }
    TERN_ASSIGN_OR_RETURN(ops::FusedConvParams fp, ops::parse_conv_or_fused(ctx));
    const ops::ConvParams& p = fp.conv;
    auto k = std::make_unique<OnednnConv>();
    // oneDNN 2.6's depthwise kernel computes a second eltwise_linear post-op in one chain wrongly:
    // the epilogue from its second Affine on runs here, on the destination, after the primitive.
    auto second_affine = fp.epilogue.begin();
    for (int affines = 0; second_affine != fp.epilogue.end(); ++second_affine) {
      if (second_affine->act == ops::FusedAct::kAffine && ++affines == 2) break;
    }
    k->tail_.assign(second_affine, fp.epilogue.end());
    fp.epilogue.erase(second_affine, fp.epilogue.end());
    const size_t s = p.win.spatial;
    const bool grouped = p.group > 1;
    dnnl::memory::dims wdims;
    if (grouped) {
      wdims = {p.group, p.w[0] / p.group, p.w[1]};
      wdims.insert(wdims.end(), p.w.begin() + 2, p.w.end());
    } else {
      wdims = onednn::to_dims(p.w);
    }
    const tag wtag = grouped ? (s == 1   ? tag::goiw
                                : s == 2 ? tag::goihw
                                         : tag::goidhw)
                             : (s == 1   ? tag::oiw
                                : s == 2 ? tag::oihw
                                         : tag::oidhw);
    dnnl::memory::dims dil;
    for (int64_t d : p.win.dilations) dil.push_back(d - 1);
    const int in_block = ctx.inputs[0].block, out_block = ctx.outputs[0].block;
    const int z_block = fp.has_sum ? ctx.inputs[3].block : 0;
    try {
      k->user_src_md_ = dnnl::memory::desc(onednn::to_dims(p.x), dt::f32,
                                           onednn::layout_tag(p.x.size(), in_block));
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
      //   kernel runs, not oneDNN's reference fallback.
      const bool avx512 = effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability)) == CpuIsa::kAvx512;
      // 1x1 kernels compute little per output element: there the reorders would cost more.
      const bool pointwise =
          std::all_of(p.w.begin() + 2, p.w.end(), [](int64_t d) { return d == 1; });
      int dst_block = out_block;
      if (in_block != 0 && out_block == 0) {
        dst_block = in_block;
      } else if (avx512 && out_block == 8 && !pointwise &&
                 (in_block == 16 || (in_block == 0 && p.x[1] > 4))) {
        dst_block = 16;
      }
      const bool last_out = onednn::layout_tag(4, dst_block) == tag::nhwc;
      k->src_md_ = k->user_src_md_;
      if (in_block != dst_block && dst_block != 0 && (p.x[1] > 4 || last_out)) {
        k->src_md_ = dnnl::memory::desc(onednn::to_dims(p.x), dt::f32,
                                        onednn::layout_tag(p.x.size(), dst_block));
        k->src_reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(
            onednn::engine(), k->user_src_md_, onednn::engine(), k->src_md_));
        k->src_reorder_bytes_ = k->src_md_.get_size();
      }
      k->user_dst_md_ = dnnl::memory::desc(onednn::to_dims(p.y), dt::f32,
                                           onednn::layout_tag(p.y.size(), out_block));
      k->dst_md_ = k->user_dst_md_;
      if (dst_block != out_block) {
        k->dst_md_ = dnnl::memory::desc(onednn::to_dims(p.y), dt::f32,
                                        onednn::layout_tag(p.y.size(), dst_block));
        k->dst_reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(
            onednn::engine(), k->dst_md_, onednn::engine(), k->user_dst_md_));
        k->dst_reorder_bytes_ = k->dst_md_.get_size();
      }
      dnnl::memory::desc plain_w(wdims, dt::f32, wtag);
      const Tensor* wconst = ctx.inputs[1].value;
      // Constant weights: let oneDNN pick its layout and pack once. Otherwise read them plain.
      dnnl::memory::desc b_md;
      if (p.has_bias) b_md = dnnl::memory::desc({p.w[0]}, dt::f32, tag::x);
      dnnl::primitive_attr attr = onednn::user_scratchpad_attr();
      dnnl::post_ops po;
      if (fp.has_sum) po.append_sum(1.0f);
      for (const ops::FusedStep& st : fp.epilogue) append_step(po, st);
      attr.set_post_ops(po);
      auto make_pd = [&](const dnnl::memory::desc& w_md) {
        auto desc = dnnl::convolution_forward::desc(
            dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, k->src_md_,
            w_md, b_md, k->dst_md_, onednn::to_dims(p.win.strides), dil,
            onednn::to_dims(p.win.pads_begin), onednn::to_dims(p.win.pads_end));
        return dnnl::convolution_forward::primitive_desc(desc, attr, onednn::engine());
      };
      // Constant weights: a layout the session packed them in for another shape, when oneDNN
      // takes it (one copy for every image size), else the layout oneDNN picks, packed once.
      std::optional<dnnl::convolution_forward::primitive_desc> chosen;
      for (const auto& known : wconst ? onednn::known_layouts(ctx.inputs[1], ctx.weights)
                                      : std::vector<dnnl::memory::desc>{}) {
        try {
          auto candidate = make_pd(known);
          if (candidate.weights_desc() == known) {
            chosen = std::move(candidate);
            break;
          }
        } catch (const dnnl::error&) {  // no implementation takes that layout here
        }
      }
      if (!chosen)
        chosen = make_pd(wconst ? dnnl::memory::desc(wdims, dt::f32, tag::any) : plain_w);
      const dnnl::convolution_forward::primitive_desc& pd = *chosen;
      k->prim_ = dnnl::convolution_forward(pd);
      k->has_bias_ = p.has_bias;
      k->has_sum_ = fp.has_sum;
      if (fp.has_sum && (z_block != out_block || k->dst_reorder_bytes_)) {
        dnnl::memory::desc z_md(onednn::to_dims(p.y), dt::f32,
                                onednn::layout_tag(p.y.size(), z_block));
        k->z_md_ = z_md;
        k->z_reorder_ = dnnl::reorder(
            dnnl::reorder::primitive_desc(onednn::engine(), z_md, onednn::engine(), k->dst_md_));
        k->z_needs_reorder_ = true;
      }
      const std::string impl = pd.impl_info_str();
      k->name_ = impl.find("gemm") != std::string::npos  ? "onednn(gemm)"
                 : impl.find("jit") != std::string::npos ? "onednn(jit)"
                                                         : "onednn";
      if (wconst) {
        TERN_ASSIGN_OR_RETURN(k->packed_w_, onednn::pack_weights(plain_w, pd.weights_desc(),
                                                                 ctx.inputs[1], ctx.weights));
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
                   [&](int64_t b, int64_t e) { ops::apply_epilogue(tail_, y + b, e - b); });
    }
    return Status::ok();
  }

 private:
  const char* name_ = "onednn";
  dnnl::convolution_forward prim_;
  dnnl::reorder src_reorder_, z_reorder_, dst_reorder_;
  dnnl::memory::desc user_src_md_, src_md_, user_dst_md_, dst_md_, z_md_;
  onednn::ArgPool args_;
  size_t src_reorder_bytes_ = 0, dst_reorder_bytes_ = 0;
  bool packed_ = false, has_bias_ = false, has_sum_ = false, z_needs_reorder_ = false;
  std::vector<ops::FusedStep> tail_;  // epilogue steps oneDNN cannot take, run after it
};

}  // namespace

void register_cpu_onednn_conv(KernelRegistry& r) {
  r.add("Conv", "cpu", DType::kFloat32, OnednnConv::create);
  r.add("FusedConv", "cpu", DType::kFloat32, OnednnConv::create);
}

}  // namespace tern
