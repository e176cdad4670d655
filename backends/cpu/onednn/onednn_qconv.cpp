// QLinearConv on oneDNN's int8 convolution (VNNI's VPDPBUSD where the CPU has it): uint8 / int8
// source, int8 weights with zero point 0 (symmetric, as quantizers make them), int32 bias, and
// the requantisation inside the primitive: per-tensor or per-channel output scales
// x_scale * w_scale / y_scale, the source and destination zero points, FusedQLinearConv's Relu as
// a post-op, rounding to nearest even and saturation to the output type.
// Activations come as the plan laid them out (channels-last between int8 convolutions, plain at
// the chain's ends); where the primitive chose another layout the source is reordered into it in
// the workspace, and the destination back. Constant scales,
// zero points, weights and bias only; anything else runs the reference kernel.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/onednn/onednn_common.h"
#include "backends/cpu/quantize_rows.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "ops/conv_integer.h"

namespace tern {
namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

dt onednn_type(DType t) {
  return t == DType::kInt8 ? dt::s8 : dt::u8;
}

class OnednnQConv final : public onednn::PackedWeightKernel {
 public:
  const char* name() const override { return name_.c_str(); }
  size_t workspace_bytes() const override { return src_bytes_ + dst_bytes_; }
  std::vector<PackedWeight> packed_weights() const override {
    if (!packed_w_.blob.data.raw()) return {};
    return {PackedWeight{3, packed_w_.blob}};  // QLinearConv's w is input 3
  }

  static Expected<std::unique_ptr<Kernel>> create(const OpContext& ctx) {
    TERN_RETURN_IF_ERROR(onednn::require_onednn_sizes(ctx));
    if (ctx.flag(FlagId::kDeterministicAlgorithms)) {
      return unsupported("oneDNN int8 Conv is not deterministic across thread counts");
    }
    TERN_ASSIGN_OR_RETURN(ops::QConvParams p, ops::parse_qconv(ctx));
    if (!p.linear) return unsupported("oneDNN int8 Conv: ConvInteger runs the reference kernel");
    for (size_t i : {1, 2, 3, 4, 5, 6, 7, 8}) {
      if (ctx.has_input(i) && !ctx.inputs[i].value) {
        return unsupported("oneDNN int8 Conv: input ", i, " is not a constant");
      }
    }
    if (p.w_type != DType::kInt8) return unsupported("oneDNN int8 Conv: uint8 weights");
    TERN_RETURN_IF_ERROR(onednn::require_exact_int8(*ctx.inputs[3].value));
    if (const Tensor* wz = ctx.has_input(5) ? ctx.inputs[5].value : nullptr) {
      for (int64_t i = 0; i < wz->numel(); ++i) {
        if (wz->int_at(i) != 0) return unsupported("oneDNN int8 Conv: weight zero point not 0");
      }
    }
    const ops::ConvParams& c = p.conv;
    const int64_t m = c.w[0];
    const Tensor& ws = *ctx.inputs[4].value;
    const double xs = ctx.inputs[1].value->float_at(0), ys = ctx.inputs[6].value->float_at(0);
    if (!(ys > 0) || !(xs > 0)) return unsupported("oneDNN int8 Conv: scales must be positive");
    std::vector<float> scales(static_cast<size_t>(ws.numel()));
    for (int64_t i = 0; i < ws.numel(); ++i) {
      scales[static_cast<size_t>(i)] = static_cast<float>(xs * ws.float_at(i) / ys);
    }
    const int32_t x_zero =
        ctx.has_input(2) ? static_cast<int32_t>(ctx.inputs[2].value->int_at(0)) : 0;
    const int32_t y_zero = static_cast<int32_t>(ctx.inputs[7].value->int_at(0));
    auto k = std::make_unique<OnednnQConv>();
    try {
      const size_t s = c.win.spatial;
      dnnl::memory::dims dil;
      for (int64_t d : c.win.dilations) dil.push_back(d - 1);
      // The planned layouts: plain, or channels-last / blocked (int8 chains, core/plan/layout).
      k->user_src_md_ = dnnl::memory::desc(onednn::to_dims(c.x), onednn_type(p.x_type),
                                           onednn::layout_tag(c.x.size(), ctx.inputs[0].block));
      k->user_dst_md_ = dnnl::memory::desc(onednn::to_dims(c.y), onednn_type(p.y_type),
                                           onednn::layout_tag(c.y.size(), ctx.outputs[0].block));
      dnnl::memory::desc any_src(onednn::to_dims(c.x), onednn_type(p.x_type), tag::any);
      dnnl::memory::desc any_dst(onednn::to_dims(c.y), onednn_type(p.y_type), tag::any);
      dnnl::memory::dims wdims;
      if (c.group > 1) {
        wdims = {c.group, m / c.group, c.w[1]};
        wdims.insert(wdims.end(), c.w.begin() + 2, c.w.end());
      } else {
        wdims = onednn::to_dims(c.w);
      }
      const tag wtag = c.group > 1 ? (s == 1   ? tag::goiw
                                      : s == 2 ? tag::goihw
                                               : tag::goidhw)
                                   : (s == 1   ? tag::oiw
                                      : s == 2 ? tag::oihw
                                               : tag::oidhw);
      dnnl::memory::desc plain_w(wdims, dt::s8, wtag), any_w(wdims, dt::s8, tag::any);
      dnnl::memory::desc b_md;
      if (ctx.has_input(8)) b_md = dnnl::memory::desc({m}, dt::s32, tag::x);
      dnnl::primitive_attr attr = onednn::user_scratchpad_attr();
      attr.set_output_scales(scales.size() == 1 ? 0 : 1 << 1, scales);
      if (x_zero != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {x_zero});
      if (y_zero != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {y_zero});
      if (p.relu) {
        dnnl::post_ops po;
        po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
        attr.set_post_ops(po);
      }
      auto desc = dnnl::convolution_forward::desc(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, any_src, any_w,
          b_md, any_dst, onednn::to_dims(c.win.strides), dil, onednn::to_dims(c.win.pads_begin),
          onednn::to_dims(c.win.pads_end));
      dnnl::convolution_forward::primitive_desc pd(desc, attr, onednn::engine());
      const std::string impl = pd.impl_info_str();
      if (impl.rfind("ref", 0) == 0) {
        return unsupported("oneDNN int8 Conv: only oneDNN's reference kernel takes this case");
      }
      k->name_ = std::string(onednn::impl_kernel_name(impl)) + " int8";
      k->src_md_ = pd.src_desc();
      k->dst_md_ = pd.dst_desc();
      if (k->src_md_ != k->user_src_md_) {
        k->src_reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(
            onednn::engine(), k->user_src_md_, onednn::engine(), k->src_md_));
        k->src_bytes_ = (k->src_md_.get_size() + 63) / 64 * 64;
      }
      if (k->dst_md_ != k->user_dst_md_) {
        k->dst_reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(
            onednn::engine(), k->dst_md_, onednn::engine(), k->user_dst_md_));
        k->dst_bytes_ = k->dst_md_.get_size();
      }
      k->prim_ = dnnl::convolution_forward(pd);
      TERN_ASSIGN_OR_RETURN(k->packed_w_, onednn::pack_weights(plain_w, pd.weights_desc(),
                                                               ctx.inputs[3], ctx.weights));
      if (ctx.has_input(8)) k->bias_ = *ctx.inputs[8].value;
      k->args_ = onednn::ArgPool::weighted(k->src_md_, pd.weights_desc(),
                                           ctx.has_input(8) ? &b_md : nullptr, k->dst_md_,
                                           pd.scratchpad_desc());
    } catch (const dnnl::error& e) {
      return unsupported("oneDNN declined this int8 convolution: ", e.what());
    }
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Status run(const KernelArgs& a, const ExecContext&) const override {
    auto* ws = static_cast<uint8_t*>(a.workspace);
    void* src = a.inputs[0]->raw();
    void* dst = dst_bytes_ ? ws + src_bytes_ : a.outputs[0]->raw();
    if (src_bytes_) {
      TERN_RETURN_IF_ERROR(onednn::run_reorder(src_reorder_, user_src_md_, src, src_md_, ws));
      src = ws;
    }
    TERN_RETURN_IF_ERROR(args_.execute_weighted(prim_, src, packed_w_.memory.get_data_handle(),
                                                const_cast<void*>(bias_.raw()), dst));
    if (!dst_bytes_) return Status::ok();
    return onednn::run_reorder(dst_reorder_, dst_md_, dst, user_dst_md_, a.outputs[0]->raw());
  }

 private:
  std::string name_ = "onednn int8";
  dnnl::convolution_forward prim_;
  dnnl::reorder src_reorder_, dst_reorder_;
  dnnl::memory::desc user_src_md_, src_md_, user_dst_md_, dst_md_;
  onednn::ArgPool args_;
  Tensor bias_;  // int32 [M], from the model (a view)
  size_t src_bytes_ = 0, dst_bytes_ = 0;
};

// Where the int8 kernel declines (no VNNI with full-range weights, uint8 weights or a weight zero
// point), a QLinearConv runs as the QDQ graph it stands for: the source dequantised into the
// workspace, the best float32 convolution of the CPU backend (oneDNN's) on weights and bias
// dequantised once, the result requantised (Relu first for FusedQLinearConv). What ONNX Runtime's
// own float QDQ reference computes, at float32 speed instead of the int8 reference's.
class QConvViaFloat final : public Kernel {
 public:
  const char* name() const override { return name_.c_str(); }
  size_t workspace_bytes() const override {
    return x_bytes_ + y_bytes_ + inner_->workspace_bytes();
  }
  size_t packed_bytes() const override { return inner_->packed_bytes(); }

  static Expected<std::unique_ptr<Kernel>> create(const OpContext& ctx) {
    TERN_ASSIGN_OR_RETURN(ops::QConvParams p, ops::parse_qconv(ctx));
    if (!p.linear) return unsupported("qconv_via_float: QLinearConv only");
    for (size_t i : {1, 2, 3, 4, 5, 6, 7, 8}) {
      if (ctx.has_input(i) && !ctx.inputs[i].value) {
        return unsupported("qconv_via_float: input ", i, " is not a constant");
      }
    }
    if (ctx.inputs[0].block != ctx.outputs[0].block) {
      return unsupported("qconv_via_float: source and result in different layouts");
    }
    auto k = std::make_unique<QConvViaFloat>();
    const ops::ConvParams& c = p.conv;
    const int64_t m = c.w[0], per = numel(c.w) / m;
    const Tensor& w = *ctx.inputs[3].value;
    const Tensor* wz = ctx.has_input(5) ? ctx.inputs[5].value : nullptr;
    const Tensor& ws = *ctx.inputs[4].value;
    const double xs = ctx.inputs[1].value->float_at(0);
    auto at = [](const Tensor& t, int64_t i) {
      return t.numel() == 1 ? t.float_at(0) : t.float_at(i);
    };
    TERN_ASSIGN_OR_RETURN(k->w_, Tensor::allocate(DType::kFloat32, c.w));
    TERN_ASSIGN_OR_RETURN(k->b_, Tensor::allocate(DType::kFloat32, {m}));
    for (int64_t o = 0; o < m; ++o) {
      const double zero = wz ? at(*wz, o) : 0.0, scale = at(ws, o);
      for (int64_t i = 0; i < per; ++i) {
        k->w_.data<float>()[o * per + i] =
            static_cast<float>((w.float_at(o * per + i) - zero) * scale);
      }
      k->b_.data<float>()[o] = static_cast<float>(
          ctx.has_input(8) ? ctx.inputs[8].value->float_at(o) * xs * scale : 0.0);
    }
    k->x_scale_ = static_cast<float>(xs);
    k->x_zero_ = ctx.has_input(2) ? static_cast<float>(ctx.inputs[2].value->int_at(0)) : 0.0f;
    k->y_scale_ = static_cast<float>(ctx.inputs[6].value->float_at(0));
    k->y_zero_ = static_cast<float>(ctx.inputs[7].value->int_at(0));
    k->x_type_ = p.x_type;
    k->y_type_ = p.y_type;
    k->relu_ = p.relu;
    k->rows_ = &quantize_rows(effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability)));
    // The float convolution's context: the node's geometry, float32 tensors in the planned layouts.
    k->node_ = *ctx.node;
    k->node_.op_type = "Conv";
    k->node_.attrs = Attributes();
    for (const char* a : {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}) {
      if (const Attribute* v = ctx.node->attrs.find(a)) k->node_.attrs.set(a, *v);
    }
    OpContext fc = ctx;
    fc.node = &k->node_;
    fc.weights = nullptr;  // the float weights are this kernel's own
    fc.inputs = {TensorInfo{true, DType::kFloat32, c.x, nullptr},
                 TensorInfo{true, DType::kFloat32, c.w, &k->w_},
                 TensorInfo{true, DType::kFloat32, {m}, &k->b_}};
    fc.inputs[0].block = ctx.inputs[0].block;
    fc.input_names = {ctx.input_names[0], ctx.input_names[3], "bias"};
    fc.outputs = {TensorInfo{true, DType::kFloat32, c.y, nullptr}};
    fc.outputs[0].block = ctx.outputs[0].block;
    std::string reasons;
    for (KernelFactory f : KernelRegistry::global().find("Conv", "cpu", DType::kFloat32)) {
      auto inner = f(fc);
      if (inner) {
        k->inner_ = std::move(*inner);
        break;
      }
      reasons += "; " + inner.status().message();
    }
    if (!k->inner_) return unsupported("qconv_via_float: no float32 convolution", reasons);
    k->name_ = str_cat("qconv_via_float(", k->inner_->name(), ")");
    k->x_bytes_ = (static_cast<size_t>(numel(c.x)) * sizeof(float) + 63) / 64 * 64;
    k->y_bytes_ = (static_cast<size_t>(numel(c.y)) * sizeof(float) + 63) / 64 * 64;
    k->x_shape_ = c.x;
    k->y_shape_ = c.y;
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Status run(const KernelArgs& a, const ExecContext& exec) const override {
    auto* ws = static_cast<uint8_t*>(a.workspace);
    auto* xf = reinterpret_cast<float*>(ws);
    auto* yf = reinterpret_cast<float*>(ws + x_bytes_);
    const int64_t nx = numel(x_shape_), ny = numel(y_shape_);
    dequantize_tensor(*rows_, a.inputs[0]->raw(), x_type_, xf, nx, x_scale_, x_zero_,
                      exec.num_threads);
    Tensor xt = Tensor::wrap(DType::kFloat32, x_shape_, xf, nullptr);
    Tensor yt = Tensor::wrap(DType::kFloat32, y_shape_, yf, nullptr);
    KernelArgs inner;
    inner.inputs = {&xt, &w_, &b_};
    inner.outputs = {&yt};
    inner.workspace = ws + x_bytes_ + y_bytes_;
    TERN_RETURN_IF_ERROR(inner_->run(inner, exec));
    // Requantised as QuantizeLinear does (Relu first: FusedQLinearConv).
    if (relu_) {
      parallel_for(ny, 1 << 14, exec.num_threads, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) yf[i] = std::max(yf[i], 0.0f);
      });
    }
    quantize_tensor(*rows_, yf, a.outputs[0]->raw(), y_type_, ny, y_scale_, y_zero_,
                    exec.num_threads);
    return Status::ok();
  }

 private:
  std::string name_;
  Node node_;
  Tensor w_, b_;
  std::unique_ptr<Kernel> inner_;
  float x_scale_ = 1, x_zero_ = 0, y_scale_ = 1, y_zero_ = 0;
  DType x_type_ = DType::kUInt8, y_type_ = DType::kUInt8;
  bool relu_ = false;
  const QuantizeRows* rows_ = nullptr;
  size_t x_bytes_ = 0, y_bytes_ = 0;
  Shape x_shape_, y_shape_;
};

}  // namespace

TERN_REGISTRATION void register_cpu_onednn_qconv(KernelRegistry& r) {
  for (DType t : {DType::kUInt8, DType::kInt8}) {
    r.add("QLinearConv", "cpu", t, OnednnQConv::create);
    r.add("FusedQLinearConv", "cpu", t, OnednnQConv::create);
    // After the int8 kernel, before Tern's own portable int8 GEMM (priority -2): oneDNN's float32
    // convolution beats it by far where oneDNN's int8 one cannot run.
    r.add("QLinearConv", "cpu", t, QConvViaFloat::create, -1);
    r.add("FusedQLinearConv", "cpu", t, QConvViaFloat::create, -1);
  }
}

}  // namespace tern
