// ConvTranspose whose kernel equals its stride (no pads, dilations, output padding or groups): the
// kernels' footprints do not overlap, so each input pixel writes its own output patch. One GEMM
// per image computes every patch, P[(m, tap), pixel] = sum_c W[c, (m, tap)] * X[c, pixel], and a
// scatter places them (adding the bias). This is the 2x2 / stride-2 upsampling of segmentation
// and detection heads; oneDNN's deconvolution runs it far below GEMM speed when output channels
// are few. Bitwise reproducible across thread counts with deterministic_algorithms.
#include <algorithm>

#include "backends/cpu/blas_verbose.h"
#include "backends/cpu/cpu_gemm.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "ops/common/op_utils.h"
#include "ops/conv_transpose.h"

namespace tern {

namespace {

struct PatchDeconv {
  ops::ConvTransposeParams p;
  ops::Window w3;                   // as 3-D (D, H, W)
  int64_t taps = 0, in_pixels = 0;  // kernel elements; input pixels per channel
};

Status run_patches(const PatchDeconv& k, const KernelArgs& a, const ExecContext& exec) {
  const ops::ConvTransposeParams& p = k.p;
  const ops::Window& w = k.w3;
  const int64_t n = p.x[0], c = p.x[1], m = p.y[1];
  const int64_t rows = m * k.taps;
  const int64_t kd = w.kernel[0], kh = w.kernel[1], kw = w.kernel[2];
  const int64_t ih = w.in[1], iw = w.in[2];
  const int64_t od = w.out[0], oh = w.out[1], ow = w.out[2];
  const float* x = a.inputs[0]->data<float>();
  const float* wt = a.inputs[1]->data<float>();
  const float* bias = p.has_bias ? a.inputs[2]->data<float>() : nullptr;
  float* y = a.outputs[0]->data<float>();
  float* patches = static_cast<float*>(a.workspace);
  for (int64_t b = 0; b < n; ++b) {
    // patches = W^T [m * taps, c] x X [c, pixels]
    const GemmShape s{true, false, rows, k.in_pixels, c, rows, k.in_pixels, k.in_pixels};
    {
      BlasVerbose verbose(exec, "ConvTranspose", cpu_gemm_label(s), s);
      cpu_sgemm(s, 1.0f, wt, x + b * c * k.in_pixels, 0.0f, patches, exec.num_threads,
                exec.deterministic);
    }
    float* yb = y + b * m * od * oh * ow;
    // One output row (channel, depth, height) at a time: its taps along W interleave kw patch
    // rows of one input row.
    parallel_for(m * od * oh, 16, exec.num_threads, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t ch = r / (od * oh), o_d = (r / oh) % od, o_h = r % oh;
        const int64_t fd = o_d % kd, fh = o_h % kh, i_d = o_d / kd, i_h = o_h / kh;
        const float bv = bias ? bias[ch] : 0.0f;
        float* out = yb + r * ow;
        const int64_t tap0 = (fd * kh + fh) * kw;
        const int64_t pix0 = (i_d * ih + i_h) * iw;
        for (int64_t fw = 0; fw < kw; ++fw) {
          const float* src = patches + (ch * k.taps + tap0 + fw) * k.in_pixels + pix0;
          for (int64_t i = 0; i < iw; ++i) out[i * kw + fw] = src[i] + bv;
        }
      }
    });
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_patch_deconv(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  TERN_ASSIGN_OR_RETURN(ops::ConvTransposeParams p, ops::parse_conv_transpose(ctx));
  if (p.group != 1) return unsupported("patch ConvTranspose: groups");
  for (size_t i = 0; i < p.win.spatial; ++i) {
    if (p.win.kernel[i] != p.win.strides[i] || p.win.dilations[i] != 1 ||
        p.win.pads_begin[i] != 0 || p.win.pads_end[i] != 0 || p.output_padding[i] != 0) {
      return unsupported(
          "patch ConvTranspose: kernel must equal stride, without pads, dilations "
          "or output padding");
    }
  }
  PatchDeconv k;
  k.p = p;
  k.w3 = ops::as_3d(p.win);
  k.taps = k.w3.kernel[0] * k.w3.kernel[1] * k.w3.kernel[2];
  k.in_pixels = k.w3.in[0] * k.w3.in[1] * k.w3.in[2];
  // The output must be exactly the input grid times the kernel (as it is without pads).
  for (int d = 0; d < 3; ++d) {
    if (k.w3.out[static_cast<size_t>(d)] !=
        k.w3.in[static_cast<size_t>(d)] * k.w3.kernel[static_cast<size_t>(d)]) {
      return unsupported("patch ConvTranspose: output_shape other than input x kernel");
    }
  }
  const size_t ws =
      static_cast<size_t>(std::max<int64_t>(1, p.y[1] * k.taps * k.in_pixels)) * sizeof(float);
  return make_kernel("patch_gemm", std::move(k), run_patches, ws);
}

}  // namespace

TERN_REGISTRATION void register_cpu_conv_transpose_patches(KernelRegistry& r) {
  // Before oneDNN's deconvolution (priority 0), which it beats on these shapes.
  r.add("ConvTranspose", "cpu", DType::kFloat32, make_patch_deconv, /*priority=*/1);
}

}  // namespace tern
