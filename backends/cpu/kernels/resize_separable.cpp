// Resize (nearest and linear, float32, plain layout, rank >= 2) as two passes per plane: each
// input row the plane needs is resampled along W once (into one of two cached rows), and each
// output row is then a copy of one such row (nearest) or a blend of two (linear), a contiguous
// loop the compiler vectorises. An upscale by s reads each input row for ~s output rows, so the
// gather work of the reference (per output element) drops by s and the rest streams.
// The leading dims (N, C, and for nearest any other) map output planes to input planes.
#include <algorithm>
#include <cstring>

#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "ops/common/op_utils.h"
#include "ops/resize.h"

namespace tern {
namespace {

struct SeparableResize {
  bool linear = false;
  int64_t IH = 1, IW = 1, OH = 1, OW = 1;
  std::vector<int64_t> plane_src;  // input plane of each output plane
  ops::ResizeTaps h, w;
};

// Keeps the two input rows last resampled along W (a plane's output rows walk its input rows
// forwards, so two slots serve both taps of a linear row).
struct RowCache {
  const SeparableResize* p;
  const float* plane = nullptr;
  int64_t row_of[2] = {-1, -1};
  float* slot[2];
  int next = 0;

  const float* get(int64_t ih) {
    for (int s = 0; s < 2; ++s) {
      if (row_of[s] == ih) return slot[s];
    }
    const int s = next;
    next ^= 1;
    row_of[s] = ih;
    const float* in = plane + ih * p->IW;
    float* out = slot[s];
    const int64_t* i0 = p->w.i0.data();
    if (p->linear) {
      const int64_t* i1 = p->w.i1.data();
      const float* w1 = p->w.w1.data();
      for (int64_t o = 0; o < p->OW; ++o) out[o] = in[i0[o]] + (in[i1[o]] - in[i0[o]]) * w1[o];
    } else {
      for (int64_t o = 0; o < p->OW; ++o) out[o] = in[i0[o]];
    }
    return out;
  }
};

Status run_separable(const SeparableResize& p, const KernelArgs& a, const ExecContext& exec) {
  if (a.outputs[0]->numel() == 0) return Status::ok();
  const float* src = a.inputs[0]->data<float>();
  float* dst = a.outputs[0]->data<float>();
  const int64_t planes = static_cast<int64_t>(p.plane_src.size());
  parallel_for(planes, std::max<int64_t>(1, 16384 / (p.OH * p.OW)), exec.num_threads,
               [&](int64_t b, int64_t e) {
                 std::vector<float> scratch(static_cast<size_t>(2 * p.OW));
                 for (int64_t pl = b; pl < e; ++pl) {
                   RowCache cache{&p,
                                  src + p.plane_src[static_cast<size_t>(pl)] * p.IH * p.IW,
                                  {-1, -1},
                                  {scratch.data(), scratch.data() + p.OW},
                                  0};
                   float* yp = dst + pl * p.OH * p.OW;
                   for (int64_t oh = 0; oh < p.OH; ++oh) {
                     const size_t t = static_cast<size_t>(oh);
                     float* out = yp + oh * p.OW;
                     const float* r0 = cache.get(p.h.i0[t]);
                     const float wh = p.linear ? p.h.w1[t] : 0.0f;
                     if (wh == 0.0f || p.h.i1[t] == p.h.i0[t]) {
                       std::memcpy(out, r0, static_cast<size_t>(p.OW) * sizeof(float));
                       continue;
                     }
                     const float* r1 = cache.get(p.h.i1[t]);
                     for (int64_t o = 0; o < p.OW; ++o) out[o] = r0[o] + (r1[o] - r0[o]) * wh;
                   }
                 }
               });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_separable(const OpContext& ctx) {
  if (ctx.inputs[0].dtype != DType::kFloat32) return ops::dtype_error(ctx, 0, "float32");
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  TERN_ASSIGN_OR_RETURN(ops::ResizeGeometry g, ops::resize_geometry(ctx));
  const size_t r = g.in.size();
  if (r < 2) return unsupported("resize_separable: rank-1 input");
  SeparableResize p;
  p.linear = g.linear;
  p.IH = g.in[r - 2];
  p.IW = g.in[r - 1];
  p.OH = g.out[r - 2];
  p.OW = g.out[r - 1];
  p.h = g.axes[r - 2];
  p.w = g.axes[r - 1];
  if (p.OH * p.OW == 0 || p.IH * p.IW == 0) return unsupported("resize_separable: empty planes");
  // Output plane -> input plane through the leading dims' index tables.
  int64_t planes = 1;
  for (size_t d = 0; d + 2 < r; ++d) planes *= g.out[d];
  if (planes > (int64_t{1} << 22)) return unsupported("resize_separable: too many planes");
  p.plane_src.assign(static_cast<size_t>(planes), 0);
  std::vector<int64_t> in_stride(r - 2, 1);  // of the leading dims, in input planes
  for (size_t d = r - 2; d-- > 1;) in_stride[d - 1] = in_stride[d] * g.in[d];
  for (int64_t pl = 0; pl < planes; ++pl) {
    int64_t rem = pl, src = 0;
    for (size_t d = r - 2; d-- > 0;) {
      src += g.axes[d].i0[static_cast<size_t>(rem % g.out[d])] * in_stride[d];
      rem /= g.out[d];
    }
    p.plane_src[static_cast<size_t>(pl)] = src;
  }
  return make_kernel("resize_separable", std::move(p), run_separable);
}

}  // namespace

void register_cpu_resize_separable(KernelRegistry& r) {
  r.add("Resize", "cpu", DType::kFloat32, make_separable);
}

}  // namespace tern
