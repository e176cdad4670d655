// ConvTranspose on oneDNN's deconvolution: plain activations (run on a blocked or channels-last
// copy where oneDNN has only its GEMM or reference code for plain ones), weights packed once.
#include <optional>
#include <string>

#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/onednn/onednn_common.h"
#include "core/kernel_registry.h"
#include "ops/conv_transpose.h"

namespace tern {
namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

class OnednnConvTranspose final : public onednn::PackedWeightKernel {
 public:
  const char* name() const override { return name_; }

  static Expected<std::unique_ptr<Kernel>> create(const OpContext& ctx) {
    TERN_RETURN_IF_ERROR(onednn::require_onednn_sizes(ctx));
    TERN_ASSIGN_OR_RETURN(ops::ConvTransposeParams p, ops::parse_conv_transpose(ctx));
    const Tensor* wconst = ctx.inputs[1].value;
    if (!wconst) return unsupported("oneDNN deconvolution needs constant weights");
    // oneDNN 2.6 has no 1-D "io" weight layout: a 1-D deconvolution runs as a 2-D one of width
    // 1 (the same bytes with a unit dim after the length; of height 1, its JIT kernels decline).
    const bool one_d = p.win.spatial == 1;
    if (one_d) {
      for (auto* v : {&p.x, &p.y, &p.w}) v->push_back(1);
      for (auto* v : {&p.win.in, &p.win.out, &p.win.kernel, &p.win.strides, &p.win.dilations}) {
        v->push_back(1);
      }
      for (auto* v : {&p.win.pads_begin, &p.win.pads_end, &p.output_padding}) v->push_back(0);
      p.win.spatial = 2;
    }
    const size_t s = p.win.spatial;
    dnnl::memory::dims pad_r;
    for (size_t i = 0; i < s; ++i) {
      // ONNX's output_padding extends the end; oneDNN expresses it as less end padding.
      int64_t r = p.win.pads_end[i] - p.output_padding[i];
      if (r < 0) return unsupported("output_padding larger than the end padding");
      pad_r.push_back(r);
    }
    auto k = std::make_unique<OnednnConvTranspose>();
    const int64_t G = p.group, Cg = p.w[0] / G, Mg = p.w[1];
    dnnl::memory::dims wdims = G > 1 ? dnnl::memory::dims{G, Mg, Cg} : dnnl::memory::dims{Mg, Cg};
    wdims.insert(wdims.end(), p.w.begin() + 2, p.w.end());
    // ONNX stores [C_in, M/group, k...]: oneDNN's "io" order.
    const tag wtag =
        G > 1 ? (s == 2 ? tag::giohw : tag::giodhw) : (s == 2 ? tag::iohw : tag::iodhw);
    dnnl::memory::dims dil;
    for (int64_t d : p.win.dilations) dil.push_back(d - 1);
    const CpuIsa isa = effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability));
    const int isa_block = isa == CpuIsa::kAvx512 ? 16 : isa == CpuIsa::kAvx2 ? 8 : 0;
    try {
      k->user_src_md_ =
          dnnl::memory::desc(onednn::to_dims(p.x), dt::f32, onednn::activation_tag(p.x.size()));
      k->user_dst_md_ =
          dnnl::memory::desc(onednn::to_dims(p.y), dt::f32, onednn::activation_tag(p.y.size()));
      dnnl::memory::desc plain_w(wdims, dt::f32, wtag);
      dnnl::memory::desc b_md;
      if (p.has_bias) b_md = dnnl::memory::desc({p.y[1]}, dt::f32, tag::x);
      using Pd = dnnl::deconvolution_forward::primitive_desc;
      // The primitive on activations in layout `block` (0 plain, 8/16 blocked, else channels-last).
      auto make = [&](int block) {
        const dnnl::memory::desc src(onednn::to_dims(p.x), dt::f32,
                                     onednn::layout_tag(p.x.size(), block));
        const dnnl::memory::desc dst(onednn::to_dims(p.y), dt::f32,
                                     onednn::layout_tag(p.y.size(), block));
        auto desc = dnnl::deconvolution_forward::desc(
            dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct, src,
            dnnl::memory::desc(wdims, dt::f32, tag::any), b_md, dst, onednn::to_dims(p.win.strides),
            dil, onednn::to_dims(p.win.pads_begin), pad_r);
        return Pd(desc, onednn::user_scratchpad_attr(), onednn::engine());
      };
      auto impl = [](const Pd& pd) { return std::string(pd.impl_info_str()); };
      // Plain activations get oneDNN's GEMM (or reference) deconvolution, which builds its JIT
      // GEMM on the first call in a process (~30 ms); a direct kernel on a blocked or
      // channels-last copy in the workspace runs instead where one exists (the reorders cost
      // far less). Those copies are asked for first: in the plain layout oneDNN has only those
      // two, so its descriptor is made only when both copies decline (one descriptor per
      // ConvTranspose instead of two or three).
      auto direct = [&](const Pd& candidate) {
        const std::string i = impl(candidate);
        return i.rfind("ref", 0) != 0 &&
               (i.find("gemm") == std::string::npos || i.find("brg") != std::string::npos);
      };
      std::optional<Pd> chosen;
      constexpr int kChannelsLast = 1;
      if (isa_block) {
        for (int block : {isa_block, kChannelsLast}) {
          try {
            Pd candidate = make(block);
            if (!direct(candidate)) continue;
            chosen = std::move(candidate);
            break;
          } catch (const dnnl::error&) {
          }
        }
      }
      if (!chosen) chosen = make(0);
      const Pd& pd = *chosen;
      k->src_md_ = pd.src_desc();
      k->dst_md_ = pd.dst_desc();
      if (k->src_md_ != k->user_src_md_) {
        k->src_reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(
            onednn::engine(), k->user_src_md_, onednn::engine(), k->src_md_));
        k->src_bytes_ = k->src_md_.get_size();
      }
      if (k->dst_md_ != k->user_dst_md_) {
        k->dst_reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(
            onednn::engine(), k->dst_md_, onednn::engine(), k->user_dst_md_));
        k->dst_bytes_ = k->dst_md_.get_size();
      }
      k->name_ = onednn::impl_kernel_name(pd.impl_info_str());
      k->prim_ = dnnl::deconvolution_forward(pd);
      k->has_bias_ = p.has_bias;
      TERN_ASSIGN_OR_RETURN(k->packed_w_, onednn::pack_weights(plain_w, pd.weights_desc(),
                                                               ctx.inputs[1], ctx.weights));
      k->args_ =
          onednn::ArgPool::weighted(k->src_md_, pd.weights_desc(), p.has_bias ? &b_md : nullptr,
                                    k->dst_md_, pd.scratchpad_desc());
    } catch (const dnnl::error& e) {
      return unsupported("oneDNN declined this deconvolution: ", e.what());
    }
    return std::unique_ptr<Kernel>(std::move(k));
  }

  size_t workspace_bytes() const override { return src_bytes_ + dst_bytes_; }

  Status run(const KernelArgs& a, const ExecContext&) const override {
    void* src = a.inputs[0]->raw();
    void* dst = dst_bytes_ ? static_cast<uint8_t*>(a.workspace) + src_bytes_ : a.outputs[0]->raw();
    if (src_bytes_) {
      TERN_RETURN_IF_ERROR(
          onednn::run_reorder(src_reorder_, user_src_md_, src, src_md_, a.workspace));
      src = a.workspace;
    }
    TERN_RETURN_IF_ERROR(args_.execute_weighted(prim_, src, packed_w_.memory.get_data_handle(),
                                                has_bias_ ? a.inputs[2]->raw() : nullptr, dst));
    if (!dst_bytes_) return Status::ok();
    return onednn::run_reorder(dst_reorder_, dst_md_, dst, user_dst_md_, a.outputs[0]->raw());
  }

 private:
  const char* name_ = "onednn";
  dnnl::deconvolution_forward prim_;
  dnnl::reorder src_reorder_, dst_reorder_;
  // The planned (plain) layouts and the primitive's, when it runs on a reordered copy.
  dnnl::memory::desc user_src_md_, src_md_, user_dst_md_, dst_md_;
  onednn::ArgPool args_;
  size_t src_bytes_ = 0, dst_bytes_ = 0;
  bool has_bias_ = false;
};

}  // namespace

TERN_REGISTRATION void register_cpu_onednn_conv_transpose(KernelRegistry& r) {
  r.add("ConvTranspose", "cpu", DType::kFloat32, OnednnConvTranspose::create);
}

}  // namespace tern
