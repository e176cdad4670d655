// ConvTranspose on oneDNN's deconvolution: plain activations, weights packed once.
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
    // oneDNN 2.6 has no 1-D "io" weight layout: a 1-D deconvolution runs as a 2-D one of height
    // 1 (the same bytes with a unit dim before the length).
    const bool one_d = p.win.spatial == 1;
    if (one_d) {
      p.x.insert(p.x.begin() + 2, 1);
      p.y.insert(p.y.begin() + 2, 1);
      p.w.insert(p.w.begin() + 2, 1);
      for (auto* v : {&p.win.in, &p.win.out, &p.win.kernel}) v->insert(v->begin(), 1);
      p.win.strides.insert(p.win.strides.begin(), 1);
      p.win.dilations.insert(p.win.dilations.begin(), 1);
      p.win.pads_begin.insert(p.win.pads_begin.begin(), 0);
      p.win.pads_end.insert(p.win.pads_end.begin(), 0);
      p.output_padding.insert(p.output_padding.begin(), 0);
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
    try {
      k->src_md_ =
          dnnl::memory::desc(onednn::to_dims(p.x), dt::f32, onednn::activation_tag(p.x.size()));
      k->dst_md_ =
          dnnl::memory::desc(onednn::to_dims(p.y), dt::f32, onednn::activation_tag(p.y.size()));
      dnnl::memory::desc plain_w(wdims, dt::f32, wtag);
      dnnl::memory::desc b_md;
      if (p.has_bias) b_md = dnnl::memory::desc({p.y[1]}, dt::f32, tag::x);
      auto desc = dnnl::deconvolution_forward::desc(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct, k->src_md_,
          dnnl::memory::desc(wdims, dt::f32, tag::any), b_md, k->dst_md_,
          onednn::to_dims(p.win.strides), dil, onednn::to_dims(p.win.pads_begin), pad_r);
      dnnl::deconvolution_forward::primitive_desc pd(desc, onednn::user_scratchpad_attr(),
                                                     onednn::engine());
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

  Status run(const KernelArgs& a, const ExecContext&) const override {
    return args_.execute_weighted(prim_, a.inputs[0]->raw(), packed_w_.memory.get_data_handle(),
                                  has_bias_ ? a.inputs[2]->raw() : nullptr, a.outputs[0]->raw());
  }

 private:
  const char* name_ = "onednn";
  dnnl::deconvolution_forward prim_;
  dnnl::memory::desc src_md_, dst_md_;
  onednn::ArgPool args_;
  bool has_bias_ = false;
};

}  // namespace

void register_cpu_onednn_conv_transpose(KernelRegistry& r) {
  r.add("ConvTranspose", "cpu", DType::kFloat32, OnednnConvTranspose::create);
}

}  // namespace tern
