// Conv on oneDNN: plain NC(D)HW activations, weights packed once into the primitive's layout.
#include "backends/cpu/onednn/onednn_common.h"
#include "core/kernel_registry.h"
#include "ops/conv.h"

namespace tern {
namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

class OnednnConv final : public Kernel {
 public:
  const char* name() const override { return "onednn"; }

  static Expected<std::unique_ptr<Kernel>> create(const OpContext& ctx) {
    if (ctx.flag(FlagId::kDeterministicAlgorithms)) {
      // oneDNN picks its work split from the thread count, so bits may change with it.
      return unsupported("oneDNN Conv is not deterministic across thread counts");
    }
    TERN_ASSIGN_OR_RETURN(ops::ConvParams p, ops::parse_conv(ctx));
    auto k = std::make_unique<OnednnConv>();
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
    try {
      k->src_md_ =
          dnnl::memory::desc(onednn::to_dims(p.x), dt::f32, onednn::activation_tag(p.x.size()));
      k->dst_md_ =
          dnnl::memory::desc(onednn::to_dims(p.y), dt::f32, onednn::activation_tag(p.y.size()));
      dnnl::memory::desc plain_w(wdims, dt::f32, wtag);
      const Tensor* wconst = ctx.inputs[1].value;
      // Constant weights: let oneDNN pick its layout and pack once. Otherwise read them plain.
      dnnl::memory::desc w_md = wconst ? dnnl::memory::desc(wdims, dt::f32, tag::any) : plain_w;
      dnnl::memory::desc b_md;
      if (p.has_bias) b_md = dnnl::memory::desc({p.w[0]}, dt::f32, tag::x);
      auto desc = dnnl::convolution_forward::desc(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, k->src_md_, w_md,
          b_md, k->dst_md_, onednn::to_dims(p.win.strides), dil, onednn::to_dims(p.win.pads_begin),
          onednn::to_dims(p.win.pads_end));
      dnnl::convolution_forward::primitive_desc pd(desc, onednn::user_scratchpad_attr(),
                                                   onednn::engine());
      k->prim_ = dnnl::convolution_forward(pd);
      k->scratch_md_ = pd.scratchpad_desc();
      k->plain_w_md_ = plain_w;
      k->has_bias_ = p.has_bias;
      if (wconst) {
        TERN_ASSIGN_OR_RETURN(k->packed_w_,
                              onednn::pack_weights(plain_w, pd.weights_desc(), *wconst));
        k->packed_ = true;
      }
    } catch (const dnnl::error& e) {
      return unsupported("oneDNN declined this convolution: ", e.what());
    }
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Status run(const KernelArgs& a, const ExecContext&) const override {
    auto& eng = onednn::engine();
    std::unordered_map<int, dnnl::memory> args;
    args.emplace(DNNL_ARG_SRC, dnnl::memory(src_md_, eng, a.inputs[0]->raw()));
    args.emplace(DNNL_ARG_WEIGHTS,
                 packed_ ? packed_w_ : dnnl::memory(plain_w_md_, eng, a.inputs[1]->raw()));
    if (has_bias_) {
      args.emplace(DNNL_ARG_BIAS,
                   dnnl::memory(dnnl::memory::desc({a.inputs[2]->shape()[0]},
                                                   dnnl::memory::data_type::f32, tag::x),
                                eng, a.inputs[2]->raw()));
    }
    args.emplace(DNNL_ARG_DST, dnnl::memory(dst_md_, eng, a.outputs[0]->raw()));
    return onednn::execute(prim_, scratch_md_, args);
  }

 private:
  dnnl::convolution_forward prim_;
  dnnl::memory::desc src_md_, dst_md_, plain_w_md_, scratch_md_;
  dnnl::memory packed_w_;
  bool packed_ = false, has_bias_ = false;
};

}  // namespace

void register_cpu_onednn_conv(KernelRegistry& r) {
  r.add("Conv", "cpu", DType::kFloat32, OnednnConv::create);
}

}  // namespace tern
