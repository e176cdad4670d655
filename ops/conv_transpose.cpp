#include "ops/conv_transpose.h"

#include <vector>

#include "ops/common/op_utils.h"

namespace tern {
namespace ops {

Expected<ConvTransposeParams> parse_conv_transpose(const OpContext& ctx, bool any_float) {
  ConvTransposeParams p;
  p.x = ctx.inputs[0].shape;
  p.w = ctx.inputs[1].shape;
  TERN_RETURN_IF_ERROR(require_f32_or_half(ctx, 0, any_float));
  TERN_RETURN_IF_ERROR(require_same_dtype(ctx, 0, 1));
  if (p.x.size() < 3 || p.w.size() != p.x.size()) {
    return invalid_argument("input '", ctx.input_names[0], "' ", shape_str(p.x), " and weight '",
                            ctx.input_names[1], "' ", shape_str(p.w),
                            " must have the same rank >= 3");
  }
  const size_t s = p.x.size() - 2;
  if (s > 3) return unsupported("ConvTranspose with ", s, " spatial dims");
  TERN_ASSIGN_OR_RETURN(p.group, ctx.attrs().get_int("group", 1));
  if (p.group <= 0 || p.x[1] != p.w[0] || p.w[0] % p.group != 0) {
    return invalid_argument("input '", ctx.input_names[0], "' has ", p.x[1], " channels; weight '",
                            ctx.input_names[1], "' ", shape_str(p.w), " with group ", p.group,
                            " does not match");
  }
  Window& w = p.win;
  w.spatial = s;
  w.in.assign(p.x.begin() + 2, p.x.end());
  w.kernel.assign(p.w.begin() + 2, p.w.end());
  const Attributes& at = ctx.attrs();
  TERN_ASSIGN_OR_RETURN(w.strides, at.get_ints("strides", std::vector<int64_t>(s, 1)));
  TERN_ASSIGN_OR_RETURN(w.dilations, at.get_ints("dilations", std::vector<int64_t>(s, 1)));
  TERN_ASSIGN_OR_RETURN(auto pads, at.get_ints("pads", std::vector<int64_t>(2 * s, 0)));
  TERN_ASSIGN_OR_RETURN(p.output_padding,
                        at.get_ints("output_padding", std::vector<int64_t>(s, 0)));
  TERN_ASSIGN_OR_RETURN(auto output_shape, at.get_ints("output_shape"));
  TERN_ASSIGN_OR_RETURN(std::string auto_pad, at.get_string("auto_pad", "NOTSET"));
  if (w.strides.size() != s || w.dilations.size() != s || pads.size() != 2 * s ||
      p.output_padding.size() != s) {
    return invalid_model("strides, dilations, output_padding and pads have the wrong length");
  }
  if (!output_shape.empty() && output_shape.size() != s) {
    if (output_shape.size() == s + 2) {
      output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
    } else {
      return invalid_model("output_shape must have ", s, " entries");
    }
  }
  w.pads_begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(s));
  w.pads_end.assign(pads.begin() + static_cast<std::ptrdiff_t>(s), pads.end());
  w.out.resize(s);
  for (size_t i = 0; i < s; ++i) {
    if (w.strides[i] <= 0 || w.dilations[i] <= 0) return invalid_model("strides must be positive");
    const int64_t extent = (w.kernel[i] - 1) * w.dilations[i] + 1;
    const int64_t full = w.strides[i] * (w.in[i] - 1) + p.output_padding[i] + extent;
    if (!output_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t target = output_shape.empty() ? w.in[i] * w.strides[i] : output_shape[i];
      const int64_t total = full - target;
      if (total < 0) return invalid_model("output_shape is larger than the op can produce");
      w.pads_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.pads_end[i] = total - w.pads_begin[i];
    } else if (auto_pad == "VALID") {
      w.pads_begin[i] = w.pads_end[i] = 0;
    }
    w.out[i] = full - w.pads_begin[i] - w.pads_end[i];
    if (w.out[i] <= 0) return invalid_argument("the output would be empty on spatial dim ", i);
  }
  p.has_bias = ctx.has_input(2);
  const int64_t M = p.w[1] * p.group;
  if (p.has_bias && ctx.inputs[2].shape != Shape{M}) {
    return invalid_argument("bias '", ctx.input_names[2], "' must have shape [", M, "]");
  }
  p.y = {p.x[0], M};
  p.y.insert(p.y.end(), w.out.begin(), w.out.end());
  return p;
}

void conv_transpose_reference(const ConvTransposeParams& p, const float* x, const float* w,
                              const float* b, float* y) {
  const Window v = as_3d(p.win);
  const int64_t N = p.x[0], C = p.x[1], G = p.group, Cg = C / G, Mg = p.w[1], M = Mg * G;
  const int64_t ID = v.in[0], IH = v.in[1], IW = v.in[2];
  const int64_t OD = v.out[0], OH = v.out[1], OW = v.out[2];
  const int64_t KD = v.kernel[0], KH = v.kernel[1], KW = v.kernel[2];
  std::vector<double> acc(static_cast<size_t>(N * M * OD * OH * OW), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t g = c / Cg;
      for (int64_t id = 0; id < ID; ++id)
        for (int64_t ih = 0; ih < IH; ++ih)
          for (int64_t iw = 0; iw < IW; ++iw) {
            const double xv = x[(((n * C + c) * ID + id) * IH + ih) * IW + iw];
            for (int64_t m = 0; m < Mg; ++m)
              for (int64_t kd = 0; kd < KD; ++kd) {
                const int64_t od = id * v.strides[0] - v.pads_begin[0] + kd * v.dilations[0];
                if (od < 0 || od >= OD) continue;
                for (int64_t kh = 0; kh < KH; ++kh) {
                  const int64_t oh = ih * v.strides[1] - v.pads_begin[1] + kh * v.dilations[1];
                  if (oh < 0 || oh >= OH) continue;
                  for (int64_t kw = 0; kw < KW; ++kw) {
                    const int64_t ow = iw * v.strides[2] - v.pads_begin[2] + kw * v.dilations[2];
                    if (ow < 0 || ow >= OW) continue;
                    const float wv = w[(((c * Mg + m) * KD + kd) * KH + kh) * KW + kw];
                    acc[static_cast<size_t>((((n * M + g * Mg + m) * OD + od) * OH + oh) * OW +
                                            ow)] += xv * wv;
                  }
                }
              }
          }
    }
  const int64_t plane = OD * OH * OW;
  for (int64_t i = 0; i < N * M * plane; ++i) {
    const double bias = b ? b[(i / plane) % M] : 0.0;
    y[i] = static_cast<float>(acc[static_cast<size_t>(i)] + bias);
  }
}

}  // namespace ops

namespace {

Status infer_conv_transpose(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::ConvTransposeParams p, ops::parse_conv_transpose(ctx, true));
  ctx.set_output(0, ctx.inputs[0].dtype, p.y);
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_reference(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::ConvTransposeParams p, ops::parse_conv_transpose(ctx));
  return make_kernel(
      "reference", std::move(p),
      [](const ops::ConvTransposeParams& q, const KernelArgs& a, const ExecContext&) {
        const float* b = q.has_bias ? a.inputs[2]->data<float>() : nullptr;
        ops::conv_transpose_reference(q, a.inputs[0]->data<float>(), a.inputs[1]->data<float>(), b,
                                      a.outputs[0]->data<float>());
        return Status::ok();
      });
}

}  // namespace

TERN_REGISTRATION void register_op_conv_transpose(OpRegistry& r) {
  r.add({"ConvTranspose",
         2,
         3,
         1,
         1,
         infer_conv_transpose,
         make_reference,
         {},
         attrs("auto_pad, dilations, group, output_padding, output_shape, pads, strides",
               {{"kernel_shape", "the weights' spatial dims are the kernel shape"}})});
}

}  // namespace tern
