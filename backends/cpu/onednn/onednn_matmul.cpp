// MatMul with constant 2-D weights ([..., M, K] x [K, N], the projections of transformer models)
// on oneDNN's matmul: leading dims fold into M, the weights are packed once into oneDNN's
// preferred layout. Other MatMuls fall through to the OpenBLAS kernel. FusedMatMul's bias and
// activation (Relu, erf GELU) run inside the primitive (bias argument, eltwise post-op).
//
// bfloat16: a bf16 node (every input and the output bf16) runs oneDNN's bf16 kernel, and so does
// a float32 MatMul, FusedMatMul or Gemm under cpu.matmul.allow_bf16 (A rounded to bf16 into the
// workspace, B packed as bf16, float32 accumulation and output), on CPUs with AVX-512 BF16 or
// AMX. Gemm comes here only for bf16 (float32 Gemms have packed_gemm): B constant (transB
// either way), no transA, alpha 1, C absent or a constant row.
#include <cstring>
#include <string>

#include "backends/cpu/blas_verbose.h"
#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/onednn/onednn_common.h"
#include "backends/cpu/widened_kernel.h"
#include "core/kernel_registry.h"
#include "ops/fused_matmul.h"
#include "ops/matmul.h"

namespace tern {
namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

class OnednnMatMul final : public onednn::PackedWeightKernel {
 public:
  const char* name() const override { return name_.c_str(); }
  size_t workspace_bytes() const override { return round_a_ ? a_elems_ * sizeof(uint16_t) : 0; }

  static Expected<std::unique_ptr<Kernel>> create(const OpContext& ctx) {
    TERN_RETURN_IF_ERROR(onednn::require_onednn_sizes(ctx));
    if (ctx.flag(FlagId::kDeterministicAlgorithms)) {
      return unsupported("oneDNN matmul's split depends on the thread count");
    }
    const TensorInfo& b = ctx.inputs[1];
    const DType t = ctx.inputs[0].dtype;
    const bool gemm = ctx.node->op_type == "Gemm";
    bool same = t == DType::kFloat32 || t == DType::kBFloat16;
    for (const auto* list : {&ctx.inputs, &ctx.outputs}) {
      for (const TensorInfo& x : *list) same = same && (!x.present || x.dtype == t);
    }
    if (!b.value || b.shape.size() != 2 || !same || ctx.inputs[0].shape.size() < 2) {
      return unsupported(
          "oneDNN matmul here takes float32 or bfloat16 [..., M, K] x constant [K, N]");
    }
    // bf16 products: the node's own type, or float32 under cpu.matmul.allow_bf16.
    const bool bf16_node = t == DType::kBFloat16;
    const bool round_a = !bf16_node && ctx.flag(FlagId::kCpuMatmulAllowBf16);
    if (bf16_node || round_a) TERN_RETURN_IF_ERROR(onednn::require_native_bf16());
    if (gemm && !bf16_node && !round_a) {
      return unsupported("oneDNN matmul takes float32 Gemm in bf16 only (packed_gemm otherwise)");
    }
    const dt adt = bf16_node ? dt::bf16 : dt::f32;             // A and Y in memory
    const dt cdt = bf16_node || round_a ? dt::bf16 : dt::f32;  // what the primitive reads
    auto k = std::make_unique<OnednnMatMul>();
    ops::FusedMatMulParams fp;
    bool trans_b = false;
    int64_t rows = 0;
    if (gemm) {
      TERN_ASSIGN_OR_RETURN(ops::GemmParams g, ops::parse_gemm(ctx));
      if (g.trans_a || g.alpha != 1.0f) return unsupported("oneDNN Gemm: transA or alpha != 1");
      trans_b = g.trans_b;
      rows = g.M;
      fp.mm.N = g.N;
      fp.mm.K = g.K;
      if (!g.c_shape.empty() && g.beta != 0.0f) {
        // C as a float32 bias row: beta * C, made once.
        const Tensor* c = ctx.inputs[2].value;
        const int64_t n = numel(g.c_shape);
        if (!c || (n != g.N && n != 1) || (g.c_shape.size() == 2 && g.c_shape[0] != 1)) {
          return unsupported("oneDNN Gemm: C is not a constant row");
        }
        TERN_ASSIGN_OR_RETURN(k->gemm_bias_, Tensor::allocate(DType::kFloat32, {1, g.N}));
        for (int64_t j = 0; j < g.N; ++j) {
          k->gemm_bias_.data<float>()[j] = g.beta * static_cast<float>(c->float_at(n == 1 ? 0 : j));
        }
        fp.has_bias = true;
      }
    } else {
      if (ctx.node->op_type == "FusedMatMul") {
        TERN_ASSIGN_OR_RETURN(fp, ops::parse_fused_matmul(ctx, true));
      } else {
        TERN_ASSIGN_OR_RETURN(fp.mm, ops::parse_matmul(ctx));
      }
      rows = static_cast<int64_t>(fp.mm.a_offsets.size()) * fp.mm.M;
    }
    const ops::MatMulParams& p = fp.mm;
    if (rows == 0 || p.N == 0 || p.K == 0) return unsupported("empty MatMul");
    try {
      k->a_md_ = dnnl::memory::desc({rows, p.K}, cdt, tag::ab);
      k->y_md_ = dnnl::memory::desc({rows, p.N}, adt, tag::ab);
      dnnl::memory::desc plain_w({p.K, p.N}, adt, trans_b ? tag::ba : tag::ab);
      dnnl::memory::desc any_w({p.K, p.N}, cdt, tag::any);
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
      if (fp.has_bias) {
        k->bias_md_ = dnnl::memory::desc({1, p.N}, gemm ? dt::f32 : adt, tag::ab);
      }
      auto desc = fp.has_bias ? dnnl::matmul::desc(k->a_md_, any_w, k->bias_md_, k->y_md_)
                              : dnnl::matmul::desc(k->a_md_, any_w, k->y_md_);
      dnnl::matmul::primitive_desc pd(desc, attr, onednn::engine());
      k->name_ = onednn::impl_kernel_name(pd.impl_info_str());
      if (round_a) k->name_ += " bf16";  // float32 computed in bf16 (cpu.matmul.allow_bf16)
      k->label_ = "onednn:" + k->name_;
      k->op_ = ctx.node->op_type;
      k->shape_ = GemmShape{false, trans_b, rows, p.N, p.K};
      k->prim_ = dnnl::matmul(pd);
      TERN_ASSIGN_OR_RETURN(k->packed_w_, onednn::pack_weights(plain_w, pd.weights_desc(),
                                                               ctx.inputs[1], ctx.weights));
      k->args_ = onednn::ArgPool::weighted(k->a_md_, pd.weights_desc(),
                                           fp.has_bias ? &k->bias_md_ : nullptr, k->y_md_,
                                           pd.scratchpad_desc());
    } catch (const dnnl::error& e) {
      return unsupported("oneDNN declined this matmul: ", e.what());
    }
    k->gemm_ = gemm;
    k->round_a_ = round_a;
    k->a_elems_ = static_cast<size_t>(rows * p.K);
    k->vec_ = &vec_ops(effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability)));
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Status run(const KernelArgs& a, const ExecContext& exec) const override {
    void* x = a.inputs[0]->raw();
    if (round_a_) {  // A as bf16, in the workspace
      narrow_from_f32(*vec_, DType::kBFloat16, a.inputs[0]->data<float>(), a.workspace,
                      static_cast<int64_t>(a_elems_), exec.num_threads);
      x = a.workspace;
    }
    void* bias = !has_bias_ ? nullptr
                 : gemm_    ? const_cast<void*>(gemm_bias_.raw())
                            : a.inputs[2]->raw();
    BlasVerbose verbose(exec, op_.c_str(), label_.c_str(), shape_);
    return args_.execute_weighted(prim_, x, packed_w_.memory.get_data_handle(), bias,
                                  a.outputs[0]->raw());
  }

 private:
  std::string name_ = "onednn";
  std::string label_, op_;  // blas.verbose: "onednn:<kernel>", the op type
  GemmShape shape_;         // rows of A (batches folded in) x N x K
  dnnl::matmul prim_;
  dnnl::memory::desc a_md_, y_md_, bias_md_;
  bool has_bias_ = false, gemm_ = false, round_a_ = false;
  size_t a_elems_ = 0;
  Tensor gemm_bias_;  // Gemm: beta * C as a float32 row
  const VecOps* vec_ = nullptr;
  onednn::ArgPool args_;
};

}  // namespace

TERN_REGISTRATION void register_cpu_onednn_matmul(KernelRegistry& r) {
  // Tried before the OpenBLAS kernel, which takes every case this one declines; after
  // packed_gemm for float32 (it declines under cpu.matmul.allow_bf16 where bf16 runs here).
  for (DType t : {DType::kFloat32, DType::kBFloat16}) {
    r.add("MatMul", "cpu", t, OnednnMatMul::create, /*priority=*/1);
    r.add("FusedMatMul", "cpu", t, OnednnMatMul::create, /*priority=*/1);
    r.add("Gemm", "cpu", t, OnednnMatMul::create, /*priority=*/1);
  }
}

}  // namespace tern
