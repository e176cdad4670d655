// MaxPool of uint8 / int8 values (quantized models: QOperator graphs, and QDQ ones where QDQ
// fusion moves the pooling onto the int8 values), 1-D to 3-D, without the Indices output.
// Channels-last data (the planner's layout for int8 activations between int8 convolutions): each
// output pixel is the running maximum of its taps' channel vectors, contiguous bytes the compiler
// vectorises. Plain data: per plane, each tap updates a whole output row at once, its valid
// columns computed ahead so the loop has no bounds checks. Padding is ignored (ONNX pads MaxPool
// with -inf); a window with no tap inside the input is declined (the reference takes it).
#include <algorithm>
#include <cstring>
#include <limits>

#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "ops/common/op_utils.h"
#include "ops/common/window.h"

namespace tern {
namespace {

struct Pool8 {
  ops::Window w;  // as_3d
  int64_t planes = 0, channels = 0, batch = 0;
  bool channels_last = false;
  bool is_signed = false;
};

// The output positions [lo, hi) of one dim whose tap t (offset t * dilation - pad) falls inside
// the input.
void valid_range(const ops::Window& w, size_t d, int64_t t, int64_t* lo, int64_t* hi) {
  const int64_t off = t * w.dilations[d] - w.pads_begin[d];
  const int64_t s = w.strides[d];
  // o * s + off >= 0  and  o * s + off <= in - 1
  *lo = off >= 0 ? 0 : (-off + s - 1) / s;
  const int64_t top = w.in[d] - 1 - off;
  *hi = top < 0 ? 0 : std::min(w.out[d], top / s + 1);
  *lo = std::min(*lo, *hi);
}

template <class T>
void pool_plane(const ops::Window& w, const T* __restrict x, T* __restrict y) {
  const int64_t od = w.out[0], oh = w.out[1], ow = w.out[2];
  std::fill(y, y + od * oh * ow, std::numeric_limits<T>::lowest());
  for (int64_t kd = 0; kd < w.kernel[0]; ++kd) {
    int64_t d0, d1;
    valid_range(w, 0, kd, &d0, &d1);
    for (int64_t kh = 0; kh < w.kernel[1]; ++kh) {
      int64_t h0, h1;
      valid_range(w, 1, kh, &h0, &h1);
      for (int64_t kw = 0; kw < w.kernel[2]; ++kw) {
        int64_t w0, w1;
        valid_range(w, 2, kw, &w0, &w1);
        const int64_t cw = kw * w.dilations[2] - w.pads_begin[2], sw = w.strides[2];
        for (int64_t d = d0; d < d1; ++d) {
          const int64_t id = d * w.strides[0] + kd * w.dilations[0] - w.pads_begin[0];
          for (int64_t h = h0; h < h1; ++h) {
            const int64_t ih = h * w.strides[1] + kh * w.dilations[1] - w.pads_begin[1];
            const T* row = x + (id * w.in[1] + ih) * w.in[2] + cw;
            T* out = y + (d * oh + h) * ow;
            if (sw == 1) {
              for (int64_t o = w0; o < w1; ++o) out[o] = std::max(out[o], row[o]);
            } else {
              for (int64_t o = w0; o < w1; ++o) out[o] = std::max(out[o], row[o * sw]);
            }
          }
        }
      }
    }
  }
}

// One image's output pixels [p0, p1) in channels-last order.
template <class T>
void pool_pixels(const ops::Window& w, int64_t c, const T* __restrict x, T* __restrict y,
                 int64_t p0, int64_t p1) {
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t ow = p % w.out[2], oh = (p / w.out[2]) % w.out[1], od = p / (w.out[2] * w.out[1]);
    T* out = y + p * c;
    std::fill(out, out + c, std::numeric_limits<T>::lowest());
    for (int64_t kd = 0; kd < w.kernel[0]; ++kd) {
      const int64_t id = od * w.strides[0] + kd * w.dilations[0] - w.pads_begin[0];
      if (id < 0 || id >= w.in[0]) continue;
      for (int64_t kh = 0; kh < w.kernel[1]; ++kh) {
        const int64_t ih = oh * w.strides[1] + kh * w.dilations[1] - w.pads_begin[1];
        if (ih < 0 || ih >= w.in[1]) continue;
        for (int64_t kw = 0; kw < w.kernel[2]; ++kw) {
          const int64_t iw = ow * w.strides[2] + kw * w.dilations[2] - w.pads_begin[2];
          if (iw < 0 || iw >= w.in[2]) continue;
          const T* in = x + ((id * w.in[1] + ih) * w.in[2] + iw) * c;
          for (int64_t k = 0; k < c; ++k) out[k] = std::max(out[k], in[k]);
        }
      }
    }
  }
}

template <class T>
void run_typed(const Pool8& p, const T* x, T* y, int threads) {
  const ops::Window& w = p.w;
  const int64_t in_plane = w.in[0] * w.in[1] * w.in[2];
  const int64_t out_plane = w.out[0] * w.out[1] * w.out[2];
  if (!p.channels_last) {
    parallel_for(p.planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(in_plane, 1)), threads,
                 [&](int64_t b, int64_t e) {
                   for (int64_t i = b; i < e; ++i) {
                     pool_plane<T>(w, x + i * in_plane, y + i * out_plane);
                   }
                 });
    return;
  }
  const int64_t c = p.channels;
  parallel_for(p.batch * out_plane, std::max<int64_t>(1, 16384 / std::max<int64_t>(c * 9, 1)),
               threads, [&](int64_t b, int64_t e) {
                 while (b < e) {
                   const int64_t n = b / out_plane, p0 = b % out_plane;
                   const int64_t p1 = std::min(out_plane, p0 + (e - b));
                   pool_pixels<T>(w, c, x + n * in_plane * c, y + n * out_plane * c, p0, p1);
                   b += p1 - p0;
                 }
               });
}

Status run_pool8(const Pool8& p, const KernelArgs& a, const ExecContext& exec) {
  if (p.is_signed) {
    run_typed(p, a.inputs[0]->data<int8_t>(), a.outputs[0]->data<int8_t>(), exec.num_threads);
  } else {
    run_typed(p, a.inputs[0]->data<uint8_t>(), a.outputs[0]->data<uint8_t>(), exec.num_threads);
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_pool8(const OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  const DType t = ctx.inputs[0].dtype;
  if ((t != DType::kUInt8 && t != DType::kInt8) || x.size() < 3 || x.size() > 5) {
    return unsupported("max_pool_8bit: uint8/int8 [N, C, W] to [N, C, D, H, W]");
  }
  if (ctx.outputs.size() > 1 && ctx.outputs[1].present) {
    return unsupported("max_pool_8bit: MaxPool's Indices output");
  }
  Pool8 p;
  p.channels = x[1];
  p.batch = x[0];
  p.planes = x[0] * x[1];
  p.is_signed = t == DType::kInt8;
  const int in_block = ctx.inputs[0].block, out_block = ctx.outputs[0].block;
  p.channels_last = in_block != 0;
  if (in_block != out_block || (in_block != 0 && in_block != x[1])) {
    return unsupported("max_pool_8bit: plain or channels-last data, the same in and out");
  }
  TERN_ASSIGN_OR_RETURN(int64_t ceil, ctx.attrs().get_int("ceil_mode", 0));
  TERN_ASSIGN_OR_RETURN(ops::Window w, ops::forward_window(ctx.attrs(), x, {}, ceil != 0));
  p.w = ops::as_3d(w);
  for (size_t d = 0; d < 3; ++d) {
    // Every window holds a tap inside the input: its first tap, or its last one.
    const int64_t first = -p.w.pads_begin[d];
    const int64_t last_start = (p.w.out[d] - 1) * p.w.strides[d] - p.w.pads_begin[d];
    const int64_t extent = (p.w.kernel[d] - 1) * p.w.dilations[d];
    for (int64_t s : {first, last_start}) {
      bool any = false;
      for (int64_t k = 0; k <= extent && !any; k += p.w.dilations[d]) {
        any = s + k >= 0 && s + k < p.w.in[d];
      }
      if (!any) return unsupported("max_pool_8bit: a window entirely in the padding");
    }
  }
  return make_kernel("max_pool_8bit", std::move(p), run_pool8);
}

}  // namespace

TERN_REGISTRATION void register_cpu_max_pool_8bit(KernelRegistry& r) {
  for (DType t : {DType::kUInt8, DType::kInt8}) r.add("MaxPool", "cpu", t, make_pool8);
}

}  // namespace tern
