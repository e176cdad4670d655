// Ops that only change the shape: Reshape, Flatten, Squeeze, Unsqueeze, Identity. The data is
// copied unchanged, whatever the dtype.
#include <algorithm>
#include <cstring>

#include "ops/common/op_utils.h"

namespace tern {
namespace {

// A known input (shape math, a constant) gives the output while planning, with no kernel made
// and nothing copied: the same data under the new shape. Shape chains ending in Reshape targets
// are computed this way for every new input shape.
void view_if_known(OpContext& ctx) {
  const Tensor* v = ctx.inputs[0].value;
  if (v && v->on_host() && !dtype_is_composite(v->dtype())) {
    ctx.output_values[0] = v->reshaped(ctx.outputs[0].shape);
  }
}

Status infer_reshape(OpContext& ctx) {
  const Shape& in = ctx.inputs[0].shape;
  std::vector<int64_t> spec;
  if (ctx.has_input(1)) {
    spec = ops::read_ints(*ctx.inputs[1].value);
  } else {
    TERN_ASSIGN_OR_RETURN(spec, ctx.attrs().get_ints("shape"));  // opset 1-4
  }
  TERN_ASSIGN_OR_RETURN(int64_t allowzero, ctx.attrs().get_int("allowzero", 0));
  Shape out(spec.size());
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t d = spec[i];
    if (d == 0 && !allowzero) {
      if (i >= in.size()) {
        return invalid_argument("shape entry ", i, " is 0 (copy) but the input '",
                                ctx.input_names[0], "' has rank ", in.size());
      }
      d = in[i];
    }
    if (d == -1) {
      if (infer_at >= 0) return invalid_argument("shape ", shape_str(spec), " has two -1 entries");
      infer_at = static_cast<int64_t>(i);
      continue;
    }
    if (d < 0) return invalid_argument("shape ", shape_str(spec), " has a negative entry");
    out[i] = d;
    if (__builtin_mul_overflow(known, d, &known)) {
      return invalid_argument("shape ", shape_str(spec), " has more elements than int64 holds");
    }
  }
  int64_t total = numel(in);
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0) {
      return invalid_argument("cannot reshape input '", ctx.input_names[0], "' of shape ",
                              shape_str(in), " to ", shape_str(spec));
    }
    out[static_cast<size_t>(infer_at)] = total / known;
  } else if (known != total) {
    return invalid_argument("cannot reshape input '", ctx.input_names[0], "' of shape ",
                            shape_str(in), " (", total, " elements) to ", shape_str(out));
  }
  ctx.set_output(0, ctx.inputs[0].dtype, out);
  view_if_known(ctx);
  return Status::ok();
}

Status infer_flatten(OpContext& ctx) {
  const Shape& in = ctx.inputs[0].shape;
  int64_t r = static_cast<int64_t>(in.size());
  TERN_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 1));
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r) return invalid_model("axis is out of range for rank ", r);
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= in[static_cast<size_t>(i)];
  ctx.set_output(0, ctx.inputs[0].dtype, {outer, outer ? numel(in) / outer : 0});
  view_if_known(ctx);
  return Status::ok();
}

Expected<std::vector<int64_t>> axes_of(const OpContext& ctx) {
  if (ctx.has_input(1)) return ops::read_ints(*ctx.inputs[1].value);
  return ctx.attrs().get_ints("axes");
}

Status infer_squeeze(OpContext& ctx) {
  const Shape& in = ctx.inputs[0].shape;
  TERN_ASSIGN_OR_RETURN(auto axes, axes_of(ctx));
  std::vector<bool> drop(in.size(), false);
  if (axes.empty()) {
    for (size_t i = 0; i < in.size(); ++i) drop[i] = in[i] == 1;
  }
  for (int64_t a : axes) {
    TERN_ASSIGN_OR_RETURN(int64_t ax, ops::normalize_axis(a, static_cast<int64_t>(in.size())));
    if (in[static_cast<size_t>(ax)] != 1) {
      return invalid_argument("cannot squeeze axis ", a, " of size ", in[static_cast<size_t>(ax)]);
    }
    drop[static_cast<size_t>(ax)] = true;
  }
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!drop[i]) out.push_back(in[i]);
  }
  ctx.set_output(0, ctx.inputs[0].dtype, out);
  view_if_known(ctx);
  return Status::ok();
}

Status infer_unsqueeze(OpContext& ctx) {
  const Shape& in = ctx.inputs[0].shape;
  TERN_ASSIGN_OR_RETURN(auto axes, axes_of(ctx));
  int64_t r = static_cast<int64_t>(in.size() + axes.size());
  std::vector<bool> inserted(static_cast<size_t>(r), false);
  for (int64_t a : axes) {
    TERN_ASSIGN_OR_RETURN(int64_t ax, ops::normalize_axis(a, r));
    if (inserted[static_cast<size_t>(ax)]) return invalid_model("axis ", a, " is repeated");
    inserted[static_cast<size_t>(ax)] = true;
  }
  Shape out;
  size_t k = 0;
  for (int64_t i = 0; i < r; ++i) out.push_back(inserted[static_cast<size_t>(i)] ? 1 : in[k++]);
  ctx.set_output(0, ctx.inputs[0].dtype, out);
  view_if_known(ctx);
  return Status::ok();
}

Status infer_identity(OpContext& ctx) {
  ctx.set_output(0, ctx.inputs[0].dtype, ctx.inputs[0].shape);
  // A sequence or optional passes through as it is (the kernel hands on the value).
  ctx.outputs_from_run = dtype_is_composite(ctx.inputs[0].dtype);
  return Status::ok();
}

// The output has the input's bytes: the planner gives it the input's buffer where it can
// (Kernel::inplace_input), and the copy is then skipped.
Expected<std::unique_ptr<Kernel>> make_copy(const OpContext& ctx) {
  if (ctx.inputs[0].dtype == DType::kString) return ops::dtype_error(ctx, 0, "non-string types");
  return ops::make_bytes_copy();
}

// Identity of any value: tensors as make_copy, strings element by element, sequences and
// optionals handed on (they are immutable).
Expected<std::unique_ptr<Kernel>> make_identity(const OpContext& ctx) {
  const DType dt = ctx.inputs[0].dtype;
  if (dtype_is_composite(dt)) {
    return make_kernel("reference", 0, [](int, const KernelArgs& a, const ExecContext&) {
      *a.outputs[0] = *a.inputs[0];
      return Status::ok();
    });
  }
  if (dt == DType::kString) {
    return make_kernel("reference", 0, [](int, const KernelArgs& a, const ExecContext&) {
      ops::copy_elements(DType::kString, a.inputs[0]->raw(), 0, a.outputs[0]->raw(), 0,
                         a.inputs[0]->numel());
      return Status::ok();
    });
  }
  return make_copy(ctx);
}

}  // namespace

TERN_REGISTRATION void register_op_reshape(OpRegistry& r) {
  r.add({"Reshape", 1, 2, 1, 1, infer_reshape, make_copy, {1}, attrs("allowzero")});
  r.add({"Flatten", 1, 1, 1, 1, infer_flatten, make_copy, {}, attrs("axis")});
  r.add({"Squeeze", 1, 2, 1, 1, infer_squeeze, make_copy, {1}, attrs("axes")});
  r.add({"Unsqueeze", 1, 2, 1, 1, infer_unsqueeze, make_copy, {1}, attrs("axes")});
  r.add({"Identity", 1, 1, 1, 1, infer_identity, make_identity, {}, attrs({})});
}

}  // namespace tern
