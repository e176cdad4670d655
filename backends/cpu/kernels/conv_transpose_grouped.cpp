// ConvTranspose with few input channels per group (depthwise: one, any multiplier; up to
// kMaxGroupChannels), any kernel, stride, dilation, pads and output padding, 1-D to 3-D, float32
// in the plain layout. oneDNN's deconvolution runs these at 2-3 GFLOP/s (a depthwise 3x3 stride-2
// upsampling of 32 channels 96 -> 192: 3.0 ms where this takes ~0.3).
//
// One output row at a time, as a gather: the row's taps read the input rows that reach it, and
// each (input channel, tap) adds a scaled input row to the output row, whose columns of one
// stride phase are contiguous. With stride s along W, output column ow = iw * s + kw * d - pad:
// every input column of a tap lands in the same phase (its offset mod s), so the row is
// accumulated as s contiguous phase rows (loops the compiler vectorises, compiled per x86 ISA level
// and chosen under cpu.max_capability) and interleaved once. Each output element sums its terms
// in one fixed order: bitwise the same at any thread count. Not in the minimal library (its size
// has no room: CMakeLists.txt), where ConvTranspose runs on the reference kernel.
#include <algorithm>
#include <vector>

#include "backends/cpu/cpu_capability.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "ops/common/op_utils.h"
#include "ops/conv_transpose.h"

namespace tern {

namespace {

// Wider groups have enough work per output element for oneDNN's GEMM-based deconvolution.
constexpr int64_t kMaxGroupChannels = 8;

// An input row reaching an output row: kernel index k, input index i (along D or H).
struct Reach {
  int64_t k, i;
};

// A tap along W: its input columns [lo, hi) land in phase `ph` at index column + q.
struct ColumnTap {
  int64_t kw, ph, q, lo, hi;
};

struct GroupedDeconv {
  ops::ConvTransposeParams p;
  ops::Window w3;     // as 3-D (D, H, W)
  int64_t cg = 1;     // input channels per group
  int64_t mg = 1;     // output channels per group
  int64_t phase = 0;  // elements of one phase row: ceil(OW / stride W)
  // What reaches each output depth / row: reach_d[starts_d[od] .. starts_d[od + 1]), and along H.
  std::vector<Reach> reach_d, reach_h;
  std::vector<int64_t> starts_d, starts_h;
  std::vector<ColumnTap> columns;
  using RowFn = void (*)(const GroupedDeconv&, const float*, const float*, float, int64_t, int64_t,
                         int64_t, float*, float*);
  RowFn row = nullptr;
};

// For each output index o < out, the kernel indices and input indices that reach it (division
// free at run time: computed once here).
void reaches(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t dilation, int64_t pad,
             std::vector<Reach>* list, std::vector<int64_t>* starts) {
  starts->assign(1, 0);
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t k = 0; k < kernel; ++k) {
      const int64_t t = o + pad - k * dilation;
      if (t >= 0 && t % stride == 0 && t / stride < in) list->push_back({k, t / stride});
    }
    starts->push_back(static_cast<int64_t>(list->size()));
  }
}

// y[i] += a * x[i]: restrict and by value, so that the loop vectorises.
[[gnu::always_inline]] inline void axpy(float* __restrict y, const float* __restrict x, float a,
                                        int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

// Output row (channel oc of group g, index m there; depth od, height oh) into `out` (OW
// elements), using `phases` (stride-W phase rows of k.phase elements each) as scratch. `x` is the
// image's input, `w` the weights, `bias` the channel's.
[[gnu::always_inline]] inline void row_impl(const GroupedDeconv& k, const float* x, const float* w,
                                            float bias, int64_t oc, int64_t od, int64_t oh,
                                            float* __restrict out, float* __restrict phases) {
  const ops::Window& v = k.w3;
  const int64_t ID = v.in[0], IH = v.in[1], IW = v.in[2], OW = v.out[2];
  const int64_t KD = v.kernel[0], KH = v.kernel[1], KW = v.kernel[2], sw = v.strides[2];
  const int64_t g = oc / k.mg, m = oc - g * k.mg;
  const bool direct = sw == 1;  // one phase: the output row itself
  float* acc = direct ? out : phases;
  const int64_t len = direct ? OW : sw * k.phase;
  for (int64_t i = 0; i < len; ++i) acc[i] = direct ? bias : 0.0f;
  const Reach* d0 = k.reach_d.data() + k.starts_d[static_cast<size_t>(od)];
  const Reach* d1 = k.reach_d.data() + k.starts_d[static_cast<size_t>(od) + 1];
  const Reach* h0 = k.reach_h.data() + k.starts_h[static_cast<size_t>(oh)];
  const Reach* h1 = k.reach_h.data() + k.starts_h[static_cast<size_t>(oh) + 1];
  for (int64_t ci = 0; ci < k.cg; ++ci) {
    const int64_t c = g * k.cg + ci;
    for (const Reach* d = d0; d != d1; ++d) {
      for (const Reach* h = h0; h != h1; ++h) {
        const float* xr = x + ((c * ID + d->i) * IH + h->i) * IW;
        const float* wr = w + (((c * k.mg + m) * KD + d->k) * KH + h->k) * KW;
        for (const ColumnTap& t : k.columns) {
          axpy(acc + t.ph * k.phase + t.q + t.lo, xr + t.lo, wr[t.kw], t.hi - t.lo);
        }
      }
    }
  }
  if (direct) return;
  if (sw == 2) {  // the common upsampling: both phases at once
    const float* p0 = phases;
    const float* p1 = phases + k.phase;
    const int64_t pairs = OW / 2;
    for (int64_t i = 0; i < pairs; ++i) {
      out[2 * i] = p0[i] + bias;
      out[2 * i + 1] = p1[i] + bias;
    }
    if (OW % 2) out[OW - 1] = p0[pairs] + bias;
    return;
  }
  for (int64_t ph = 0; ph < sw; ++ph) {
    const float* src = phases + ph * k.phase;
    for (int64_t i = 0, o = ph; o < OW; ++i, o += sw) out[o] = src[i] + bias;
  }
}

#define TERN_DECONV_ROW(NAME, ATTR)                                                        \
  ATTR void NAME##_row(const GroupedDeconv& k, const float* x, const float* w, float bias, \
                       int64_t oc, int64_t od, int64_t oh, float* out, float* phases) {    \
    row_impl(k, x, w, bias, oc, od, oh, out, phases);                                      \
  }
TERN_DECONV_ROW(baseline, )
#if defined(__x86_64__)
TERN_DECONV_ROW(avx2, __attribute__((target("avx2,fma"))))
TERN_DECONV_ROW(avx512, __attribute__((target("avx512f,avx512vl,avx2,fma"))))
#endif
#undef TERN_DECONV_ROW

Status run_grouped(const GroupedDeconv& k, const KernelArgs& a, const ExecContext& exec) {
  const ops::ConvTransposeParams& p = k.p;
  const ops::Window& v = k.w3;
  const int64_t c = p.x[1], m = p.y[1];
  const int64_t od = v.out[0], oh = v.out[1], ow = v.out[2];
  const int64_t in_plane = v.in[0] * v.in[1] * v.in[2];
  const float* x = a.inputs[0]->data<float>();
  const float* w = a.inputs[1]->data<float>();
  const float* bias = p.has_bias ? a.inputs[2]->data<float>() : nullptr;
  float* y = a.outputs[0]->data<float>();
  const int64_t rows = p.x[0] * m * od * oh;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, ow * k.cg));
  parallel_for(rows, grain, exec.num_threads, [&](int64_t r0, int64_t r1) {
    std::vector<float> phases(static_cast<size_t>(v.strides[2] == 1 ? 0 : v.strides[2] * k.phase));
    // Row r is (image, channel, depth, height), counted on from r0.
    int64_t h = r0 % oh, d = r0 / oh % od, ch = r0 / (od * oh) % m, b = r0 / (m * od * oh);
    for (int64_t r = r0; r < r1; ++r) {
      k.row(k, x + b * c * in_plane, w, bias ? bias[ch] : 0.0f, ch, d, h, y + r * ow,
            phases.data());
      if (++h < oh) continue;
      h = 0;
      if (++d < od) continue;
      d = 0;
      if (++ch < m) continue;
      ch = 0;
      ++b;
    }
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_grouped_deconv(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  TERN_ASSIGN_OR_RETURN(ops::ConvTransposeParams p, ops::parse_conv_transpose(ctx));
  if (p.group == 1) return unsupported("grouped ConvTranspose: one group");
  GroupedDeconv k;
  k.cg = p.x[1] / p.group;
  if (k.cg > kMaxGroupChannels) {
    return unsupported("grouped ConvTranspose: over ", kMaxGroupChannels,
                       " input channels per group");
  }
  k.mg = p.w[1];
  k.w3 = ops::as_3d(p.win);
  k.p = std::move(p);
  const ops::Window& v = k.w3;
  k.phase = (v.out[2] + v.strides[2] - 1) / v.strides[2];
  reaches(v.in[0], v.out[0], v.kernel[0], v.strides[0], v.dilations[0], v.pads_begin[0], &k.reach_d,
          &k.starts_d);
  reaches(v.in[1], v.out[1], v.kernel[1], v.strides[1], v.dilations[1], v.pads_begin[1], &k.reach_h,
          &k.starts_h);
  const int64_t sw = v.strides[2];
  for (int64_t kw = 0; kw < v.kernel[2]; ++kw) {
    const int64_t off = kw * v.dilations[2] - v.pads_begin[2];
    const int64_t ph = ((off % sw) + sw) % sw, q = (off - ph) / sw;
    const int64_t count = (v.out[2] - ph + sw - 1) / sw;  // the phase's columns
    const int64_t lo = std::max<int64_t>(0, -q), hi = std::min<int64_t>(v.in[2], count - q);
    if (hi > lo) k.columns.push_back({kw, ph, q, lo, hi});
  }
  k.row = baseline_row;
  const char* name = "baseline";
#if defined(__x86_64__)
  const CpuIsa isa = effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability));
  if (isa == CpuIsa::kAvx512) k.row = avx512_row, name = "avx512";
  if (isa == CpuIsa::kAvx2) k.row = avx2_row, name = "avx2";
#endif
  return make_kernel(str_cat("grouped_rows.", name), std::move(k), run_grouped);
}

}  // namespace

TERN_REGISTRATION void register_cpu_conv_transpose_grouped(KernelRegistry& r) {
  // Before oneDNN's deconvolution (priority 0), which it beats on these shapes.
  r.add("ConvTranspose", "cpu", DType::kFloat32, make_grouped_deconv, /*priority=*/1);
}

}  // namespace tern
