// DeformConv on the CPU (float32) as deformable im2col + GEMM. Per image, the bilinear sample of
// every (offset group, tap, output pixel) — four neighbour offsets and four weights, the mask and
// the zero padding folded into the weights — is computed once and shared by the channels of its
// offset group; each convolution group's columns [C/group * kH * kW, oH * oW] are then filled
// from those samples and multiplied by the group's weights with the backend's GEMM.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/blas_verbose.h"
#include "backends/cpu/cpu_gemm.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "ops/common/op_utils.h"
#include "ops/deform_conv.h"

namespace tern {
namespace {

// One bilinear sample: neighbours (y0, x0), (y0, x0 + 1), (y0 + 1, x0), (y0 + 1, x0 + 1) as flat
// offsets in the plane; a neighbour outside the image has weight 0 and offset 0.
struct Sample {
  int32_t o[4];
  float w[4];
};
static_assert(sizeof(Sample) == 32);

struct DeformKernel {
  ops::DeformConvParams p;
  int64_t cg = 0, mg = 0, taps = 0, pixels = 0, c_per_og = 0;
  size_t samples_bytes = 0;  // the workspace holds the samples, then the columns
};

Sample make_sample(const ops::DeformConvParams& p, float y, float x, float mask) {
  Sample s{{0, 0, 0, 0}, {0, 0, 0, 0}};
  const auto H = static_cast<float>(p.h), W = static_cast<float>(p.w);
  if (!(y > -1.0f && y < H && x > -1.0f && x < W)) return s;  // also NaN
  const float fy = std::floor(y), fx = std::floor(x);
  const auto y0 = static_cast<int64_t>(fy), x0 = static_cast<int64_t>(fx);
  const float ly = y - fy, lx = x - fx;
  const float wy[2] = {1.0f - ly, ly}, wx[2] = {1.0f - lx, lx};
  for (int k = 0; k < 4; ++k) {
    const int64_t yy = y0 + k / 2, xx = x0 + k % 2;
    if (yy < 0 || yy >= p.h || xx < 0 || xx >= p.w) continue;
    s.o[k] = static_cast<int32_t>(yy * p.w + xx);
    s.w[k] = wy[k / 2] * wx[k % 2] * mask;
  }
  return s;
}

Status run_deform_conv(const DeformKernel& k, const KernelArgs& a, const ExecContext& exec) {
  const ops::DeformConvParams& p = k.p;
  const float* x = a.inputs[0]->data<float>();
  const float* wt = a.inputs[1]->data<float>();
  const float* off = a.inputs[2]->data<float>();
  const float* bias = p.has_bias ? a.inputs[3]->data<float>() : nullptr;
  const float* mask = p.has_mask ? a.inputs[4]->data<float>() : nullptr;
  float* y = a.outputs[0]->data<float>();
  auto* samples = static_cast<Sample*>(a.workspace);
  float* col = reinterpret_cast<float*>(static_cast<char*>(a.workspace) + k.samples_bytes);
  const int64_t plane = p.h * p.w, og_taps = p.offset_group * k.taps;
  for (int64_t b = 0; b < p.n; ++b) {
    // samples[(og * taps + tap) * pixels + pixel]
    parallel_for(og_taps, 1, exec.num_threads, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t t = r % k.taps, i = t / p.kw, j = t % p.kw;
        const float* dy = off + ((b * og_taps + r) * 2) * k.pixels;
        const float* dx = dy + k.pixels;
        const float* mk = mask ? mask + (b * og_taps + r) * k.pixels : nullptr;
        Sample* s = samples + r * k.pixels;
        for (int64_t oy = 0; oy < p.oh; ++oy) {
          const auto base_y = static_cast<float>(oy * p.stride_h - p.pad_h + i * p.dil_h);
          for (int64_t ox = 0; ox < p.ow; ++ox) {
            const auto base_x = static_cast<float>(ox * p.stride_w - p.pad_w + j * p.dil_w);
            const int64_t px = oy * p.ow + ox;
            s[px] = make_sample(p, base_y + dy[px], base_x + dx[px], mk ? mk[px] : 1.0f);
          }
        }
      }
    });
    for (int64_t g = 0; g < p.group; ++g) {
      // col[(ci, tap), pixel]
      parallel_for(k.cg * k.taps, 4, exec.num_threads, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t ci = r / k.taps, t = r % k.taps, c = g * k.cg + ci;
          const float* xc = x + (b * p.c + c) * plane;
          const Sample* s = samples + ((c / k.c_per_og) * k.taps + t) * k.pixels;
          float* out = col + r * k.pixels;
          for (int64_t px = 0; px < k.pixels; ++px) {
            const Sample& q = s[px];
            out[px] = q.w[0] * xc[q.o[0]] + q.w[1] * xc[q.o[1]] + q.w[2] * xc[q.o[2]] +
                      q.w[3] * xc[q.o[3]];
          }
        }
      });
      const int64_t depth = k.cg * k.taps;
      const GemmShape s{false, false, k.mg, k.pixels, depth};
      BlasVerbose verbose(exec, "DeformConv", cpu_gemm_label(s), s);
      cpu_conv_group_gemm(k.mg, k.pixels, depth, wt + g * k.mg * depth, col,
                          bias ? bias + g * k.mg : nullptr, y + (b * p.m + g * k.mg) * k.pixels,
                          exec.num_threads, exec.deterministic);
    }
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_deform_conv(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  TERN_ASSIGN_OR_RETURN(ops::DeformConvParams p, ops::parse_deform_conv(ctx));
  if (p.dtype != DType::kFloat32) return unsupported("the CPU DeformConv takes float32");
  if (p.h * p.w > std::numeric_limits<int32_t>::max()) {
    return unsupported("DeformConv input planes over 2^31 elements");
  }
  DeformKernel k;
  k.p = p;
  k.cg = p.c / p.group;
  k.mg = p.m / p.group;
  k.taps = p.kh * p.kw;
  k.pixels = p.oh * p.ow;
  k.c_per_og = p.c / p.offset_group;
  k.samples_bytes = static_cast<size_t>(p.offset_group * k.taps * k.pixels) * sizeof(Sample);
  const size_t ws =
      k.samples_bytes +
      static_cast<size_t>(std::max<int64_t>(1, k.cg * k.taps * k.pixels)) * sizeof(float);
  return make_kernel("deform_im2col_gemm", std::move(k), run_deform_conv, ws);
}

}  // namespace

TERN_REGISTRATION void register_cpu_deform_conv(KernelRegistry& r) {
  r.add("DeformConv", "cpu", DType::kFloat32, make_deform_conv);
}

}  // namespace tern
