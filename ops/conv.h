// Conv: params, shape inference and the naive reference (float32, 1-D to 3-D, groups, dilations).
// ConvInteger (ops/conv_integer.cpp) shares the geometry and the reference's loop nest.
#pragma once

#include "core/kernel.h"
#include "ops/common/window.h"

namespace tern::ops {

struct ConvParams {
  Window win;
  int64_t group = 1;
  Shape x, w, y;  // [N, C, ...], [M, C/group, k...], [N, M, ...]
  bool has_bias = false;
};

// any_float: shape inference's check (float16/bfloat16 too); kernels keep the default (float32).
Expected<ConvParams> parse_conv(const OpContext& ctx, bool any_float = false);
// The shapes and window of input 0 convolved with weight 1 (group, kernel_shape, strides, pads,
// dilations, auto_pad), whatever their dtypes; has_bias stays false.
Expected<ConvParams> parse_conv_window(const OpContext& ctx);
// y = conv(x, w) + b; b may be null. Accumulates in double.
void conv_reference(const ConvParams& p, const float* x, const float* w, const float* b, float* y);

// The reference's loop nest: for every output element (flat index `at`, output channel m), acc
// starts at init(m) and adds product(x index, w index) over the window's taps inside the input;
// store(at, acc) writes it.
template <class Init, class Product, class Store>
void conv_reference_loops(const ConvParams& p, Init init, Product product, Store store) {
  const Window v = as_3d(p.win);
  const int64_t N = p.x[0], C = p.x[1], M = p.w[0], G = p.group;
  const int64_t Cg = C / G, Mg = M / G;
  const int64_t ID = v.in[0], IH = v.in[1], IW = v.in[2];
  const int64_t OD = v.out[0], OH = v.out[1], OW = v.out[2];
  const int64_t KD = v.kernel[0], KH = v.kernel[1], KW = v.kernel[2];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) {
      const int64_t g = m / Mg;
      for (int64_t od = 0; od < OD; ++od)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            auto acc = init(m);
            for (int64_t c = 0; c < Cg; ++c)
              for (int64_t kd = 0; kd < KD; ++kd) {
                const int64_t id = od * v.strides[0] - v.pads_begin[0] + kd * v.dilations[0];
                if (id < 0 || id >= ID) continue;
                for (int64_t kh = 0; kh < KH; ++kh) {
                  const int64_t ih = oh * v.strides[1] - v.pads_begin[1] + kh * v.dilations[1];
                  if (ih < 0 || ih >= IH) continue;
                  for (int64_t kw = 0; kw < KW; ++kw) {
                    const int64_t iw = ow * v.strides[2] - v.pads_begin[2] + kw * v.dilations[2];
                    if (iw < 0 || iw >= IW) continue;
                    acc += product((((n * C + g * Cg + c) * ID + id) * IH + ih) * IW + iw,
                                   (((m * Cg + c) * KD + kd) * KH + kh) * KW + kw);
                  }
                }
              }
            store((((n * M + m) * OD + od) * OH + oh) * OW + ow, acc);
          }
    }
}

}  // namespace tern::ops
