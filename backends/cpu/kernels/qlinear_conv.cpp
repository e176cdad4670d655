// QLinearConv and FusedQLinearConv (+Relu) on Tern's int8 GEMM (backends/cpu/qgemm.h), for
// builds without oneDNN (the minimal aarch64 build), below oneDNN's kernel in priority; and
// ConvInteger (the same sums, int32 output without requantisation: the GEMM's out_i32), the only
// kernel it has besides the reference.
//
// Per image and group: Y[m, pixels] = W[m, k] x col[k, pixels], W the weights (packed once,
// rows padded to the GEMM's depth) and col the window's source values packed per run into the
// GEMM's dot-product panels in the workspace (im2col; for 1x1 stride-1 convolutions a plain
// interleave of four channels). Depthwise convolutions (one input channel per group) run a
// direct loop instead: a GEMM of one row would waste three quarters of every tile.
//
// Exact integer arithmetic for the zero points: with x' = x - 128 for uint8 sources (the top
// bit flipped while packing, so both GEMM operands are int8) and w' = w - w_zero_point[m],
//   sum_k w'(x - x_zero) = sum_k w' x' + (128 - x_zero) * sum_k w'   (uint8; 0 for int8),
// the second term folded into the per-channel int32 bias with the model's. Padding packs
// x_zero's value, so it adds nothing. Weights of either type with any zero point are taken as
// long as every w - w_zero_point fits int8 (int8 weights with zero point 0, uint8 with 128),
// and while the sums provably fit int32 (|bias| + K * 128 * 255 < 2^31).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/qgemm.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "ops/common/op_utils.h"
#include "ops/conv_integer.h"

namespace tern {
namespace {

const char* const kPackedKey = "tern qgemm rows v1";
constexpr int64_t kDepthwiseChunk = 64;  // output columns summed at a time by the direct loop

class QLinearConvKernel final : public qgemm::PackedWeightsKernel {
 public:
  const char* name() const override { return name_.c_str(); }
  size_t workspace_bytes() const override { return workspace_; }

  static Expected<std::unique_ptr<Kernel>> create(const OpContext& ctx);

  Status run(const KernelArgs& a, const ExecContext& exec) const override {
    if (a.outputs[0]->numel() == 0) return Status::ok();
    qgemm::Epilogue e = epi_;
    e.bias = bias_.data();
    e.scale = scale_.data();
    if (depthwise_) {
      if (x_u8_) {
        depthwise(a.inputs[0]->data<uint8_t>(), a.outputs[0]->raw(), e, exec);
      } else {
        depthwise(a.inputs[0]->data<int8_t>(), a.outputs[0]->raw(), e, exec);
      }
      return Status::ok();
    }
    const ops::ConvParams& p = p_.conv;
    auto* col = static_cast<int8_t*>(a.workspace);
    const auto* x = static_cast<const uint8_t*>(a.inputs[0]->raw());
    auto* y = static_cast<uint8_t*>(a.outputs[0]->raw());
    const int64_t c = p.x[1], m = p.w[0], out_size = e.out_i32 ? 4 : 1;
    for (int64_t n = 0; n < p.x[0]; ++n) {
      for (int64_t g = 0; g < p.group; ++g) {
        pack_columns(x + (n * c + g * cg_) * in_pixels_, col, exec.num_threads);
        qgemm::Epilogue eg = e;
        eg.bias += g * mg_;
        eg.scale += g * mg_;
        qgemm::multiply_all(path_, w_ + g * mg_ * kd_, kd_, col, kd_, mg_, pixels_,
                            y + (n * m + g * mg_) * pixels_ * out_size, pixels_, eg,
                            exec.num_threads);
      }
    }
    return Status::ok();
  }

 private:
  // One group's window values of one image (channels cg_ from xg) into the GEMM's panels:
  // row k = (channel, taps), column = output pixel.
  void pack_columns(const uint8_t* xg, int8_t* col, int num_threads) const {
    const ops::Window& w = w3_;
    const int64_t kh = w.kernel[1], kw = w.kernel[2];
    const int64_t stride_panel = kd_ * qgemm::kPanel;
    const int64_t padded_pixels = qgemm::panels(pixels_) * qgemm::kPanel;
    parallel_for(kd_ / 4, 4, num_threads, [&](int64_t g0, int64_t g1) {
      for (int64_t kg = g0; kg < g1; ++kg) {
        int8_t* base = col + kg * 4 * qgemm::kPanel;
        auto at = [&](int64_t px, int64_t t) -> int8_t& {
          return base[(px / qgemm::kPanel) * stride_panel + (px % qgemm::kPanel) * 4 + t];
        };
        for (int64_t px = pixels_; px < padded_pixels; ++px) {
          for (int t = 0; t < 4; ++t) at(px, t) = 0;
        }
        if (pointwise_ && (kg + 1) * 4 <= k_) {
          const uint8_t* r[4];
          for (int t = 0; t < 4; ++t) r[t] = xg + (kg * 4 + t) * in_pixels_;
          for (int64_t px = 0; px < pixels_; ++px) {
            int8_t* d = &at(px, 0);
            for (int t = 0; t < 4; ++t) d[t] = static_cast<int8_t>(r[t][px] ^ flip_);
          }
          continue;
        }
        for (int t = 0; t < 4; ++t) {
          const int64_t k = kg * 4 + t;
          if (k >= k_) {  // the depth's padding: multiplies zero weights
            for (int64_t px = 0; px < pixels_; ++px) at(px, t) = 0;
            continue;
          }
          const int64_t ci = k / taps_, tap = k % taps_;
          const int64_t fd = tap / (kh * kw), fh = (tap / kw) % kh, fw = tap % kw;
          const uint8_t* xc = xg + ci * in_pixels_;
          int64_t px = 0;
          for (int64_t od = 0; od < w.out[0]; ++od) {
            const int64_t id = od * w.strides[0] - w.pads_begin[0] + fd * w.dilations[0];
            for (int64_t oh = 0; oh < w.out[1]; ++oh) {
              const int64_t ih = oh * w.strides[1] - w.pads_begin[1] + fh * w.dilations[1];
              const bool row_in = id >= 0 && id < w.in[0] && ih >= 0 && ih < w.in[1];
              const uint8_t* src = xc + (id * w.in[1] + ih) * w.in[2];
              for (int64_t ow = 0; ow < w.out[2]; ++ow, ++px) {
                const int64_t iw = ow * w.strides[2] - w.pads_begin[2] + fw * w.dilations[2];
                at(px, t) = row_in && iw >= 0 && iw < w.in[2] ? static_cast<int8_t>(src[iw] ^ flip_)
                                                              : pad_value_;
              }
            }
          }
        }
      }
    });
  }

  // Depthwise (one input channel per group): per output row, the sums of kDepthwiseChunk
  // columns at a time, tap by tap over the columns whose window is inside the row.
  template <class T>
  void depthwise(const T* x, void* out, const qgemm::Epilogue& e, const ExecContext& exec) const {
    const ops::ConvParams& p = p_.conv;
    const ops::Window& w = w3_;
    const int64_t c = p.x[1], m = p.w[0];
    const int64_t kh = w.kernel[1], kw = w.kernel[2], sw = w.strides[2];
    parallel_for(p.x[0] * m, 1, exec.num_threads, [&](int64_t begin, int64_t end) {
      int32_t acc[kDepthwiseChunk];
      for (int64_t plane = begin; plane < end; ++plane) {
        const int64_t n = plane / m, oc = plane % m;
        const T* xc = x + (n * c + oc / mg_) * in_pixels_;
        const int8_t* wt = w_ + oc * kd_;
        for (int64_t od = 0; od < w.out[0]; ++od) {
          for (int64_t oh = 0; oh < w.out[1]; ++oh) {
            for (int64_t ow0 = 0; ow0 < w.out[2]; ow0 += kDepthwiseChunk) {
              const int64_t cnt = std::min(kDepthwiseChunk, w.out[2] - ow0);
              std::fill(acc, acc + cnt, 0);
              for (int64_t fd = 0; fd < w.kernel[0]; ++fd) {
                const int64_t id = od * w.strides[0] - w.pads_begin[0] + fd * w.dilations[0];
                if (id < 0 || id >= w.in[0]) continue;
                for (int64_t fh = 0; fh < kh; ++fh) {
                  const int64_t ih = oh * w.strides[1] - w.pads_begin[1] + fh * w.dilations[1];
                  if (ih < 0 || ih >= w.in[1]) continue;
                  const T* row = xc + (id * w.in[1] + ih) * w.in[2];
                  for (int64_t fw = 0; fw < kw; ++fw) {
                    const int32_t wv = wt[(fd * kh + fh) * kw + fw];
                    // Columns ow with 0 <= ow * sw + off < in[2].
                    const int64_t off = fw * w.dilations[2] - w.pads_begin[2];
                    const int64_t first = off >= 0 ? 0 : (-off + sw - 1) / sw;
                    const int64_t last = w.in[2] - 1 - off < 0 ? 0 : (w.in[2] - 1 - off) / sw + 1;
                    const int64_t lo = std::max(first, ow0), hi = std::min(last, ow0 + cnt);
                    for (int64_t ow = lo; ow < hi; ++ow) {
                      acc[ow - ow0] += wv * (static_cast<int32_t>(row[ow * sw + off]) - x_zero_);
                    }
                  }
                }
              }
              const int64_t at = plane * pixels_ + (od * w.out[1] + oh) * w.out[2] + ow0;
              for (int64_t i = 0; i < cnt; ++i) {
                qgemm::store(out, at + i, acc[i], e.bias[oc], e.scale[oc], e);
              }
            }
          }
        }
      }
    });
  }

  ops::QConvParams p_;
  ops::Window w3_;
  int64_t cg_ = 0, mg_ = 0, taps_ = 0, k_ = 0, kd_ = 0, pixels_ = 0, in_pixels_ = 0;
  bool depthwise_ = false, pointwise_ = false, x_u8_ = false;
  uint8_t flip_ = 0;      // 0x80 for uint8 sources: x - 128 as int8
  int8_t pad_value_ = 0;  // x_zero_point packed
  int32_t x_zero_ = 0;
  std::vector<int32_t> bias_;  // per output channel, the zero points' terms folded in
  std::vector<float> scale_;   // x_scale * w_scale[m] / y_scale
  qgemm::Epilogue epi_;
  qgemm::Path path_ = qgemm::Path::kPortable;
  std::string name_;
  size_t workspace_ = 0;
};

Expected<std::unique_ptr<Kernel>> QLinearConvKernel::create(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  TERN_ASSIGN_OR_RETURN(ops::QConvParams p, ops::parse_qconv(ctx));
  // Inputs: QLinearConv (x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero, B),
  // ConvInteger (x, w, x_zero, w_zero).
  const size_t wi = p.linear ? 3 : 1, wzi = p.linear ? 5 : 3;
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    if (ctx.has_input(i) && !ctx.inputs[i].value) {
      return unsupported("qgemm conv: input ", i, " is not a constant");
    }
  }
  const ops::ConvParams& c = p.conv;
  if (c.win.spatial < 1 || c.win.spatial > 3) return unsupported("qgemm conv: 1-D to 3-D only");
  auto k = std::make_unique<QLinearConvKernel>();
  k->p_ = p;
  k->w3_ = ops::as_3d(c.win);
  const int64_t m = c.w[0];
  k->cg_ = c.x[1] / c.group;
  k->mg_ = m / c.group;
  k->taps_ = k->w3_.kernel[0] * k->w3_.kernel[1] * k->w3_.kernel[2];
  k->k_ = k->cg_ * k->taps_;
  k->kd_ = qgemm::padded_depth(k->k_);
  k->pixels_ = k->w3_.out[0] * k->w3_.out[1] * k->w3_.out[2];
  k->in_pixels_ = k->w3_.in[0] * k->w3_.in[1] * k->w3_.in[2];
  k->depthwise_ = k->cg_ == 1;
  k->pointwise_ = k->taps_ == 1;
  for (size_t d = 0; d < 3; ++d) {
    k->pointwise_ = k->pointwise_ && k->w3_.strides[d] == 1 && k->w3_.pads_begin[d] == 0 &&
                    k->w3_.in[d] == k->w3_.out[d];
  }
  k->x_u8_ = p.x_type == DType::kUInt8;
  k->flip_ = k->x_u8_ ? 0x80 : 0;
  k->x_zero_ = ctx.has_input(2) ? static_cast<int32_t>(ctx.inputs[2].value->int_at(0)) : 0;
  k->pad_value_ = static_cast<int8_t>(static_cast<uint8_t>(k->x_zero_) ^ k->flip_);

  // Weights minus their zero points must fit int8; the sums int32.
  const Tensor& w = *ctx.inputs[wi].value;
  const Tensor* wzt = ctx.has_input(wzi) ? ctx.inputs[wzi].value : nullptr;
  std::vector<int32_t> wz(static_cast<size_t>(m), 0);
  bool zero_points = false;
  for (int64_t o = 0; o < m; ++o) {
    wz[static_cast<size_t>(o)] =
        wzt ? static_cast<int32_t>(wzt->int_at(wzt->numel() == 1 ? 0 : o)) : 0;
    zero_points = zero_points || wz[static_cast<size_t>(o)] != 0;
  }
  const Tensor* bias = p.linear && ctx.has_input(8) ? ctx.inputs[8].value : nullptr;
  const int64_t x_offset = (k->x_u8_ ? 128 : 0) - k->x_zero_;
  k->bias_.resize(static_cast<size_t>(m));
  k->scale_.resize(static_cast<size_t>(m));
  for (int64_t o = 0; o < m; ++o) {
    int64_t sum = 0;
    for (int64_t i = 0; i < k->k_; ++i) {
      const int64_t v = w.int_at(o * k->k_ + i) - wz[static_cast<size_t>(o)];
      if (v < -128 || v > 127) {
        return unsupported("qgemm conv: a weight minus its zero point does not fit int8");
      }
      sum += v;
    }
    const int64_t b = bias ? bias->int_at(o) : 0;
    if (std::abs(b) + k->k_ * 128 * 255 >= (int64_t{1} << 31)) {
      return unsupported("qgemm conv: the sums might not fit int32");
    }
    // The direct loop sums (x - x_zero) itself; the GEMM adds the zero points' term.
    const int64_t total = b + (k->depthwise_ ? 0 : x_offset * sum);
    k->bias_[static_cast<size_t>(o)] = static_cast<int32_t>(static_cast<uint32_t>(total));
    if (!p.linear) continue;  // int32 output: no scale
    const double xs = ctx.inputs[1].value->float_at(0), ys = ctx.inputs[6].value->float_at(0);
    const Tensor& ws = *ctx.inputs[4].value;
    const auto s = static_cast<float>(xs * ws.float_at(ws.numel() == 1 ? 0 : o) / ys);
    if (!std::isfinite(s)) return unsupported("qgemm conv: the requantisation scale is not finite");
    k->scale_[static_cast<size_t>(o)] = s;
  }
  if (p.linear) {
    k->epi_ = qgemm::output_epilogue(*ctx.inputs[7].value, /*per_row=*/true, p.relu);
  } else {
    k->epi_.per_row = true;
    k->epi_.out_i32 = true;
  }

  k->path_ = qgemm::best_path(ctx.flag(FlagId::kCpuMaxCapability));
  if (k->depthwise_) {
    k->name_ = "qconv_depthwise.portable";
  } else {
    k->name_ = std::string("qgemm.") + qgemm::path_name(k->path_);
    k->workspace_ = static_cast<size_t>(qgemm::packed_bytes(k->k_, k->pixels_));
  }
  // The weights as int8 rows of kd_ (w - w_zero_point, padding 0).
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(64, m * k->kd_));
  auto fill = [&](int8_t* out) {
    for (int64_t o = 0; o < m; ++o) {
      for (int64_t i = 0; i < k->k_; ++i) {
        out[o * k->kd_ + i] =
            static_cast<int8_t>(w.int_at(o * k->k_ + i) - wz[static_cast<size_t>(o)]);
      }
    }
  };
  TERN_RETURN_IF_ERROR(k->pack_weights(ctx, wi, kPackedKey, bytes, !zero_points, fill));
  return std::unique_ptr<Kernel>(std::move(k));
}

}  // namespace

TERN_REGISTRATION void register_cpu_qlinear_conv(KernelRegistry& r) {
  // Below oneDNN's int8 convolution (priority 0): this serves builds without oneDNN and what
  // oneDNN declines.
  for (DType t : {DType::kUInt8, DType::kInt8}) {
    r.add("QLinearConv", "cpu", t, QLinearConvKernel::create, -2);
    r.add("FusedQLinearConv", "cpu", t, QLinearConvKernel::create, -2);
    r.add("ConvInteger", "cpu", t, QLinearConvKernel::create, -2);
  }
}

}  // namespace tern
