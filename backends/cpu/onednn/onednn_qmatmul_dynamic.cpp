// QLinearMatMul and MatMulInteger on oneDNN's int8 matmul with an int32 destination, for what
// onednn_qmatmul.cpp (constant int8 B, zero point 0, requantised inside the primitive) does not
// take: B uint8 or not constant (attention's Q x K^T and P x V after QDQ fusion), zero points of
// any value, scales and zero points known only at run time, MatMulInteger's int32 output.
//
// A uint8 / int8 [..., M, K] x B uint8 / int8 [..., K, N]: B 2-D (or with batch dims of ones:
// A's batch dims fold into its rows), or B's batch dims those of the output with A's the same or
// all ones; other broadcasts decline. oneDNN multiplies A by B' (int8): B itself, or a uint8 B
// less 128 (the top bit flipped per run, once at creation for a constant B) with its zero
// point zb' = zb - 128. The zero points are ours, exact in int32 (wrapping: the true result fits
// while K * 255 * 255 < 2^31):
//   sum_k (a - za_i)(b' - zb'_j) = acc_ij - za_i * g_j - zb'_j * rowsum_i,
//   g_j = sum_k b'_kj - K * zb'_j,  rowsum_i = sum_k a_ik,
// za per tensor or per row of A, zb per tensor or per column. MatMulInteger's output is that;
// QLinearMatMul requantises it: float32 value * (a_scale * b_scale[j] / y_scale), rounded half to
// even, plus y_zero_point, saturated (backends/cpu/quantize_rows.h), one quantisation step at
// most from the reference's double at ties. Per-row A scales decline.
//
// Without VNNI oneDNN's u8 x s8 products are added in pairs in 16 bits with saturation: a
// constant B' must then fit 7 bits (onednn::require_exact_int8); a B read at run time declines.
// The int32 sums are exact whatever oneDNN's split, so deterministic_algorithms keeps this
// kernel (its epilogue works per element).
#include <algorithm>
#include <string>
#include <vector>

#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/onednn/onednn_common.h"
#include "backends/cpu/quantize_rows.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

constexpr int64_t kMaxDepth = 33000;   // K * 255 * 255 < 2^31: the result fits int32
constexpr int64_t kColumnBlock = 256;  // columns of B' converted and summed per work item
constexpr int64_t kChunk = 256;        // floats of one output row requantised at a time

bool int8_type(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8;
}

int64_t align64(int64_t bytes) {
  return (bytes + 63) / 64 * 64;
}

// Sum of one row of A.
template <class T>
int32_t row_sum(const T* __restrict a, int64_t k) {
  int32_t s = 0;
  for (int64_t i = 0; i < k; ++i) s += a[i];
  return s;
}

// k rows of n columns of B (row stride ld) as int8 b ^ flip (0x80 for uint8: b - 128) into
// `out` (same stride; null: B is int8 and only summed), their column sums added into sum[0, n).
void convert_and_sum(const uint8_t* __restrict b, int8_t* __restrict out, int32_t* __restrict sum,
                     int64_t k, int64_t n, int64_t ld, uint8_t flip) {
  for (int64_t i = 0; i < k; ++i) {
    const uint8_t* src = b + i * ld;
    if (out) {
      int8_t* dst = out + i * ld;
      for (int64_t j = 0; j < n; ++j) {
        dst[j] = static_cast<int8_t>(src[j] ^ flip);
        sum[j] += dst[j];
      }
    } else {
      const auto* s8 = reinterpret_cast<const int8_t*>(src);
      for (int64_t j = 0; j < n; ++j) sum[j] += s8[j];
    }
  }
}

// The corrected sum of column j: acc - za * g - rowsum * zb, wrapping (the true value fits
// int32). kUniform (za and zb one value each): g already holds -za * g and `rowsum` is
// -rowsum * zb, additions only (the x86 baseline has no 32-bit vector multiply).
template <bool kUniform>
[[gnu::always_inline]] inline int32_t corrected(const int32_t* __restrict acc,
                                                const int32_t* __restrict g,
                                                const int32_t* __restrict zb, uint32_t za,
                                                uint32_t rowsum, int64_t j) {
  const auto v = static_cast<uint32_t>(acc[j]), h = static_cast<uint32_t>(g[j]);
  if (kUniform) return static_cast<int32_t>(v + h + rowsum);
  return static_cast<int32_t>(v - za * h - rowsum * static_cast<uint32_t>(zb[j]));
}

// acc[0, n) corrected in place (MatMulInteger).
template <bool kUniform>
void correct_row(int32_t* __restrict acc, const int32_t* __restrict g, const int32_t* __restrict zb,
                 uint32_t za, uint32_t rowsum, int64_t n) {
  for (int64_t j = 0; j < n; ++j) acc[j] = corrected<kUniform>(acc, g, zb, za, rowsum, j);
}

// The same as float32 times scale[j] into y (QLinearMatMul, before the rounding).
template <bool kUniform>
void correct_row_scaled(const int32_t* __restrict acc, const int32_t* __restrict g,
                        const int32_t* __restrict zb, const float* __restrict scale, uint32_t za,
                        uint32_t rowsum, float* __restrict y, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    y[j] = static_cast<float>(corrected<kUniform>(acc, g, zb, za, rowsum, j)) * scale[j];
  }
}

class OnednnQMatMulDynamic final : public Kernel {
 public:
  const char* name() const override { return name_.c_str(); }
  size_t workspace_bytes() const override { return static_cast<size_t>(workspace_); }
  size_t packed_bytes() const override { return b_const_.size(); }

  static Expected<std::unique_ptr<Kernel>> create(const OpContext& ctx);
  Status run(const KernelArgs& a, const ExecContext& exec) const override;

 private:
  bool linear_ = false;  // QLinearMatMul (else MatMulInteger)
  size_t bi_ = 1;        // B's input index
  int64_t m_ = 0, k_ = 0, n_ = 0;
  int64_t batch_ = 1;  // output matrices (rows of the folded 2-D case: 1 matrix of batch * m)
  int64_t a_mats_ = 1, b_mats_ = 1;  // A's and B's matrices (1: broadcast, or folded)
  bool b_u8_ = false, a_u8_ = false, y_u8_ = false;
  // A constant B: B' and its column sums, made at creation.
  std::vector<int8_t> b_const_;
  std::vector<int32_t> b_sums_;
  // Workspace offsets (bytes): B' (a uint8 B read per run), g, zb', the scales, the int32 sums.
  int64_t off_b_ = -1, off_g_ = 0, off_zb_ = 0, off_scale_ = 0, off_acc_ = -1, workspace_ = 0;
  const QuantizeRows* rows_ = nullptr;
  dnnl::matmul prim_;
  onednn::ArgPool args_;
  std::string name_;
};

Expected<std::unique_ptr<Kernel>> OnednnQMatMulDynamic::create(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  TERN_RETURN_IF_ERROR(onednn::require_onednn_sizes(ctx));
  auto k = std::make_unique<OnednnQMatMulDynamic>();
  k->linear_ = ctx.node->op_type == "QLinearMatMul";
  k->bi_ = k->linear_ ? 3 : 1;
  // Zero points: A's input 2, B's 5 (QLinearMatMul) or 3 (MatMulInteger, both optional).
  const size_t azi = 2, bzi = k->linear_ ? 5 : 3;
  const TensorInfo& a = ctx.inputs[0];
  const TensorInfo& b = ctx.inputs[k->bi_];
  if (!int8_type(a.dtype) || !int8_type(b.dtype) ||
      (k->linear_ && !int8_type(ctx.outputs[0].dtype))) {
    return unsupported("oneDNN int8 s32 matmul: uint8 / int8 operands and output");
  }
  const Shape &as = a.shape, &bs = b.shape;
  if (as.size() < 2 || bs.size() < 2) {
    return unsupported("oneDNN int8 s32 matmul: A and B of rank 2 or more");
  }
  k->m_ = as[as.size() - 2];
  k->k_ = as.back();
  k->n_ = bs.back();
  if (k->k_ > kMaxDepth) return unsupported("oneDNN int8 s32 matmul: K past ", kMaxDepth);
  const Shape& ys = ctx.outputs[0].shape;
  k->batch_ = numel(Shape(ys.begin(), ys.end() - 2));
  k->a_mats_ = numel(Shape(as.begin(), as.end() - 2));
  k->b_mats_ = numel(Shape(bs.begin(), bs.end() - 2));
  if ((k->a_mats_ != 1 && k->a_mats_ != k->batch_) ||
      (k->b_mats_ != 1 && k->b_mats_ != k->batch_)) {
    return unsupported("oneDNN int8 s32 matmul: batch dims broadcast within A or B");
  }
  // Scales and zero points: one value, or per row of A / per column of B; A's scale one value.
  auto count_ok = [&](size_t i, int64_t per) {
    if (!ctx.has_input(i)) return true;
    const int64_t c = numel(ctx.inputs[i].shape);
    return c == 1 || c == per;
  };
  if (!count_ok(azi, k->m_) || !count_ok(bzi, k->n_) ||
      (k->linear_ && (!count_ok(4, k->n_) || numel(ctx.inputs[1].shape) != 1 ||
                      numel(ctx.inputs[6].shape) != 1 || numel(ctx.inputs[7].shape) != 1))) {
    return unsupported(
        "oneDNN int8 s32 matmul: scales or zero points of another shape "
        "(per-row A scales)");
  }
  k->a_u8_ = a.dtype == DType::kUInt8;
  k->b_u8_ = b.dtype == DType::kUInt8;
  k->y_u8_ = ctx.outputs[0].dtype == DType::kUInt8;
  const int64_t kn = k->k_ * k->n_;
  if (b.value) {  // B' and its column sums once
    k->b_const_.resize(static_cast<size_t>(k->b_mats_ * kn));
    k->b_sums_.assign(static_cast<size_t>(k->b_mats_ * k->n_), 0);
    for (int64_t t = 0; t < k->b_mats_; ++t) {
      convert_and_sum(static_cast<const uint8_t*>(b.value->raw()) + t * kn,
                      k->b_const_.data() + t * kn, k->b_sums_.data() + t * k->n_, k->k_, k->n_,
                      k->n_, k->b_u8_ ? 0x80 : 0);
    }
    if (!onednn_int8_vnni()) {
      const Tensor view = Tensor::wrap(DType::kInt8, {static_cast<int64_t>(k->b_const_.size())},
                                       k->b_const_.data(), nullptr);
      TERN_RETURN_IF_ERROR(onednn::require_exact_int8(view));
    }
  } else if (!onednn_int8_vnni()) {
    return unsupported(
        "oneDNN int8 without VNNI saturates 16-bit pair sums: a B read at run "
        "time runs Tern's own kernels");
  }
  // Workspace.
  int64_t off = 0;
  if (!b.value && k->b_u8_) {
    k->off_b_ = off;
    off += align64(k->b_mats_ * kn);
  }
  k->off_g_ = off;
  off += align64(k->b_mats_ * k->n_ * 4);
  k->off_zb_ = off;
  off += align64(k->n_ * 4);
  k->off_scale_ = off;
  off += align64(k->n_ * 4);
  if (k->linear_) {
    k->off_acc_ = off;
    off += align64(k->batch_ * k->m_ * k->n_ * 4);
  }
  k->workspace_ = off;
  k->rows_ = &quantize_rows(effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability)));
  try {
    const dt at = k->a_u8_ ? dt::u8 : dt::s8;
    dnnl::memory::desc a_md, b_md, y_md;
    if (k->b_mats_ == 1) {  // A's batch dims fold into its rows
      const int64_t rows = k->a_mats_ * k->m_;
      a_md = dnnl::memory::desc({rows, k->k_}, at, tag::ab);
      b_md = dnnl::memory::desc({k->k_, k->n_}, dt::s8, tag::ab);
      y_md = dnnl::memory::desc({rows, k->n_}, dt::s32, tag::ab);
    } else {
      a_md = dnnl::memory::desc({k->a_mats_, k->m_, k->k_}, at, tag::abc);
      b_md = dnnl::memory::desc({k->b_mats_, k->k_, k->n_}, dt::s8, tag::abc);
      y_md = dnnl::memory::desc({k->batch_, k->m_, k->n_}, dt::s32, tag::abc);
    }
    dnnl::primitive_attr attr = onednn::user_scratchpad_attr();
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, y_md), attr, onednn::engine());
    const std::string impl = pd.impl_info_str();
    if (impl.rfind("ref", 0) == 0) {
      return unsupported("oneDNN int8 s32 matmul: only oneDNN's reference kernel takes this case");
    }
    k->name_ = std::string(onednn::impl_kernel_name(impl)) + " int8 s32";
    if (k->linear_) k->name_ += std::string(".") + quantize_rows_isa(*k->rows_);
    k->prim_ = dnnl::matmul(pd);
    k->args_ = onednn::ArgPool::weighted(a_md, b_md, nullptr, y_md, pd.scratchpad_desc());
  } catch (const dnnl::error& e) {
    return unsupported("oneDNN declined this int8 s32 matmul: ", e.what());
  }
  return std::unique_ptr<Kernel>(std::move(k));
}

Status OnednnQMatMulDynamic::run(const KernelArgs& a, const ExecContext& exec) const {
  auto in = [&](size_t i) { return i < a.inputs.size() ? a.inputs[i] : nullptr; };
  const Tensor* az = in(2);
  const Tensor* bz = in(linear_ ? 5 : 3);
  auto* ws = static_cast<uint8_t*>(a.workspace);
  auto* g = reinterpret_cast<int32_t*>(ws + off_g_);
  auto* zb = reinterpret_cast<int32_t*>(ws + off_zb_);
  auto* scale = reinterpret_cast<float*>(ws + off_scale_);
  const int32_t b_shift = b_u8_ ? 128 : 0;
  for (int64_t j = 0; j < n_; ++j) {
    zb[j] = (bz ? static_cast<int32_t>(bz->int_at(bz->numel() == 1 ? 0 : j)) : 0) - b_shift;
  }
  if (linear_) {
    const double xs = a.inputs[1]->float_at(0), ys = a.inputs[6]->float_at(0);
    const Tensor& bs = *a.inputs[4];
    for (int64_t j = 0; j < n_; ++j) {
      scale[j] = static_cast<float>(xs * bs.float_at(bs.numel() == 1 ? 0 : j) / ys);
    }
  }

  // B' and g = its column sums less K * zb'.
  const int64_t kn = k_ * n_;
  const int8_t* bp = b_const_.data();
  if (b_const_.empty()) {
    const auto* b = static_cast<const uint8_t*>(a.inputs[bi_]->raw());
    auto* out = off_b_ >= 0 ? reinterpret_cast<int8_t*>(ws + off_b_) : nullptr;
    bp = out ? out : reinterpret_cast<const int8_t*>(b);
    const int64_t blocks = (n_ + kColumnBlock - 1) / kColumnBlock;
    parallel_for(b_mats_ * blocks, 1, exec.num_threads, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t mat = t / blocks, j0 = (t % blocks) * kColumnBlock;
        const int64_t cols = std::min(kColumnBlock, n_ - j0);
        int32_t* sum = g + mat * n_ + j0;
        std::fill(sum, sum + cols, 0);
        convert_and_sum(b + mat * kn + j0, out ? out + mat * kn + j0 : nullptr, sum, k_, cols, n_,
                        0x80);
      }
    });
  } else {
    std::copy(b_sums_.begin(), b_sums_.end(), g);
  }
  // One zero point each: g becomes -za * g, and each row adds -rowsum * zb (corrected()).
  const bool uniform = (!az || az->numel() == 1) && (!bz || bz->numel() == 1);
  const auto za0 = static_cast<uint32_t>(az ? az->int_at(0) : 0);
  for (int64_t t = 0; t < b_mats_; ++t) {
    for (int64_t j = 0; j < n_; ++j) {
      uint32_t v = static_cast<uint32_t>(g[t * n_ + j]) - static_cast<uint32_t>(k_ * zb[j]);
      if (uniform) v = 0u - za0 * v;
      g[t * n_ + j] = static_cast<int32_t>(v);
    }
  }

  auto* acc = linear_ ? reinterpret_cast<int32_t*>(ws + off_acc_)
                      : static_cast<int32_t*>(a.outputs[0]->raw());
  TERN_RETURN_IF_ERROR(args_.execute_weighted(prim_, const_cast<void*>(a.inputs[0]->raw()),
                                              const_cast<int8_t*>(bp), nullptr, acc));

  // The zero points' terms (and the requantisation), row by row.
  const auto* x = static_cast<const uint8_t*>(a.inputs[0]->raw());
  const int64_t rows = batch_ * m_;
  const DType yt = y_u8_ ? DType::kUInt8 : DType::kInt8;
  const float yz = linear_ ? static_cast<float>(a.inputs[7]->int_at(0)) : 0.0f;
  parallel_for(
      rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, n_ + k_)), exec.num_threads,
      [&](int64_t r0, int64_t r1) {
        float f[kChunk];
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t mat = r / m_, i = r % m_;
          const uint8_t* arow = x + ((a_mats_ == 1 ? 0 : mat) * m_ + i) * k_;
          const int32_t rs =
              a_u8_ ? row_sum(arow, k_) : row_sum(reinterpret_cast<const int8_t*>(arow), k_);
          const auto za = static_cast<uint32_t>(az ? az->int_at(az->numel() == 1 ? 0 : i) : 0);
          const uint32_t rsu = uniform
                                   ? 0u - static_cast<uint32_t>(rs) * static_cast<uint32_t>(zb[0])
                                   : static_cast<uint32_t>(rs);
          const int32_t* gr = g + (b_mats_ == 1 ? 0 : mat) * n_;
          int32_t* accr = acc + r * n_;
          if (!linear_) {
            if (uniform) {
              correct_row<true>(accr, gr, zb, za, rsu, n_);
            } else {
              correct_row<false>(accr, gr, zb, za, rsu, n_);
            }
            continue;
          }
          auto* y = static_cast<uint8_t*>(a.outputs[0]->raw()) + r * n_;
          for (int64_t j0 = 0; j0 < n_; j0 += kChunk) {
            const int64_t cnt = std::min(kChunk, n_ - j0);
            if (uniform) {
              correct_row_scaled<true>(accr + j0, gr + j0, zb + j0, scale + j0, za, rsu, f, cnt);
            } else {
              correct_row_scaled<false>(accr + j0, gr + j0, zb + j0, scale + j0, za, rsu, f, cnt);
            }
            quantize_tensor(*rows_, f, y + j0, yt, cnt, 1.0f, yz, 1);
          }
        }
      });
  return Status::ok();
}

}  // namespace

TERN_REGISTRATION void register_cpu_onednn_qmatmul_dynamic(KernelRegistry& r) {
  // QLinearMatMul: below onednn_qmatmul.cpp's kernel (0), above Tern's own int8 GEMM (-2).
  for (DType t : {DType::kUInt8, DType::kInt8}) {
    r.add("QLinearMatMul", "cpu", t, OnednnQMatMulDynamic::create, -1);
    r.add("MatMulInteger", "cpu", t, OnednnQMatMulDynamic::create);
  }
}

}  // namespace tern
