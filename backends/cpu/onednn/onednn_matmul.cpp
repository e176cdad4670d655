// MatMul with constant 2-D weights ([..., M, K] x [K, N], the projections of transformer models)
// on oneDNN's matmul: leading dims fold into M, the weights are packed once into oneDNN's
// preferred layout. Other MatMuls fall through to the OpenBLAS kernel. FusedMatMul's bias and
// activation (Relu, erf GELU) run inside the primitive (bias argument, eltwise post-op).
#include "backends/cpu/onednn/onednn_common.h"
#include "core/kernel_registry.h"
#include "ops/fused_matmul.h"

namespace tern {
namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

class OnednnMatMul final : public onednn::PackedWeightKernel {
 public:
  const char* name() const override { return name_; }

  static Expected<std::unique_ptr<Kernel>> create(const OpContext& ctx) {
    TERN_RETURN_IF_ERROR(onednn::require_onednn_sizes(ctx));
    if (ctx.flag(FlagId::kDeterministicAlgorithms)) {
      return unsupported("oneDNN matmul's split depends on the thread count");
    }
    const TensorInfo& b = ctx.inputs[1];
    // bfloat16 (every input and the output) on oneDNN's bf16 kernel: bf16 products, float32
    // accumulation; other mixes run widened to float32 (widened_kernel.h).
    const DType t = ctx.inputs[0].dtype;
    if (t == DType::kBFloat16) TERN_RETURN_IF_ERROR(onednn::require_native_bf16());
    bool same = t == DType::kFloat32 || t == DType::kBFloat16;
    for (const auto* list : {&ctx.inputs, &ctx.outputs}) {
      for (const TensorInfo& x : *list) same = same && (!x.present || x.dtype == t);
    }
    if (!b.value || b.shape.size() != 2 || !same || ctx.inputs[0].shape.size() < 2) {
      return unsupported(
          "oneDNN matmul here takes float32 or bfloat16 [..., M, K] x constant [K, N]");
    }
    const dt adt = t == DType::kBFloat16 ? dt::bf16 : dt::f32;
    ops::FusedMatMulParams fp;
    if (ctx.node->op_type == "FusedMatMul") {
      TERN_ASSIGN_OR_RETURN(fp, ops::parse_fused_matmul(ctx, true));
    } else {
      TERN_ASSIGN_OR_RETURN(fp.mm, ops::parse_matmul(ctx));
    }
    const ops::MatMulParams& p = fp.mm;
    const int64_t rows = static_cast<int64_t>(p.a_offsets.size()) * p.M;
    if (rows == 0 || p.N == 0 || p.K == 0) return unsupported("empty MatMul");
    auto k = std::make_unique<OnednnMatMul>();
    try {
      k->a_md_ = dnnl::memory::desc({rows, p.K}, adt, tag::ab);
      k->y_md_ = dnnl::memory::desc({rows, p.N}, adt, tag::ab);
      dnnl::memory::desc plain_w({p.K, p.N}, adt, tag::ab);
      dnnl::memory::desc any_w({p.K, p.N}, adt, tag::any);
      dnnl::primitive_attr attr = onednn::user_scratchpad_attr();
      if (fp.act != ops::MatMulAct::kNone) {
        dnnl::post_ops po;
        po.append_eltwise(1.0f,
                          fp.act == ops::MatMulAct::kRelu ? dnnl::algorithm::eltwise_relu
                                                          : dnnl::algorithm::eltwise_gelu_erf,
                          0.0f, 0.0f);
        attr.set_post_ops(po);
      }
      k->has_bias_ = fp.has_bias;
      if (fp.has_bias) k->bias_md_ = dnnl::memory::desc({1, p.N}, adt, tag::ab);
      auto desc = fp.has_bias ? dnnl::matmul::desc(k->a_md_, any_w, k->bias_md_, k->y_md_)
                              : dnnl::matmul::desc(k->a_md_, any_w, k->y_md_);
      dnnl::matmul::primitive_desc pd(desc, attr, onednn::engine());
      k->name_ = onednn::impl_kernel_name(pd.impl_info_str());
      k->prim_ = dnnl::matmul(pd);
      TERN_ASSIGN_OR_RETURN(k->packed_w_, onednn::pack_weights(plain_w, pd.weights_desc(),
                                                               ctx.inputs[1], ctx.weights));
      k->args_ = onednn::ArgPool::weighted(k->a_md_, pd.weights_desc(),
                                           fp.has_bias ? &k->bias_md_ : nullptr, k->y_md_,
                                           pd.scratchpad_desc());
    } catch (const dnnl::error& e) {
      return unsupported("oneDNN declined this matmul: ", e.what());
    }
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Status run(const KernelArgs& a, const ExecContext&) const override {
    return args_.execute_weighted(prim_, a.inputs[0]->raw(), packed_w_.memory.get_data_handle(),
                                  has_bias_ ? a.inputs[2]->raw() : nullptr, a.outputs[0]->raw());
  }

 private:
  const char* name_ = "onednn";
  dnnl::matmul prim_;
  dnnl::memory::desc a_md_, y_md_, bias_md_;
  bool has_bias_ = false;
  onednn::ArgPool args_;
};

}  // namespace

void register_cpu_onednn_matmul(KernelRegistry& r) {
  // Tried before the OpenBLAS kernel, which takes every case this one declines.
  for (DType t : {DType::kFloat32, DType::kBFloat16}) {
    r.add("MatMul", "cpu", t, OnednnMatMul::create, /*priority=*/1);
    r.add("FusedMatMul", "cpu", t, OnednnMatMul::create, /*priority=*/1);
  }
}

}  // namespace tern
