// Conv as im2col + GEMM (1-D to 3-D, groups, dilations, pads). It runs where oneDNN does not:
// when deterministic_algorithms is on (the GEMM then uses its fixed, shape-only partition, so
// outputs are bitwise identical at any thread count) and in builds without oneDNN.
#include <algorithm>
#include <cstring>

#include "backends/cpu/blas_verbose.h"
#include "backends/cpu/cpu_gemm.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "ops/common/op_utils.h"
#include "ops/conv.h"

namespace tern {

namespace {

struct Im2colConv {
  ops::ConvParams p;
  ops::Window w3;  // the window as 3-D (D, H, W)
  int64_t cg = 0, mg = 0, taps = 0, pixels = 0;
};

Status run_conv(const Im2colConv& k, const KernelArgs& a, const ExecContext& exec) {
  const ops::ConvParams& p = k.p;
  const ops::Window& w = k.w3;
  const float* x = a.inputs[0]->data<float>();
  const float* wt = a.inputs[1]->data<float>();
  const float* bias = a.inputs.size() > 2 && a.inputs[2] ? a.inputs[2]->data<float>() : nullptr;
  float* y = a.outputs[0]->data<float>();
  float* col = static_cast<float*>(a.workspace);
  const int64_t n = p.x[0], c = p.x[1], m = p.w[0];
  const int64_t in_pixels = w.in[0] * w.in[1] * w.in[2];
  const int64_t kh = w.kernel[1], kw = w.kernel[2];
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t g = 0; g < p.group; ++g) {
      const float* xg = x + (b * c + g * k.cg) * in_pixels;
      // col[(ci, kd, kh, kw), (od, oh, ow)]
      parallel_for(k.cg * k.taps, 4, exec.num_threads, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t ci = r / k.taps, t = r % k.taps;
          const int64_t fd = t / (kh * kw), fh = (t / kw) % kh, fw = t % kw;
          float* out = col + r * k.pixels;
          const float* xc = xg + ci * in_pixels;
          for (int64_t od = 0; od < w.out[0]; ++od) {
            const int64_t id = od * w.strides[0] - w.pads_begin[0] + fd * w.dilations[0];
            for (int64_t oh = 0; oh < w.out[1]; ++oh) {
              const int64_t ih = oh * w.strides[1] - w.pads_begin[1] + fh * w.dilations[1];
              float* o = out + (od * w.out[1] + oh) * w.out[2];
              const bool row_in = id >= 0 && id < w.in[0] && ih >= 0 && ih < w.in[1];
              for (int64_t ow = 0; ow < w.out[2]; ++ow) {
                const int64_t iw = ow * w.strides[2] - w.pads_begin[2] + fw * w.dilations[2];
                o[ow] = row_in && iw >= 0 && iw < w.in[2] ? xc[(id * w.in[1] + ih) * w.in[2] + iw]
                                                          : 0.0f;
              }
            }
          }
        }
      });
      const GemmShape s{false, false, k.mg, k.pixels, k.cg * k.taps};
      BlasVerbose verbose(exec, "Conv", cpu_gemm_label(s), s);
      cpu_conv_group_gemm(k.mg, k.pixels, k.cg * k.taps, wt + g * k.mg * k.cg * k.taps, col,
                          bias ? bias + g * k.mg : nullptr, y + (b * m + g * k.mg) * k.pixels,
                          exec.num_threads, exec.deterministic);
    }
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_conv(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  TERN_ASSIGN_OR_RETURN(ops::ConvParams p, ops::parse_conv(ctx));
  if (p.win.spatial < 1 || p.win.spatial > 3) return unsupported("im2col Conv: 1-D to 3-D only");
  Im2colConv k;
  k.p = p;
  k.w3 = ops::as_3d(p.win);
  k.cg = p.x[1] / p.group;
  k.mg = p.w[0] / p.group;
  k.taps = k.w3.kernel[0] * k.w3.kernel[1] * k.w3.kernel[2];
  k.pixels = k.w3.out[0] * k.w3.out[1] * k.w3.out[2];
  const size_t ws =
      static_cast<size_t>(std::max<int64_t>(1, k.cg * k.taps * k.pixels)) * sizeof(float);
  return make_kernel("im2col_gemm", std::move(k), run_conv, ws);
}

}  // namespace

TERN_REGISTRATION void register_cpu_conv_im2col(KernelRegistry& r) {
  r.add("Conv", "cpu", DType::kFloat32, make_conv, /*priority=*/-1);
}

}  // namespace tern
