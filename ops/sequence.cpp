// Sequence ops (opsets 11 to 23): SequenceEmpty, SequenceConstruct, SequenceInsert,
// SequenceErase, SequenceAt, SequenceLength, SplitToSequence and ConcatFromSequence. A sequence is
// an immutable value (Tensor::sequence) whose elements share their tensors' storage; a graph that
// makes one runs node by node (sequences have no place in an arena), where every sequence input's
// value is known when its consumer's shapes are inferred.
#include <algorithm>

#include "ops/common/op_utils.h"

namespace tern {
namespace {

// Input i's sequence; its value is known when the graph runs node by node (needs_values otherwise).
Expected<const SequenceData*> sequence_input(OpContext& ctx, size_t i) {
  const TensorInfo& t = ctx.inputs[i];
  if (t.dtype != DType::kSequence) return ops::dtype_error(ctx, i, "sequence");
  if (!t.value || !t.value->as_sequence()) {
    ctx.needs_values = true;
    return unsupported("input '", ctx.input_names[i], "' is a sequence computed at run time");
  }
  return t.value->as_sequence();
}

// A position input (int32/int64 scalar) in [-n, n - 1 + extra], as a non-negative index.
Expected<int64_t> position(const OpContext& ctx, size_t i, int64_t n, int64_t extra,
                           int64_t fallback) {
  if (!ctx.has_input(i)) return fallback;
  const TensorInfo& t = ctx.inputs[i];
  if (t.dtype != DType::kInt32 && t.dtype != DType::kInt64) {
    return ops::dtype_error(ctx, i, "int32, int64");
  }
  if (!t.value || t.value->numel() != 1) {
    return invalid_argument("position '", ctx.input_names[i], "' must be one known value");
  }
  const int64_t p = t.value->int_at(0);
  if (p < -n || p > n - 1 + extra) {
    return invalid_argument("position ", p, " is outside [", -n, ", ", n - 1 + extra,
                            "] for a sequence of ", n);
  }
  return p < 0 ? p + n : p;
}

// A node whose only output is a sequence made by its kernel.
void sequence_output(OpContext& ctx) {
  ctx.set_output(0, DType::kSequence, {});
  ctx.outputs_from_run = true;
}

// ---- SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceErase --------------------------

Status infer_empty(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(int64_t dt, ctx.attrs().get_int("dtype", 1));
  if (!dtype_is_valid(static_cast<int32_t>(dt))) {
    return invalid_model("attribute 'dtype' is ", dt, ", not a tensor element type");
  }
  sequence_output(ctx);
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_empty(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(int64_t dt, ctx.attrs().get_int("dtype", 1));
  return make_kernel("reference", static_cast<DType>(dt),
                     [](DType elem, const KernelArgs& a, const ExecContext&) {
                       *a.outputs[0] = Tensor::sequence(elem, {});
                       return Status::ok();
                     });
}

Status infer_construct(OpContext& ctx) {
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return invalid_model("input ", i, " is missing");
    if (dtype_is_composite(ctx.inputs[i].dtype)) return ops::dtype_error(ctx, i, "tensor types");
    TERN_RETURN_IF_ERROR(ops::require_same_dtype(ctx, 0, i));
  }
  sequence_output(ctx);
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_construct(const OpContext& ctx) {
  return make_kernel("reference", ctx.inputs[0].dtype,
                     [](DType elem, const KernelArgs& a, const ExecContext&) {
                       std::vector<Tensor> items;
                       for (const Tensor* t : a.inputs) items.push_back(*t);
                       *a.outputs[0] = Tensor::sequence(elem, std::move(items));
                       return Status::ok();
                     });
}

Status infer_insert(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(const SequenceData* s, sequence_input(ctx, 0));
  const DType dt = ctx.inputs[1].dtype;
  if (s->elem != DType::kUndefined && dt != s->elem) {
    return invalid_argument("the tensor is ", dtype_name(dt), ", the sequence holds ",
                            dtype_name(s->elem));
  }
  const auto n = static_cast<int64_t>(s->items.size());
  TERN_RETURN_IF_ERROR(position(ctx, 2, n, 1, n).status());
  sequence_output(ctx);
  return Status::ok();
}

struct Unit {};

Expected<std::unique_ptr<Kernel>> make_insert(const OpContext& ctx) {
  return make_kernel("reference", Unit{}, [](Unit, const KernelArgs& a, const ExecContext&) {
    const SequenceData* s = a.inputs[0]->as_sequence();
    const auto n = static_cast<int64_t>(s->items.size());
    int64_t at = n;
    if (a.inputs.size() > 2 && a.inputs[2]) {
      at = a.inputs[2]->int_at(0);
      if (at < -n || at > n)
        return invalid_argument("position ", at, " is outside [", -n, ", ", n, "]");
      if (at < 0) at += n;
    }
    std::vector<Tensor> items = s->items;
    items.insert(items.begin() + at, *a.inputs[1]);
    *a.outputs[0] = Tensor::sequence(a.inputs[1]->dtype(), std::move(items));
    return Status::ok();
  });
}

Status infer_erase(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(const SequenceData* s, sequence_input(ctx, 0));
  const auto n = static_cast<int64_t>(s->items.size());
  if (n == 0) return invalid_argument("SequenceErase of an empty sequence");
  TERN_RETURN_IF_ERROR(position(ctx, 1, n, 0, n - 1).status());
  sequence_output(ctx);
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_erase(const OpContext& ctx) {
  return make_kernel("reference", Unit{}, [](Unit, const KernelArgs& a, const ExecContext&) {
    const SequenceData* s = a.inputs[0]->as_sequence();
    const auto n = static_cast<int64_t>(s->items.size());
    int64_t at = n - 1;
    if (a.inputs.size() > 1 && a.inputs[1]) {
      at = a.inputs[1]->int_at(0);
      if (at < -n || at >= n)
        return invalid_argument("position ", at, " is outside [", -n, ", ", n - 1, "]");
      if (at < 0) at += n;
    }
    std::vector<Tensor> items = s->items;
    items.erase(items.begin() + at);
    *a.outputs[0] = Tensor::sequence(s->elem, std::move(items));
    return Status::ok();
  });
}

// ---- SequenceAt, SequenceLength ---------------------------------------------------------------

Status infer_at(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(const SequenceData* s, sequence_input(ctx, 0));
  const auto n = static_cast<int64_t>(s->items.size());
  TERN_ASSIGN_OR_RETURN(int64_t at, position(ctx, 1, n, 0, -1));
  if (at < 0) return invalid_model("SequenceAt needs a position");
  const Tensor& item = s->items[static_cast<size_t>(at)];
  ctx.set_output(0, item.dtype(), item.shape());
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_at(const OpContext& ctx) {
  return make_kernel("reference", Unit{}, [](Unit, const KernelArgs& a, const ExecContext&) {
    const SequenceData* s = a.inputs[0]->as_sequence();
    const auto n = static_cast<int64_t>(s->items.size());
    int64_t at = a.inputs[1]->int_at(0);
    if (at < -n || at >= n)
      return invalid_argument("position ", at, " is outside [", -n, ", ", n - 1, "]");
    if (at < 0) at += n;
    const Tensor& item = s->items[static_cast<size_t>(at)];
    ops::copy_elements(item.dtype(), item.raw(), 0, a.outputs[0]->raw(), 0, item.numel());
    return Status::ok();
  });
}

Status infer_length(OpContext& ctx) {
  TERN_RETURN_IF_ERROR(sequence_input(ctx, 0).status());
  ctx.set_output(0, DType::kInt64, {});
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_length(const OpContext& ctx) {
  return make_kernel("reference", Unit{}, [](Unit, const KernelArgs& a, const ExecContext&) {
    *a.outputs[0]->data<int64_t>() = static_cast<int64_t>(a.inputs[0]->as_sequence()->items.size());
    return Status::ok();
  });
}

// ---- SplitToSequence --------------------------------------------------------------------------

struct SplitParams {
  int64_t axis = 0;
  bool keepdims = true;
};

// The chunk lengths along the axis: from `split` (a scalar chunk size or a list), else ones.
Expected<std::vector<int64_t>> chunk_lengths(const Tensor* split, int64_t dim) {
  std::vector<int64_t> out;
  if (!split) {
    out.assign(static_cast<size_t>(dim), 1);
    return out;
  }
  if (split->rank() == 0) {
    const int64_t size = split->int_at(0);
    if (size <= 0) return invalid_argument("split size ", size, " must be positive");
    for (int64_t at = 0; at < dim; at += size) out.push_back(std::min(size, dim - at));
    return out;
  }
  int64_t total = 0;
  for (int64_t i = 0; i < split->numel(); ++i) {
    const int64_t v = split->int_at(i);
    if (v < 0) return invalid_argument("split length ", v, " is negative");
    out.push_back(v);
    total += v;
  }
  if (total != dim) {
    return invalid_argument("split lengths sum to ", total, ", the axis has ", dim);
  }
  return out;
}

Status infer_split(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 0));
  TERN_RETURN_IF_ERROR(
      ops::normalize_axis(axis, static_cast<int64_t>(ctx.inputs[0].shape.size())).status());
  if (ctx.has_input(1) && ctx.inputs[1].dtype != DType::kInt32 &&
      ctx.inputs[1].dtype != DType::kInt64) {
    return ops::dtype_error(ctx, 1, "int32, int64");
  }
  sequence_output(ctx);
  return Status::ok();
}

Status run_split(const SplitParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& x = *a.inputs[0];
  const Tensor* split = a.inputs.size() > 1 ? a.inputs[1] : nullptr;
  const Shape& s = x.shape();
  const auto ax = static_cast<size_t>(p.axis);
  TERN_ASSIGN_OR_RETURN(std::vector<int64_t> lens, chunk_lengths(split, s[ax]));
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < s.size(); ++d) {
    if (d < ax) outer *= s[d];
    if (d > ax) inner *= s[d];
  }
  std::vector<Tensor> items;
  int64_t start = 0;
  for (int64_t len : lens) {
    Shape cs = s;
    cs[ax] = len;
    if (!split && !p.keepdims) cs.erase(cs.begin() + static_cast<std::ptrdiff_t>(ax));
    TERN_ASSIGN_OR_RETURN(Tensor c, Tensor::allocate(x.dtype(), cs));
    for (int64_t o = 0; o < outer; ++o) {
      ops::copy_elements(x.dtype(), x.raw(), (o * s[ax] + start) * inner, c.raw(), o * len * inner,
                         len * inner);
    }
    items.push_back(std::move(c));
    start += len;
  }
  *a.outputs[0] = Tensor::sequence(x.dtype(), std::move(items));
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_split(const OpContext& ctx) {
  SplitParams p;
  TERN_ASSIGN_OR_RETURN(p.axis, ctx.attrs().get_int("axis", 0));
  TERN_ASSIGN_OR_RETURN(
      p.axis, ops::normalize_axis(p.axis, static_cast<int64_t>(ctx.inputs[0].shape.size())));
  TERN_ASSIGN_OR_RETURN(int64_t keep, ctx.attrs().get_int("keepdims", 1));
  p.keepdims = keep != 0;
  return make_kernel("reference", p, run_split);
}

// ---- ConcatFromSequence -----------------------------------------------------------------------

struct ConcatParams {
  int64_t axis = 0;
  bool new_axis = false;
};

Expected<ConcatParams> concat_params(const OpContext& ctx, const SequenceData& s) {
  ConcatParams p;
  TERN_ASSIGN_OR_RETURN(p.axis, ctx.attrs().get_int("axis", INT64_MIN));
  if (p.axis == INT64_MIN) return invalid_model("attribute 'axis' is required");
  TERN_ASSIGN_OR_RETURN(int64_t new_axis, ctx.attrs().get_int("new_axis", 0));
  p.new_axis = new_axis != 0;
  if (s.items.empty()) return invalid_argument("ConcatFromSequence of an empty sequence");
  const auto rank = static_cast<int64_t>(s.items[0].rank());
  TERN_ASSIGN_OR_RETURN(p.axis, ops::normalize_axis(p.axis, rank + (p.new_axis ? 1 : 0)));
  return p;
}

Status infer_concat_from(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(const SequenceData* s, sequence_input(ctx, 0));
  TERN_ASSIGN_OR_RETURN(ConcatParams p, concat_params(ctx, *s));
  const Tensor& first = s->items[0];
  Shape out = first.shape();
  if (p.new_axis) {
    out.insert(out.begin() + p.axis, static_cast<int64_t>(s->items.size()));
  } else {
    out[static_cast<size_t>(p.axis)] = 0;
  }
  for (const Tensor& t : s->items) {
    bool ok = t.dtype() == first.dtype() && t.rank() == first.rank();
    for (size_t d = 0; ok && d < t.rank(); ++d) {
      ok = (!p.new_axis && d == static_cast<size_t>(p.axis)) || t.shape()[d] == first.shape()[d];
    }
    if (!ok) {
      return invalid_argument("element ", dtype_name(t.dtype()), " ", shape_str(t.shape()),
                              " cannot be joined with ", dtype_name(first.dtype()), " ",
                              shape_str(first.shape()), " on axis ", p.axis);
    }
    if (!p.new_axis) out[static_cast<size_t>(p.axis)] += t.shape()[static_cast<size_t>(p.axis)];
  }
  ctx.set_output(0, first.dtype(), out);
  return Status::ok();
}

Status run_concat_from(const ConcatParams& p, const KernelArgs& a, const ExecContext&) {
  const SequenceData* s = a.inputs[0]->as_sequence();
  Tensor& out = *a.outputs[0];
  const auto ax = static_cast<size_t>(p.axis);
  // Each element is [outer, len, inner] in the output's terms (len 1 for a new axis).
  int64_t outer = 1;
  for (size_t d = 0; d < ax; ++d) outer *= out.shape()[d];
  int64_t inner = 1;
  for (size_t d = ax + 1; d < out.rank(); ++d) inner *= out.shape()[d];
  const int64_t total = out.shape()[ax];
  int64_t at = 0;
  for (const Tensor& t : s->items) {
    const int64_t len = p.new_axis ? 1 : t.shape()[ax];
    for (int64_t o = 0; o < outer; ++o) {
      ops::copy_elements(t.dtype(), t.raw(), o * len * inner, out.raw(), (o * total + at) * inner,
                         len * inner);
    }
    at += len;
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_concat_from(const OpContext& ctx) {
  const Tensor* v = ctx.inputs[0].value;
  if (!v || !v->as_sequence()) return unsupported("the sequence is not known");
  TERN_ASSIGN_OR_RETURN(ConcatParams p, concat_params(ctx, *v->as_sequence()));
  return make_kernel("reference", p, run_concat_from);
}

}  // namespace

TERN_REGISTRATION void register_op_sequence(OpRegistry& r) {
  // A sequence input is a value input: its elements decide the output's shape.
  r.add({"SequenceEmpty", 0, 0, 1, 1, infer_empty, make_empty, {}, attrs("dtype")});
  r.add({"SequenceConstruct", 1, 1 << 20, 1, 1, infer_construct, make_construct, {}, attrs({})});
  r.add({"SequenceInsert", 2, 3, 1, 1, infer_insert, make_insert, {0, 2}, attrs({})});
  r.add({"SequenceErase", 1, 2, 1, 1, infer_erase, make_erase, {0, 1}, attrs({})});
  r.add({"SequenceAt", 2, 2, 1, 1, infer_at, make_at, {0, 1}, attrs({})});
  r.add({"SequenceLength", 1, 1, 1, 1, infer_length, make_length, {0}, attrs({})});
  r.add({"SplitToSequence", 1, 2, 1, 1, infer_split, make_split, {}, attrs("axis, keepdims")});
  r.add({"ConcatFromSequence",
         1,
         1,
         1,
         1,
         infer_concat_from,
         make_concat_from,
         {0},
         attrs("axis, new_axis")});
}

}  // namespace tern
