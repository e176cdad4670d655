// Resize (nearest and linear, float32, plain layout, rank >= 2) as two passes per plane: each
// input row the plane needs is resampled along W once (into one of two cached rows), and each
// output row is then a copy of one such row (nearest) or a blend of two (linear), a contiguous
// loop the compiler vectorises. An upscale by s reads each input row for ~s output rows, so the
// gather work of the reference (per output element) drops by s and the rest streams.
// The leading dims (N, C, and for nearest any other) map output planes to input planes.
//
// Every other plan (cubic, antialiased, linear on any axes, tf_crop_and_resize; float32, float16,
// bfloat16, int8, uint8) runs as one pass per resampled axis, the axes that shrink the tensor
// most first: a pass over a leading axis blends whole contiguous rows (vectorised), the last
// axis's pass sums each output's taps along the row. Other dtypes are converted to float32 on
// the way in and rounded (integers to nearest, saturated) on the way out.
#include <algorithm>
#include <cstring>
#include <numeric>

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

// ---- one pass per axis ---------------------------------------------------------------------

// [outer, ax.in, inner] -> [outer, ax.out, inner]. `window`: per output, the first of its taps
// where they are consecutive input indices (-1 where clamping repeats an edge).
void axis_pass(const float* src, float* dst, int64_t outer, int64_t inner,
               const ops::ResizeAxis& ax, const std::vector<int64_t>& window, int threads) {
  const int64_t T = ax.taps;
  const int64_t* idx = ax.index.data();
  const float* wt = ax.weight.data();
  if (inner == 1) {
    const int64_t work = std::max<int64_t>(1, ax.out * T);
    parallel_for(outer, std::max<int64_t>(1, 32768 / work), threads, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        const float* s = src + o * ax.in;
        float* d = dst + o * ax.out;
        for (int64_t j = 0; j < ax.out; ++j) {
          const float* wj = wt + j * T;
          float acc = 0.0f;
          const int64_t first = window[static_cast<size_t>(j)];
          if (first >= 0) {
            const float* sj = s + first;
            for (int64_t k = 0; k < T; ++k) acc += wj[k] * sj[k];
          } else {
            const int64_t* ij = idx + j * T;
            for (int64_t k = 0; k < T; ++k) acc += wj[k] * s[ij[k]];
          }
          d[j] = acc;
        }
      }
    });
    return;
  }
  const int64_t rows = outer * ax.out;
  parallel_for(rows, std::max<int64_t>(1, 16384 / (inner * T)), threads, [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      const int64_t o = row / ax.out, j = row % ax.out;
      const float* s = src + o * ax.in * inner;
      float* d = dst + row * inner;
      const int64_t* ij = idx + j * T;
      const float* wj = wt + j * T;
      bool first = true;
      for (int64_t k = 0; k < T; ++k) {
        const float w = wj[k];
        if (w == 0.0f && !(first && k == T - 1)) continue;
        const float* sk = s + ij[k] * inner;
        if (first) {
          for (int64_t i = 0; i < inner; ++i) d[i] = w * sk[i];
          first = false;
        } else {
          for (int64_t i = 0; i < inner; ++i) d[i] += w * sk[i];
        }
      }
    }
  });
}

struct AxisPasses {
  ops::ResizePlan plan;
  std::vector<size_t> order;                  // the resampled axes, in the order they run
  std::vector<std::vector<int64_t>> windows;  // per axis: consecutive-tap starts (axis_pass)
};

template <class T>
void run_passes_typed(const AxisPasses& k, const Tensor& x, Tensor& y, int threads) {
  const ops::ResizePlan& p = k.plan;
  const size_t r = p.in.size();
  Shape cur = p.in;
  std::vector<float> buf[2];
  const float* src;
  if constexpr (std::is_same_v<T, float>) {
    src = x.data<float>();
  } else {
    buf[1].resize(static_cast<size_t>(numel(p.in)));
    const T* xs = static_cast<const T*>(x.raw());
    parallel_for(numel(p.in), 32768, threads, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) buf[1][static_cast<size_t>(i)] = static_cast<float>(xs[i]);
    });
    src = buf[1].data();
  }
  T* out = static_cast<T*>(y.raw());
  for (size_t n = 0; n < k.order.size(); ++n) {
    const size_t d = k.order[n];
    const ops::ResizeAxis& ax = p.axes[d];
    int64_t outer = 1, inner = 1;
    for (size_t i = 0; i < d; ++i) outer *= cur[i];
    for (size_t i = d + 1; i < r; ++i) inner *= cur[i];
    cur[d] = ax.out;
    float* dst;
    if (n + 1 == k.order.size() && std::is_same_v<T, float>) {
      dst = reinterpret_cast<float*>(out);
    } else {
      std::vector<float>& b = buf[n % 2];
      b.resize(static_cast<size_t>(numel(cur)));
      dst = b.data();
    }
    axis_pass(src, dst, outer, inner, ax, k.windows[d], threads);
    src = dst;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (k.order.empty()) {
      std::memcpy(out, src, static_cast<size_t>(numel(p.out)) * sizeof(float));
    }
  } else {
    parallel_for(numel(p.out), 32768, threads, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[i] = ops::round_resampled<T>(src[i]);
    });
  }
  ops::fill_extrapolated(p, out);
}

Status run_passes(const AxisPasses& k, const KernelArgs& a, const ExecContext& exec) {
  if (a.outputs[0]->numel() == 0) return Status::ok();
  const Tensor& x = *a.inputs[0];
  Tensor& y = *a.outputs[0];
  switch (k.plan.dtype) {
    case DType::kFloat32:
      run_passes_typed<float>(k, x, y, exec.num_threads);
      break;
    case DType::kFloat16:
      run_passes_typed<ops::Float16>(k, x, y, exec.num_threads);
      break;
    case DType::kBFloat16:
      run_passes_typed<ops::BFloat16>(k, x, y, exec.num_threads);
      break;
    case DType::kUInt8:
      run_passes_typed<uint8_t>(k, x, y, exec.num_threads);
      break;
    case DType::kInt8:
      run_passes_typed<int8_t>(k, x, y, exec.num_threads);
      break;
    default:
      return internal_error("resize_passes: dtype ", dtype_name(k.plan.dtype));
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_passes(const OpContext& ctx) {
  const DType dt = ctx.inputs[0].dtype;
  if (dt != DType::kFloat32 && dt != DType::kFloat16 && dt != DType::kBFloat16 &&
      dt != DType::kUInt8 && dt != DType::kInt8) {
    return ops::dtype_error(ctx, 0, "float32, float16, bfloat16, int8, uint8");
  }
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  AxisPasses k;
  TERN_ASSIGN_OR_RETURN(k.plan, ops::resize_plan(ctx));
  for (size_t d = 0; d < k.plan.axes.size(); ++d) {
    if (!k.plan.axes[d].identity && numel(k.plan.out) > 0) k.order.push_back(d);
  }
  // The order with the least work: each pass costs its multiply-adds (the elements before it,
  // scaled by out / in, times its taps), the last axis's (a gather per output, no vectors across
  // outputs) four times as much; rank <= 5 tries at most 120 orders.
  const std::vector<ops::ResizeAxis>& axes = k.plan.axes;
  auto cost = [&](const std::vector<size_t>& order) {
    double elements = static_cast<double>(numel(k.plan.in)), total = 0;
    for (size_t d : order) {
      elements = elements / static_cast<double>(axes[d].in) * static_cast<double>(axes[d].out);
      total += elements * axes[d].taps * (d + 1 == axes.size() ? 4.0 : 1.0);
    }
    return total;
  };
  std::sort(k.order.begin(), k.order.end());
  std::vector<size_t> best = k.order, order = k.order;
  while (std::next_permutation(order.begin(), order.end())) {
    if (cost(order) < cost(best)) best = order;
  }
  k.order = best;
  for (const ops::ResizeAxis& ax : axes) {
    std::vector<int64_t> window;
    for (int64_t j = 0; j < ax.out && !ax.index.empty(); ++j) {
      const int64_t* ij = ax.index.data() + j * ax.taps;
      bool consecutive = true;
      for (int64_t t = 1; t < ax.taps; ++t) consecutive = consecutive && ij[t] == ij[0] + t;
      window.push_back(consecutive ? ij[0] : -1);
    }
    k.windows.push_back(std::move(window));
  }
  return make_kernel("resize_passes", std::move(k), run_passes);
}

}  // namespace

TERN_REGISTRATION void register_cpu_resize_separable(KernelRegistry& r) {
  r.add("Resize", "cpu", DType::kFloat32, make_separable);
  r.add("Resize", "cpu", DType::kUndefined, make_passes, -1);
}

}  // namespace tern
