// QLinearMatMul (FusedQLinearMatMul: with an int32 bias) and MatMulInteger by a constant 2-D B ([K,
// N]: projections and classifier heads of int8 and dynamically quantised models) on Tern's int8
// GEMM (backends/cpu/qgemm.h), below any library kernel in priority. MatMulInteger's output is the
// int32 sum itself (the GEMM's out_i32), without requantisation.
//
// A's rows (its leading dims folded in) are copied per run into the workspace as int8 rows of
// the GEMM's depth (uint8 with the top bit flipped: a - 128); B is packed once, minus its zero
// points (per column or one), into the GEMM's dot-product panels. The zero points' terms are
// exact integers folded into a per-column int32 bias:
//   sum_k (a - a_zero)(b' ) = sum_k a' b' + (128 - a_zero) * sum_k b'   (uint8 A; 0 for int8),
// b' = b - b_zero[n], which must fit int8 (int8 B with zero point 0, uint8 with 128).
// Requantisation per column: a_scale * b_scale[n] / y_scale (per-row A scales are declined).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/qgemm.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

const char* const kPackedKey = "tern qgemm panels v1";

class QLinearMatMulKernel final : public qgemm::PackedWeightsKernel {
 public:
  const char* name() const override { return name_.c_str(); }
  size_t workspace_bytes() const override { return static_cast<size_t>(rows_ * kd_); }

  static Expected<std::unique_ptr<Kernel>> create(const OpContext& ctx);

  Status run(const KernelArgs& a, const ExecContext& exec) const override {
    if (rows_ == 0 || n_ == 0) return Status::ok();
    const auto* x = static_cast<const uint8_t*>(a.inputs[0]->raw());
    auto* l = static_cast<int8_t*>(a.workspace);
    parallel_for(rows_, std::max<int64_t>(1, 4096 / kd_), exec.num_threads,
                 [&](int64_t r0, int64_t r1) {
                   for (int64_t r = r0; r < r1; ++r) {
                     const uint8_t* src = x + r * k_;
                     int8_t* dst = l + r * kd_;
                     for (int64_t i = 0; i < k_; ++i) dst[i] = static_cast<int8_t>(src[i] ^ flip_);
                     std::memset(dst + k_, 0, static_cast<size_t>(kd_ - k_));
                   }
                 });
    qgemm::Epilogue e = epi_;
    e.bias = bias_.data();
    e.scale = scale_.data();
    qgemm::multiply_all(path_, l, kd_, w_, kd_, rows_, n_, a.outputs[0]->raw(), n_, e,
                        exec.num_threads);
    return Status::ok();
  }

 private:
  int64_t rows_ = 0, k_ = 0, kd_ = 0, n_ = 0;
  uint8_t flip_ = 0;
  std::vector<int32_t> bias_;  // per column: the zero points' term
  std::vector<float> scale_;   // per column: a_scale * b_scale[n] / y_scale
  qgemm::Epilogue epi_;
  qgemm::Path path_ = qgemm::Path::kPortable;
  std::string name_;
};

Expected<std::unique_ptr<Kernel>> QLinearMatMulKernel::create(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  const bool fused = ctx.node->op_type == "FusedQLinearMatMul";  // + an int32 bias (input 8)
  const bool linear = fused || ctx.node->op_type == "QLinearMatMul";
  // Inputs: QLinearMatMul (a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero),
  // MatMulInteger (a, b, a_zero, b_zero; the zero points optional).
  const size_t bi = linear ? 3 : 1, bzi = linear ? 5 : 3;
  auto int8_type = [](DType d) { return d == DType::kInt8 || d == DType::kUInt8; };
  for (size_t i : {size_t{0}, bi, linear ? size_t{7} : bi}) {
    if (!ctx.has_input(i) || !int8_type(ctx.inputs[i].dtype)) {
      return unsupported("qgemm matmul: input ", i, " is not int8 or uint8");
    }
  }
  for (size_t i = 1; i < (linear ? (fused ? 9 : 8) : ctx.inputs.size()); ++i) {
    if ((linear || ctx.has_input(i)) && (!ctx.has_input(i) || !ctx.inputs[i].value)) {
      return unsupported("qgemm matmul: input ", i, " is not a constant");
    }
  }
  const Shape& as = ctx.inputs[0].shape;
  const Shape& bs = ctx.inputs[bi].shape;
  if (bs.size() != 2 || as.empty() || as.back() != bs[0] || bs[0] == 0) {
    return unsupported("qgemm matmul: B must be 2-D [K, N] (K > 0) and A [..., K]");
  }
  for (size_t i : linear ? std::vector<size_t>{1, 2, 6, 7} : std::vector<size_t>{2}) {
    if (ctx.has_input(i) && ctx.inputs[i].value->numel() != 1) {
      return unsupported("qgemm matmul: input ", i, " must be one value (per-row A scales)");
    }
  }
  auto k = std::make_unique<QLinearMatMulKernel>();
  k->k_ = bs[0];
  k->n_ = bs[1];
  k->kd_ = qgemm::padded_depth(k->k_);
  k->rows_ = numel(as) / k->k_;
  const Tensor& b = *ctx.inputs[bi].value;
  const Tensor* b_scale = linear ? ctx.inputs[4].value : nullptr;
  const Tensor* b_zero = ctx.has_input(bzi) ? ctx.inputs[bzi].value : nullptr;
  for (const Tensor* t : {b_scale, b_zero}) {
    if (t && t->numel() != 1 && t->numel() != k->n_) {
      return unsupported("qgemm matmul: B's scale and zero point must be one value or [N]");
    }
  }
  if (k->k_ * 128 * 255 >= (int64_t{1} << 31)) {
    return unsupported("qgemm matmul: the sums might not fit int32");
  }
  const bool a_u8 = ctx.inputs[0].dtype == DType::kUInt8;
  k->flip_ = a_u8 ? 0x80 : 0;
  const int64_t a_offset =
      (a_u8 ? 128 : 0) - (ctx.has_input(2) ? ctx.inputs[2].value->int_at(0) : 0);
  auto bz = [&](int64_t j) {
    return b_zero ? b_zero->int_at(b_zero->numel() == 1 ? 0 : j) : int64_t{0};
  };
  k->bias_.resize(static_cast<size_t>(k->n_));
  k->scale_.resize(static_cast<size_t>(k->n_));
  bool zero_points = false;
  for (int64_t j = 0; j < k->n_; ++j) {
    int64_t sum = 0;
    for (int64_t i = 0; i < k->k_; ++i) {
      const int64_t v = b.int_at(i * k->n_ + j) - bz(j);
      if (v < -128 || v > 127) {
        return unsupported("qgemm matmul: a weight minus its zero point does not fit int8");
      }
      sum += v;
    }
    zero_points = zero_points || bz(j) != 0;
    const int64_t given = fused ? ctx.inputs[8].value->int_at(j) : 0;
    if (std::abs(given) + k->k_ * 128 * 255 >= (int64_t{1} << 31)) {
      return unsupported("qgemm matmul: the bias and the sums might not fit int32");
    }
    k->bias_[static_cast<size_t>(j)] =
        static_cast<int32_t>(static_cast<uint32_t>(a_offset * sum + given));
    if (!linear) continue;  // int32 output: no scale
    const double xs = ctx.inputs[1].value->float_at(0), ys = ctx.inputs[6].value->float_at(0);
    const auto s = static_cast<float>(xs * b_scale->float_at(b_scale->numel() == 1 ? 0 : j) / ys);
    if (!std::isfinite(s))
      return unsupported("qgemm matmul: the requantisation scale is not finite");
    k->scale_[static_cast<size_t>(j)] = s;
  }
  if (linear) {
    k->epi_ = qgemm::output_epilogue(*ctx.inputs[7].value, /*per_row=*/false, /*relu=*/false);
  } else {
    k->epi_.out_i32 = true;
  }
  k->path_ = qgemm::best_path(ctx.flag(FlagId::kCpuMaxCapability));
  k->name_ = std::string("qgemm.") + qgemm::path_name(k->path_);

  // B packed (zero points other than 0 change the bytes the key names: then not shared).
  const size_t bytes =
      static_cast<size_t>(std::max<int64_t>(64, qgemm::packed_bytes(k->k_, k->n_)));
  auto fill = [&](int8_t* out) {
    qgemm::pack(
        k->k_, k->n_, [&](int64_t i, int64_t j) { return b.int_at(i * k->n_ + j) - bz(j); }, out);
  };
  TERN_RETURN_IF_ERROR(k->pack_weights(ctx, bi, kPackedKey, bytes, !zero_points, fill));
  return std::unique_ptr<Kernel>(std::move(k));
}

}  // namespace

TERN_REGISTRATION void register_cpu_qlinear_matmul(KernelRegistry& r) {
  // Below the library int8 matmuls (priorities 0 and -1): this serves the builds without one.
  for (DType t : {DType::kUInt8, DType::kInt8}) {
    // On x86 QMatMulViaFloat (priority -2: float32 speed) comes first where the libraries decline.
    r.add("QLinearMatMul", "cpu", t, QLinearMatMulKernel::create, -3);
    r.add("FusedQLinearMatMul", "cpu", t, QLinearMatMulKernel::create, -3);
    r.add("MatMulInteger", "cpu", t, QLinearMatMulKernel::create, -2);
  }
}

}  // namespace tern
