// QLinearMatMul / FusedQLinearMatMul as the QDQ graph they stand for, where no int8 kernel takes
// them on x86 (no VNNI: oneDNN's int8 matmuls would saturate 16-bit pair sums and decline; Tern's
// own int8 GEMM has no x86 vector path): A (and a B read at run time) dequantised into the
// workspace with the QuantizeLinear kernels' per-ISA rows, the CPU backend's best float32 MatMul
// (a constant B dequantised once, which that kernel then packs), FusedQLinearMatMul's bias added
// in float32, the result quantised back. What the unfused DequantizeLinear -> MatMul ->
// QuantizeLinear computes, at float32 speed. Scales and zero points constant, per tensor (B's
// may be per column when B is constant).
#include <algorithm>

#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/quantize_rows.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

bool int8_type(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8;
}

size_t rounded(int64_t floats) {
  return (static_cast<size_t>(floats) * sizeof(float) + 63) / 64 * 64;
}

class QMatMulViaFloat final : public Kernel {
 public:
  const char* name() const override { return name_.c_str(); }
  size_t workspace_bytes() const override {
    return a_bytes_ + b_bytes_ + y_bytes_ + inner_->workspace_bytes();
  }
  // The float B (dequantised once) and whatever the inner kernel packs from it.
  size_t packed_bytes() const override { return inner_->packed_bytes() + b_float_.byte_size(); }

  static Expected<std::unique_ptr<Kernel>> create(const OpContext& ctx) {
    TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
    const bool fused = ctx.node->op_type == "FusedQLinearMatMul";
    const TensorInfo &a = ctx.inputs[0], &b = ctx.inputs[3];
    if (!int8_type(a.dtype) || !int8_type(b.dtype) || !int8_type(ctx.outputs[0].dtype)) {
      return unsupported("qmatmul_via_float: uint8 / int8 operands and result");
    }
    for (size_t i : {1, 2, 4, 5, 6, 7, 8}) {
      if (i == 8 && !fused) continue;
      if (!ctx.has_input(i) || !ctx.inputs[i].value) {
        return unsupported("qmatmul_via_float: input ", i, " is not a constant");
      }
    }
    for (size_t i : {1, 2, 6, 7}) {
      if (ctx.inputs[i].value->numel() != 1) {
        return unsupported("qmatmul_via_float: per-row scales or zero points of A");
      }
    }
    const Tensor &bs = *ctx.inputs[4].value, &bz = *ctx.inputs[5].value;
    if (b.shape.size() < 2 || bs.numel() != bz.numel() ||
        (bs.numel() != 1 && (!b.value || bs.numel() != b.shape.back()))) {
      return unsupported("qmatmul_via_float: B's scale per tensor, or per column of a constant B");
    }
    auto k = std::make_unique<QMatMulViaFloat>();
    const int64_t n = b.shape.back();
    k->rows_ = &quantize_rows(effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability)));
    k->vec_ = &vec_ops(effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability)));
    k->a_ = {a.dtype, static_cast<float>(ctx.inputs[1].value->float_at(0)),
             static_cast<float>(ctx.inputs[2].value->int_at(0))};
    k->b_ = {b.dtype, static_cast<float>(bs.float_at(0)), static_cast<float>(bz.int_at(0))};
    k->y_ = {ctx.outputs[0].dtype, static_cast<float>(ctx.inputs[6].value->float_at(0)),
             static_cast<float>(ctx.inputs[7].value->int_at(0))};
    if (b.value) {  // dequantised once, per column where the scales are
      TERN_ASSIGN_OR_RETURN(k->b_float_, Tensor::allocate(DType::kFloat32, b.shape));
      float* bf = k->b_float_.data<float>();
      for (int64_t i = 0; i < numel(b.shape); ++i) {
        const int64_t c = bs.numel() == 1 ? 0 : i % n;
        bf[i] = (static_cast<float>(b.value->int_at(i)) - static_cast<float>(bz.int_at(c))) *
                static_cast<float>(bs.float_at(c));
      }
    }
    if (fused) {  // int32 bias in units of a_scale * b_scale[n], as float32
      k->bias_.resize(static_cast<size_t>(n));
      const Tensor& bias = *ctx.inputs[8].value;
      for (int64_t j = 0; j < n; ++j) {
        k->bias_[static_cast<size_t>(j)] = static_cast<float>(static_cast<double>(bias.int_at(j)) *
                                                              ctx.inputs[1].value->float_at(0) *
                                                              bs.float_at(bs.numel() == 1 ? 0 : j));
      }
    }
    // The float MatMul's context.
    k->node_ = *ctx.node;
    k->node_.op_type = "MatMul";
    k->node_.attrs = Attributes();
    OpContext fc = ctx;
    fc.node = &k->node_;
    fc.weights = nullptr;  // the float B is this kernel's own
    fc.inputs = {TensorInfo{true, DType::kFloat32, a.shape, nullptr},
                 TensorInfo{true, DType::kFloat32, b.shape, b.value ? &k->b_float_ : nullptr}};
    fc.input_names = {ctx.input_names[0], ctx.input_names[3]};
    fc.outputs = {TensorInfo{true, DType::kFloat32, ctx.outputs[0].shape, nullptr}};
    std::string reasons;
    for (KernelFactory f : KernelRegistry::global().find("MatMul", "cpu", DType::kFloat32)) {
      auto inner = f(fc);
      if (inner) {
        k->inner_ = std::move(*inner);
        break;
      }
      reasons += "; " + inner.status().message();
    }
    if (!k->inner_) return unsupported("qmatmul_via_float: no float32 matmul", reasons);
    k->name_ = str_cat("qmatmul_via_float(", k->inner_->name(), ")");
    k->a_shape_ = a.shape;
    k->b_shape_ = b.shape;
    k->y_shape_ = ctx.outputs[0].shape;
    k->a_bytes_ = rounded(numel(a.shape));
    k->b_bytes_ = b.value ? 0 : rounded(numel(b.shape));
    k->y_bytes_ = rounded(numel(ctx.outputs[0].shape));
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Status run(const KernelArgs& a, const ExecContext& exec) const override {
    auto* ws = static_cast<uint8_t*>(a.workspace);
    auto* af = reinterpret_cast<float*>(ws);
    auto* bf = reinterpret_cast<float*>(ws + a_bytes_);
    auto* yf = reinterpret_cast<float*>(ws + a_bytes_ + b_bytes_);
    const int threads = exec.num_threads;
    dequantize_tensor(*rows_, a.inputs[0]->raw(), a_.type, af, numel(a_shape_), a_.scale, a_.zero,
                      threads);
    Tensor at = Tensor::wrap(DType::kFloat32, a_shape_, af, nullptr);
    Tensor bt = b_float_;
    if (b_bytes_) {
      dequantize_tensor(*rows_, a.inputs[3]->raw(), b_.type, bf, numel(b_shape_), b_.scale, b_.zero,
                        threads);
      bt = Tensor::wrap(DType::kFloat32, b_shape_, bf, nullptr);
    }
    Tensor yt = Tensor::wrap(DType::kFloat32, y_shape_, yf, nullptr);
    KernelArgs inner;
    inner.inputs = {&at, &bt};
    inner.outputs = {&yt};
    inner.workspace = ws + a_bytes_ + b_bytes_ + y_bytes_;
    TERN_RETURN_IF_ERROR(inner_->run(inner, exec));
    const int64_t ny = numel(y_shape_);
    if (!bias_.empty()) {
      const auto n = static_cast<int64_t>(bias_.size());
      parallel_for(ny / n, std::max<int64_t>(1, 16384 / n), threads, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          vec_->binary(0, yf + r * n, 1, bias_.data(), 1, yf + r * n, n);
        }
      });
    }
    quantize_tensor(*rows_, yf, a.outputs[0]->raw(), y_.type, ny, y_.scale, y_.zero, threads);
    return Status::ok();
  }

 private:
  struct Q {
    DType type = DType::kUInt8;
    float scale = 1, zero = 0;
  };
  std::string name_;
  Node node_;
  Tensor b_float_;
  std::vector<float> bias_;
  std::unique_ptr<Kernel> inner_;
  Q a_, b_, y_;
  const QuantizeRows* rows_ = nullptr;
  const VecOps* vec_ = nullptr;
  Shape a_shape_, b_shape_, y_shape_;
  size_t a_bytes_ = 0, b_bytes_ = 0, y_bytes_ = 0;
};

}  // namespace

TERN_REGISTRATION void register_cpu_qmatmul_via_float(KernelRegistry& r) {
#if defined(__x86_64__)
  // Below the oneDNN int8 kernels (0, -1), above Tern's own portable int8 GEMM (-3), which has
  // no x86 vector path; aarch64 builds keep that GEMM's dot-product path.
  for (DType t : {DType::kUInt8, DType::kInt8}) {
    r.add("QLinearMatMul", "cpu", t, QMatMulViaFloat::create, -2);
    r.add("FusedQLinearMatMul", "cpu", t, QMatMulViaFloat::create, -2);
  }
#else
  (void)r;
#endif
}

}  // namespace tern
