// MaxUnpool (opsets 9, 11, 22): scatters X into a zero tensor at MaxPool's Indices (flat
// positions, as MaxPool writes them with storage_order 0) of the pooling window run backwards,
// (in - 1) * stride + kernel - pads per spatial dim. An output_shape input, at least that large,
// sets the output's shape and the unpooled tensor fills its leading corner (ONNX's reference;
// ORT instead reads the indices as positions in output_shape). Float types; the reference
// kernel only moves elements.
#include <cstring>

#include "ops/common/op_utils.h"

namespace tern {
namespace {

struct UnpoolShapes {
  Shape inferred, out;  // the window run backwards; the output (output_shape or inferred)
};

Expected<UnpoolShapes> unpool_shapes(const OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  if (!dtype_is_float(ctx.inputs[0].dtype)) return ops::dtype_error(ctx, 0, "float types");
  if (ctx.inputs[1].dtype != DType::kInt64) return ops::dtype_error(ctx, 1, "int64");
  if (x.size() < 3) {
    return invalid_argument("input '", ctx.input_names[0], "' must be [N, C, spatial...], got ",
                            shape_str(x));
  }
  if (ctx.inputs[1].shape != x) {
    return invalid_argument("indices '", ctx.input_names[1], "' ", shape_str(ctx.inputs[1].shape),
                            " must have the shape of input '", ctx.input_names[0], "' ",
                            shape_str(x));
  }
  const size_t s = x.size() - 2;
  TERN_ASSIGN_OR_RETURN(auto kernel, ctx.attrs().get_ints("kernel_shape"));
  TERN_ASSIGN_OR_RETURN(auto strides, ctx.attrs().get_ints("strides", std::vector<int64_t>(s, 1)));
  TERN_ASSIGN_OR_RETURN(auto pads, ctx.attrs().get_ints("pads", std::vector<int64_t>(2 * s, 0)));
  if (kernel.size() != s || strides.size() != s || pads.size() != 2 * s) {
    return invalid_model("kernel_shape, strides and pads must have ", s, ", ", s, " and ", 2 * s,
                         " entries for input ", shape_str(x));
  }
  for (size_t i = 0; i < s; ++i) {
    const int64_t lim = int64_t{1} << 31;
    if (kernel[i] < 1 || strides[i] < 1 || kernel[i] > lim || strides[i] > lim || pads[i] < 0 ||
        pads[s + i] < 0 || pads[i] > lim || pads[s + i] > lim || x[2 + i] > lim) {
      return invalid_model("kernel_shape and strides must be in [1, 2^31], pads in [0, 2^31]");
    }
  }
  UnpoolShapes r;
  r.inferred = {x[0], x[1]};
  for (size_t i = 0; i < s; ++i) {
    r.inferred.push_back((x[2 + i] - 1) * strides[i] + kernel[i] - pads[i] - pads[s + i]);
    if (r.inferred.back() < 0) {
      return invalid_argument("MaxUnpool's output shape ", shape_str(r.inferred), " is negative");
    }
  }
  r.out = r.inferred;
  if (ctx.has_input(2)) {
    if (ctx.inputs[2].dtype != DType::kInt64) return ops::dtype_error(ctx, 2, "int64");
    TERN_ASSIGN_OR_RETURN(r.out, ops::input_ints(ctx, 2));
    bool fits = r.out.size() == x.size() && r.out[0] == x[0] && r.out[1] == x[1];
    for (size_t i = 2; fits && i < r.out.size(); ++i) fits = r.out[i] >= r.inferred[i];
    if (!fits) {
      return invalid_argument("output_shape ", shape_str(r.out), " must be [", x[0], ", ", x[1],
                              ", spatial...] and hold the unpooled ", shape_str(r.inferred));
    }
  }
  return r;
}

Status infer_max_unpool(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(UnpoolShapes r, unpool_shapes(ctx));
  ctx.set_output(0, ctx.inputs[0].dtype, r.out);
  return Status::ok();
}

// Index `i` of the inferred shape as a flat position in the output (the same where they agree).
int64_t place(const UnpoolShapes& r, int64_t i) {
  int64_t out = 0, stride = 1;
  for (size_t d = r.inferred.size(); d-- > 0;) {
    out += (i % r.inferred[d]) * stride;
    i /= r.inferred[d];
    stride *= r.out[d];
  }
  return out;
}

Status run_max_unpool(const UnpoolShapes& r, const KernelArgs& a, const ExecContext&) {
  const Tensor& x = *a.inputs[0];
  const int64_t* idx = a.inputs[1]->data<int64_t>();
  Tensor& y = *a.outputs[0];
  const int64_t total = numel(r.inferred);
  std::memset(y.raw(), 0, static_cast<size_t>(y.numel()) * dtype_size(y.dtype()));
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (idx[i] < 0 || idx[i] >= total) {
      return invalid_argument("MaxUnpool index ", idx[i], " at ", i, " is outside the ",
                              shape_str(r.inferred), " unpooled elements");
    }
  }
  const bool same = r.out == r.inferred;
  ops::visit_by_size(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = x.data<T>();
    T* dst = y.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) dst[same ? idx[i] : place(r, idx[i])] = src[i];
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_max_unpool(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  TERN_ASSIGN_OR_RETURN(UnpoolShapes r, unpool_shapes(ctx));
  return make_kernel("reference", std::move(r), run_max_unpool);
}

}  // namespace

TERN_REGISTRATION void register_op_max_unpool(OpRegistry& r) {
  r.add({"MaxUnpool",
         2,
         3,
         1,
         1,
         infer_max_unpool,
         make_max_unpool,
         {2},
         attrs("kernel_shape, pads, strides")});
}

}  // namespace tern
