#include "ops/conv.h"

#include "core/parallel.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace ops {

Expected<ConvParams> parse_conv(const OpContext& ctx) {
  ConvParams p;
  p.x = ctx.inputs[0].shape;
  p.w = ctx.inputs[1].shape;
  if (ctx.inputs[0].dtype != DType::kFloat32) return dtype_error(ctx, 0, "float32");
  TERN_RETURN_IF_ERROR(require_same_dtype(ctx, 0, 1));
  if (p.w.size() != p.x.size()) {
    return invalid_argument("weight '", ctx.input_names[1], "' ", shape_str(p.w), " and input '",
                            ctx.input_names[0], "' ", shape_str(p.x), " must have the same rank");
  }
  TERN_ASSIGN_OR_RETURN(p.group, ctx.attrs().get_int("group", 1));
  if (p.group <= 0 || p.x.size() < 3) return invalid_model("group must be positive, rank >= 3");
  if (p.x[1] != p.w[1] * p.group || p.w[0] % p.group != 0) {
    return invalid_argument("input '", ctx.input_names[0], "' has ", p.x[1],
                            " channels but weight '", ctx.input_names[1], "' ", shape_str(p.w),
                            " with group ", p.group, " expects ", p.w[1] * p.group);
  }
  std::vector<int64_t> kernel(p.w.begin() + 2, p.w.end());
  TERN_ASSIGN_OR_RETURN(auto attr_kernel, ctx.attrs().get_ints("kernel_shape", kernel));
  if (attr_kernel != kernel) {
    return invalid_model("kernel_shape ", shape_str(attr_kernel), " does not match weight '",
                         ctx.input_names[1], "' ", shape_str(p.w));
  }
  TERN_ASSIGN_OR_RETURN(p.win, forward_window(ctx.attrs(), p.x, kernel, false));
  if (p.win.spatial > 3) return unsupported("Conv with ", p.win.spatial, " spatial dims");
  p.has_bias = ctx.has_input(2);
  if (p.has_bias && ctx.inputs[2].shape != Shape{p.w[0]}) {
    return invalid_argument("bias '", ctx.input_names[2], "' must have shape [", p.w[0], "], got ",
                            shape_str(ctx.inputs[2].shape));
  }
  p.y = {p.x[0], p.w[0]};
  p.y.insert(p.y.end(), p.win.out.begin(), p.win.out.end());
  return p;
}

void conv_reference(const ConvParams& p, const float* x, const float* w, const float* b, float* y) {
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
            double acc = b ? b[m] : 0.0;
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
                    const float xv = x[(((n * C + g * Cg + c) * ID + id) * IH + ih) * IW + iw];
                    const float wv = w[(((m * Cg + c) * KD + kd) * KH + kh) * KW + kw];
                    acc += static_cast<double>(xv) * wv;
                  }
                }
              }
            y[(((n * M + m) * OD + od) * OH + oh) * OW + ow] = static_cast<float>(acc);
          }
    }
}

}  // namespace ops

namespace {

Status infer_conv(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::ConvParams p, ops::parse_conv(ctx));
  ctx.set_output(0, ctx.inputs[0].dtype, p.y);
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_conv_reference(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  TERN_ASSIGN_OR_RETURN(ops::ConvParams p, ops::parse_conv(ctx));
  return make_kernel("reference", std::move(p),
                     [](const ops::ConvParams& q, const KernelArgs& a, const ExecContext&) {
                       const float* b = q.has_bias ? a.inputs[2]->data<float>() : nullptr;
                       ops::conv_reference(q, a.inputs[0]->data<float>(),
                                           a.inputs[1]->data<float>(), b,
                                           a.outputs[0]->data<float>());
                       return Status::ok();
                     });
}

}  // namespace

void register_op_conv(OpRegistry& r) {
  r.add({"Conv",
         2,
         3,
         1,
         1,
         infer_conv,
         make_conv_reference,
         {},
         attrs({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"})});
}

}  // namespace tern
