#include "ops/common/device_ops.h"

#include "ops/common/op_utils.h"
#include "ops/slice.h"

namespace tern::ops {

Expected<StridedView> transpose_view(const OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  const Shape in_strides = contiguous_strides(x);
  TERN_ASSIGN_OR_RETURN(std::vector<int64_t> perm, ctx.attrs().get_ints("perm"));
  if (perm.empty()) {
    for (size_t d = x.size(); d-- > 0;) perm.push_back(static_cast<int64_t>(d));
  }
  if (perm.size() != x.size()) return invalid_model(ctx.where, ": perm does not match the rank");
  StridedView v;
  for (int64_t d : perm) {
    if (d < 0 || d >= static_cast<int64_t>(x.size())) return invalid_model(ctx.where, ": bad perm");
    v.strides.push_back(in_strides[static_cast<size_t>(d)]);
  }
  return v;
}

Expected<StridedView> slice_view(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(SliceParams s, parse_slice(ctx));
  const Shape in_strides = contiguous_strides(s.in_shape);
  StridedView v;
  for (size_t d = 0; d < s.in_shape.size(); ++d) {
    v.offset += s.start[d] * in_strides[d];
    v.strides.push_back(s.step[d] * in_strides[d]);
  }
  return v;
}

StridedView expand_view(const Shape& x, const Shape& y) {
  const Shape xs = contiguous_strides(x);
  StridedView v;
  v.strides.assign(y.size(), 0);
  for (size_t k = 0; k < x.size(); ++k) v.strides[y.size() - x.size() + k] = x[k] == 1 ? 0 : xs[k];
  return v;
}

Expected<PoolSpec> device_pool_spec(const OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  if (ctx.inputs[0].dtype != DType::kFloat32 || x.size() < 3 || x.size() > 5) {
    return unsupported(ctx.where, ": device pooling takes float32 [N, C, 1-3 spatial dims]");
  }
  if (ctx.outputs.size() > 1 && ctx.outputs[1].present) {
    return unsupported(ctx.where, ": MaxPool indices run on the CPU");
  }
  TERN_ASSIGN_OR_RETURN(int64_t ceil_mode, ctx.attrs().get_int("ceil_mode", 0));
  TERN_ASSIGN_OR_RETURN(int64_t storage, ctx.attrs().get_int("storage_order", 0));
  if (storage) return unsupported(ctx.where, ": storage_order 1");
  PoolSpec p;
  TERN_ASSIGN_OR_RETURN(p.win, forward_window(ctx.attrs(), x, {}, ceil_mode != 0));
  if (ctx.node->op_type == "AveragePool") {
    TERN_ASSIGN_OR_RETURN(int64_t cip, ctx.attrs().get_int("count_include_pad", 0));
    p.mode = cip ? PoolMode::kAvgIncludePad : PoolMode::kAvgExcludePad;
  } else if (ctx.node->op_type == "LpPool") {
    TERN_ASSIGN_OR_RETURN(int64_t pn, ctx.attrs().get_int("p", 2));
    if (pn != 2) return unsupported(ctx.where, ": LpPool p = ", pn);
    p.mode = PoolMode::kLp2;
  }
  return p;
}

Expected<LayerNormSpan> layer_norm_span(const OpContext& ctx) {
  if (ctx.inputs[0].dtype != DType::kFloat32) return unsupported(ctx.where, ": float32 only");
  for (size_t o = 1; o < ctx.outputs.size(); ++o) {
    if (ctx.outputs[o].present) return unsupported(ctx.where, ": Mean/InvStdDev outputs");
  }
  const Shape& x = ctx.inputs[0].shape;
  TERN_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", -1));
  TERN_ASSIGN_OR_RETURN(axis, normalize_axis(axis, static_cast<int64_t>(x.size())));
  LayerNormSpan p;
  p.bias = ctx.has_input(2);
  for (size_t d = 0; d < x.size(); ++d) (static_cast<int64_t>(d) < axis ? p.rows : p.n) *= x[d];
  for (size_t i = 1; i < 3; ++i) {
    if (ctx.has_input(i) &&
        (ctx.inputs[i].dtype != DType::kFloat32 || numel(ctx.inputs[i].shape) != p.n)) {
      return unsupported(ctx.where,
                         ": scale and bias must be float32 with one value per element of the "
                         "normalised span");
    }
  }
  TERN_ASSIGN_OR_RETURN(p.eps, ctx.attrs().get_float("epsilon", 1e-5f));
  return p;
}

}  // namespace tern::ops
