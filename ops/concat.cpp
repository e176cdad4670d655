// Concat along one axis; any non-string dtype.
#include <cstring>

#include "ops/common/op_utils.h"

namespace tern {
namespace {

struct ConcatParams {
  int64_t axis;
};

Status infer_concat(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attrs().get_int("axis", INT64_MIN));
  if (axis_attr == INT64_MIN) return invalid_model("attribute 'axis' is required");
  const Shape& first = ctx.inputs[0].shape;
  TERN_ASSIGN_OR_RETURN(int64_t axis,
                        ops::normalize_axis(axis_attr, static_cast<int64_t>(first.size())));
  Shape out = first;
  out[static_cast<size_t>(axis)] = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return invalid_model("input ", i, " is missing");
    TERN_RETURN_IF_ERROR(ops::require_same_dtype(ctx, 0, i));
    const Shape& s = ctx.inputs[i].shape;
    bool ok = s.size() == first.size();
    for (size_t d = 0; ok && d < s.size(); ++d) {
      ok = d == static_cast<size_t>(axis) || s[d] == first[d];
    }
    if (!ok) {
      return invalid_argument("input '", ctx.input_names[i], "' has shape ", shape_str(s),
                              ", incompatible with '", ctx.input_names[0], "' ", shape_str(first),
                              " for concatenation on axis ", axis);
    }
    out[static_cast<size_t>(axis)] += s[static_cast<size_t>(axis)];
  }
  ctx.set_output(0, ctx.inputs[0].dtype, out);
  // Shape math (a Reshape target put together from dims): small known int64 vectors are joined
  // while planning, with no kernel made.
  if (ctx.inputs[0].dtype == DType::kInt64 && out.size() == 1 && out[0] <= 64) {
    std::vector<int64_t> joined;
    for (const TensorInfo& in : ctx.inputs) {
      if (!in.value || !in.value->on_host()) return Status::ok();
      const int64_t* d = in.value->data<int64_t>();
      joined.insert(joined.end(), d, d + in.value->numel());
    }
    ctx.output_values[0] = ops::make_int64_tensor(joined, out);
  }
  return Status::ok();
}

Status run_concat(const ConcatParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& out = *a.outputs[0];
  const size_t esize = dtype_size(out.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < p.axis; ++d) outer *= out.shape()[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(p.axis) + 1; d < out.rank(); ++d) inner *= out.shape()[d];
  const size_t out_row =
      static_cast<size_t>(out.shape()[static_cast<size_t>(p.axis)] * inner) * esize;
  auto* dst = static_cast<uint8_t*>(out.raw());
  size_t col = 0;
  for (const Tensor* in : a.inputs) {
    size_t row = static_cast<size_t>(in->shape()[static_cast<size_t>(p.axis)] * inner) * esize;
    const auto* src = static_cast<const uint8_t*>(in->raw());
    for (int64_t o = 0; o < outer && row; ++o) {
      std::memcpy(dst + static_cast<size_t>(o) * out_row + col, src + static_cast<size_t>(o) * row,
                  row);
    }
    col += row;
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_concat(const OpContext& ctx) {
  if (ctx.inputs[0].dtype == DType::kString) return ops::dtype_error(ctx, 0, "non-string types");
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));  // the CPU's concat_rows joins blocks
  TERN_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 0));
  TERN_ASSIGN_OR_RETURN(
      axis, ops::normalize_axis(axis, static_cast<int64_t>(ctx.inputs[0].shape.size())));
  return make_kernel("reference", ConcatParams{axis}, run_concat);
}

}  // namespace

TERN_REGISTRATION void register_op_concat(OpRegistry& r) {
  r.add({"Concat", 1, 1 << 20, 1, 1, infer_concat, make_concat, {}, attrs("axis")});
}

}  // namespace tern
