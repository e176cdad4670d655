// QLinearMatMul on oneDNN's int8 matmul (VNNI where present): uint8 / int8 A [..., M, K] (leading
// dims folded into the rows), constant int8 B [K, N] with zero point 0, packed once; the
// requantisation inside the primitive (output scales a_scale * b_scale[n] / y_scale, per tensor
// or per column, A's and Y's zero points, rounding to nearest even, saturation);
// FusedQLinearMatMul's int32 bias (QDQ Gemm) added to the sums inside it too. uint8 or
// non-constant B, B zero points and runtime scales run onednn_qmatmul_dynamic.cpp's kernel (an
// int32 destination and an epilogue of our own); per-row A scales the reference kernel.
#include <string>

#include "backends/cpu/onednn/onednn_common.h"
#include "core/kernel_registry.h"

namespace tern {
namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

bool int8_type(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8;
}

class OnednnQMatMul final : public onednn::PackedWeightKernel {
 public:
  const char* name() const override { return name_.c_str(); }
  std::vector<PackedWeight> packed_weights() const override {
    if (!packed_w_.blob.data.raw()) return {};
    return {PackedWeight{3, packed_w_.blob}};  // QLinearMatMul's B is input 3
  }

  static Expected<std::unique_ptr<Kernel>> create(const OpContext& ctx) {
    TERN_RETURN_IF_ERROR(onednn::require_onednn_sizes(ctx));
    if (ctx.flag(FlagId::kDeterministicAlgorithms)) {
      return unsupported("oneDNN int8 matmul's split depends on the thread count");
    }
    const TensorInfo& a = ctx.inputs[0];
    const TensorInfo& b = ctx.inputs[3];
    if (!int8_type(a.dtype) || b.dtype != DType::kInt8 || !b.value || b.shape.size() != 2 ||
        a.shape.size() < 2 || a.shape.back() != b.shape[0] || !int8_type(ctx.outputs[0].dtype)) {
      return unsupported("oneDNN int8 matmul takes int8/uint8 [..., M, K] x constant int8 [K, N]");
    }
    TERN_RETURN_IF_ERROR(onednn::require_exact_int8(*b.value));
    const int64_t k = b.shape[0], n = b.shape[1];
    for (size_t i : {1, 2, 4, 5, 6, 7}) {
      if (!ctx.inputs[i].value)
        return unsupported("oneDNN int8 matmul: input ", i, " not constant");
    }
    const Tensor &as = *ctx.inputs[1].value, &az = *ctx.inputs[2].value, &bs = *ctx.inputs[4].value,
                 &bz = *ctx.inputs[5].value, &ys = *ctx.inputs[6].value, &yz = *ctx.inputs[7].value;
    if (as.numel() != 1 || az.numel() != 1 || ys.numel() != 1 || yz.numel() != 1 ||
        (bs.numel() != 1 && bs.numel() != n)) {
      return unsupported("oneDNN int8 matmul: per-row A scales or zero points");
    }
    for (int64_t i = 0; i < bz.numel(); ++i) {
      if (bz.int_at(i) != 0) return unsupported("oneDNN int8 matmul: B's zero point is not 0");
    }
    if (!(as.float_at(0) > 0) || !(ys.float_at(0) > 0)) {
      return unsupported("oneDNN int8 matmul: scales must be positive");
    }
    std::vector<float> scales(static_cast<size_t>(bs.numel()));
    for (int64_t i = 0; i < bs.numel(); ++i) {
      scales[static_cast<size_t>(i)] =
          static_cast<float>(as.float_at(0) * bs.float_at(i) / ys.float_at(0));
    }
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < a.shape.size(); ++d) rows *= a.shape[d];
    auto kernel = std::make_unique<OnednnQMatMul>();
    try {
      const dt at = a.dtype == DType::kInt8 ? dt::s8 : dt::u8;
      const dt yt = ctx.outputs[0].dtype == DType::kInt8 ? dt::s8 : dt::u8;
      dnnl::memory::desc a_md({rows, k}, at, tag::ab), y_md({rows, n}, yt, tag::ab);
      dnnl::memory::desc plain_w({k, n}, dt::s8, tag::ab), any_w({k, n}, dt::s8, tag::any);
      dnnl::primitive_attr attr = onednn::user_scratchpad_attr();
      attr.set_output_scales(scales.size() == 1 ? 0 : 1 << 1, scales);
      if (az.int_at(0) != 0) {
        attr.set_zero_points(DNNL_ARG_SRC, 0, {static_cast<int32_t>(az.int_at(0))});
      }
      if (yz.int_at(0) != 0) {
        attr.set_zero_points(DNNL_ARG_DST, 0, {static_cast<int32_t>(yz.int_at(0))});
      }
      // FusedQLinearMatMul's bias: int32 [N], added to the integer sums before the scales.
      const bool has_bias = ctx.has_input(8);
      if (has_bias && !ctx.inputs[8].value) {
        return unsupported("oneDNN int8 matmul: the bias is not constant");
      }
      dnnl::memory::desc bias_md({1, n}, dt::s32, tag::ab);
      auto desc = has_bias ? dnnl::matmul::desc(a_md, any_w, bias_md, y_md)
                           : dnnl::matmul::desc(a_md, any_w, y_md);
      dnnl::matmul::primitive_desc pd(desc, attr, onednn::engine());
      const std::string impl = pd.impl_info_str();
      if (impl.rfind("ref", 0) == 0) {
        return unsupported("oneDNN int8 matmul: only oneDNN's reference kernel takes this case");
      }
      kernel->name_ = std::string(onednn::impl_kernel_name(impl)) + " int8";
      kernel->prim_ = dnnl::matmul(pd);
      TERN_ASSIGN_OR_RETURN(kernel->packed_w_,
                            onednn::pack_weights(plain_w, pd.weights_desc(), b, ctx.weights));
      kernel->args_ = onednn::ArgPool::weighted(a_md, pd.weights_desc(),
                                                has_bias ? &bias_md : nullptr, y_md,
                                                pd.scratchpad_desc());
      if (has_bias) kernel->bias_ = *ctx.inputs[8].value;
    } catch (const dnnl::error& e) {
      return unsupported("oneDNN declined this int8 matmul: ", e.what());
    }
    return std::unique_ptr<Kernel>(std::move(kernel));
  }

  Status run(const KernelArgs& a, const ExecContext&) const override {
    return args_.execute_weighted(prim_, a.inputs[0]->raw(), packed_w_.memory.get_data_handle(),
                                  bias_.raw(), a.outputs[0]->raw());
  }

 private:
  std::string name_ = "onednn int8";
  dnnl::matmul prim_;
  onednn::ArgPool args_;
  Tensor bias_;  // FusedQLinearMatMul's (shares the constant's memory)
};

}  // namespace

TERN_REGISTRATION void register_cpu_onednn_qmatmul(KernelRegistry& r) {
  for (DType t : {DType::kUInt8, DType::kInt8}) {
    r.add("QLinearMatMul", "cpu", t, OnednnQMatMul::create);
    r.add("FusedQLinearMatMul", "cpu", t, OnednnQMatMul::create);
  }
}

}  // namespace tern
