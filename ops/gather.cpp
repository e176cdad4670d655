// Indexing ops: Gather, GatherElements, GatherND, ScatterElements / Scatter (reduction none, add,
// mul, max, min), ScatterND, Compress, Expand, Tile. Every element type (strings included);
// negative indices count from the end; an index out of range is INVALID_ARGUMENT at run time.
#include <cstring>

#include "ops/common/elementwise.h"

namespace tern {
namespace {

Status index_error(int64_t idx, int64_t dim) {
  return invalid_argument("index ", idx, " is out of range for a dimension of size ", dim);
}

bool resolve(int64_t& idx, int64_t dim) {
  if (idx < 0) idx += dim;
  return idx >= 0 && idx < dim;
}

bool is_index_type(DType t) {
  return t == DType::kInt32 || t == DType::kInt64;
}

Status infer_same(OpContext& ctx) {
  ctx.set_output(0, ctx.inputs[0].dtype, ctx.inputs[0].shape);
  return Status::ok();
}

// ---- Gather -------------------------------------------------------------------------------------

struct GatherParams {
  DType dtype;
  int64_t outer, dim, inner, nidx;
};

Status infer_gather(OpContext& ctx) {
  if (!is_index_type(ctx.inputs[1].dtype)) return ops::dtype_error(ctx, 1, "int32, int64");
  const Shape& x = ctx.inputs[0].shape;
  TERN_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 0));
  TERN_ASSIGN_OR_RETURN(axis, ops::normalize_axis(axis, static_cast<int64_t>(x.size())));
  Shape out(x.begin(), x.begin() + axis);
  out.insert(out.end(), ctx.inputs[1].shape.begin(), ctx.inputs[1].shape.end());
  out.insert(out.end(), x.begin() + axis + 1, x.end());
  ctx.set_output(0, ctx.inputs[0].dtype, out);
  return Status::ok();
}

Status run_gather(const GatherParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& x = *a.inputs[0];
  const Tensor& idx = *a.inputs[1];
  for (int64_t j = 0; j < p.nidx; ++j) {
    int64_t k = idx.int_at(j);
    if (!resolve(k, p.dim)) return index_error(idx.int_at(j), p.dim);
    for (int64_t o = 0; o < p.outer; ++o) {
      ops::copy_elements(p.dtype, x.raw(), (o * p.dim + k) * p.inner, a.outputs[0]->raw(),
                         (o * p.nidx + j) * p.inner, p.inner);
    }
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_gather(const OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  TERN_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 0));
  TERN_ASSIGN_OR_RETURN(axis, ops::normalize_axis(axis, static_cast<int64_t>(x.size())));
  GatherParams p{ctx.inputs[0].dtype, 1, x[static_cast<size_t>(axis)], 1,
                 numel(ctx.inputs[1].shape)};
  for (int64_t d = 0; d < axis; ++d) p.outer *= x[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.size(); ++d) p.inner *= x[d];
  return make_kernel("reference", p, run_gather);
}

// ---- GatherElements / ScatterElements / Scatter -------------------------------------------------

enum class Red { kNone, kAdd, kMul, kMax, kMin };

struct ElemParams {
  DType dtype;
  int64_t axis;
  Shape data, idx;
  Red red = Red::kNone;
};

Status infer_gather_elements(OpContext& ctx) {
  if (!is_index_type(ctx.inputs[1].dtype)) return ops::dtype_error(ctx, 1, "int32, int64");
  if (ctx.inputs[1].shape.size() != ctx.inputs[0].shape.size()) {
    return invalid_model(ctx.where, ": indices must have the data's rank");
  }
  ctx.set_output(0, ctx.inputs[0].dtype, ctx.inputs[1].shape);
  return Status::ok();
}

// Walks every index element: fn(index element position, data offset it addresses). Row by row of
// the last dim: the row's offset without the axis is computed once, the indices read typed.
template <class Fn>
Status walk_elements(const ElemParams& p, const Tensor& idx, Fn&& fn) {
  const Shape ds = ops::contiguous_strides(p.data);
  const size_t r = p.idx.size();
  const int64_t n = numel(p.idx);
  if (n == 0) return Status::ok();
  if (r == 0) {  // one scalar index into a scalar
    int64_t k = idx.int_at(0);
    if (!resolve(k, 1)) return index_error(idx.int_at(0), 1);
    fn(0, 0);
    return Status::ok();
  }
  const size_t last = r - 1, axis = static_cast<size_t>(p.axis);
  const int64_t inner = p.idx[last], dim = p.data[axis];
  const int64_t* i64 = idx.dtype() == DType::kInt64 ? idx.data<int64_t>() : nullptr;
  const int32_t* i32 = i64 ? nullptr : idx.data<int32_t>();
  std::vector<int64_t> pos(r, 0);  // the row's position (the last dim's entry stays 0)
  for (int64_t row = 0; row * inner < n; ++row) {
    int64_t base = 0;
    for (size_t d = 0; d < last; ++d) base += d == axis ? 0 : pos[d] * ds[d];
    for (int64_t j = 0; j < inner; ++j) {
      const int64_t i = row * inner + j;
      int64_t k = i64 ? i64[i] : i32[i];
      if (!resolve(k, dim)) return index_error(i64 ? i64[i] : i32[i], dim);
      fn(i, base + k * ds[axis] + (axis == last ? 0 : j * ds[last]));
    }
    for (size_t d = last; d-- > 0;) {
      if (++pos[d] < p.idx[d]) break;
      pos[d] = 0;
    }
  }
  return Status::ok();
}

Status run_gather_elements(const ElemParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& x = *a.inputs[0];
  void* y = a.outputs[0]->raw();
  return walk_elements(p, *a.inputs[1], [&](int64_t i, int64_t off) {
    ops::copy_elements(p.dtype, x.raw(), off, y, i, 1);
  });
}

Expected<ElemParams> elem_params(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 0));
  TERN_ASSIGN_OR_RETURN(
      axis, ops::normalize_axis(axis, static_cast<int64_t>(ctx.inputs[0].shape.size())));
  return ElemParams{ctx.inputs[0].dtype, axis, ctx.inputs[0].shape, ctx.inputs[1].shape};
}

Expected<std::unique_ptr<Kernel>> make_gather_elements(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ElemParams p, elem_params(ctx));
  return make_kernel("elements_rows", std::move(p), run_gather_elements);
}

Expected<Red> reduction_attr(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(std::string r, ctx.attrs().get_string("reduction", "none"));
  if (r == "none") return Red::kNone;
  if (r == "add") return Red::kAdd;
  if (r == "mul") return Red::kMul;
  if (r == "max") return Red::kMax;
  if (r == "min") return Red::kMin;
  return invalid_model(ctx.where, ": unknown reduction '", r, "'");
}

template <class T>
void combine(Red red, T& dst, const T& v) {
  if constexpr (std::is_same_v<T, std::string>) {
    dst = v;
  } else {
    switch (red) {
      case Red::kNone:
        dst = v;
        break;
      case Red::kAdd:
        dst = static_cast<T>(dst + v);
        break;
      case Red::kMul:
        dst = static_cast<T>(dst * v);
        break;
      case Red::kMax:
        dst = dst < v ? v : dst;
        break;
      case Red::kMin:
        dst = v < dst ? v : dst;
        break;
    }
  }
}

Status run_scatter_elements(const ElemParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& x = *a.inputs[0];
  const Tensor& upd = *a.inputs[2];
  ops::copy_elements(p.dtype, x.raw(), 0, a.outputs[0]->raw(), 0, x.numel());
  Status st;
  auto go = [&](auto tag) {
    using T = decltype(tag);
    T* y = a.outputs[0]->data<T>();
    const T* u = upd.data<T>();
    st = walk_elements(p, *a.inputs[1],
                       [&](int64_t i, int64_t off) { combine(p.red, y[off], u[i]); });
  };
  if (!ops::visit_all_numeric(p.dtype, go)) ops::visit_by_size(p.dtype, go);
  return st;
}

Expected<std::unique_ptr<Kernel>> make_scatter_elements(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ElemParams p, elem_params(ctx));
  if (ctx.inputs[2].shape != ctx.inputs[1].shape) {
    return invalid_model(ctx.where, ": updates must have the indices' shape");
  }
  if (ctx.node->op_type != "Scatter") {
    TERN_ASSIGN_OR_RETURN(p.red, reduction_attr(ctx));
  }
  if (p.red != Red::kNone && !ops::visit_all_numeric(p.dtype, [](auto) {})) {
    return ops::dtype_error(ctx, 0, "numeric types (with a reduction)");
  }
  return make_kernel("elements_rows", std::move(p), run_scatter_elements);
}

// ---- GatherND / ScatterND -----------------------------------------------------------------------

struct NDParams {
  DType dtype;
  int64_t batch_dims = 0;
  Shape data, idx;
  Red red = Red::kNone;
};

Status infer_gather_nd(OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  const Shape& i = ctx.inputs[1].shape;
  TERN_ASSIGN_OR_RETURN(int64_t b, ctx.attrs().get_int("batch_dims", 0));
  if (i.empty() || b < 0 || static_cast<size_t>(b) >= std::min(x.size(), i.size())) {
    return invalid_model(ctx.where, ": bad indices rank or batch_dims");
  }
  const int64_t k = i.back();
  if (k < 1 || static_cast<size_t>(b + k) > x.size()) {
    return invalid_model(ctx.where, ": indices' last dim ", k, " does not fit the data's rank");
  }
  Shape out(i.begin(), i.end() - 1);
  out.insert(out.end(), x.begin() + b + k, x.end());
  ctx.set_output(0, ctx.inputs[0].dtype, out);
  return Status::ok();
}

// For each index tuple: fn(tuple number, data offset of the addressed slice, slice size).
template <class Fn>
Status walk_nd(const NDParams& p, const Tensor& idx, Fn&& fn) {
  const int64_t k = p.idx.back();
  const Shape ds = ops::contiguous_strides(p.data);
  int64_t batch = 1;
  for (int64_t d = 0; d < p.batch_dims; ++d) batch *= p.data[static_cast<size_t>(d)];
  const int64_t tuples = numel(p.idx) / k;
  const int64_t per_batch = tuples / std::max<int64_t>(batch, 1);
  int64_t slice = 1;
  for (size_t d = static_cast<size_t>(p.batch_dims + k); d < p.data.size(); ++d) slice *= p.data[d];
  const int64_t batch_stride = p.batch_dims ? ds[static_cast<size_t>(p.batch_dims - 1)] : 0;
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = p.batch_dims ? (t / per_batch) * batch_stride : 0;
    for (int64_t j = 0; j < k; ++j) {
      const size_t d = static_cast<size_t>(p.batch_dims + j);
      int64_t v = idx.int_at(t * k + j);
      if (!resolve(v, p.data[d])) return index_error(idx.int_at(t * k + j), p.data[d]);
      off += v * ds[d];
    }
    fn(t, off, slice);
  }
  return Status::ok();
}

Status run_gather_nd(const NDParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& x = *a.inputs[0];
  return walk_nd(p, *a.inputs[1], [&](int64_t t, int64_t off, int64_t slice) {
    ops::copy_elements(p.dtype, x.raw(), off, a.outputs[0]->raw(), t * slice, slice);
  });
}

Expected<std::unique_ptr<Kernel>> make_gather_nd(const OpContext& ctx) {
  NDParams p{ctx.inputs[0].dtype, 0, ctx.inputs[0].shape, ctx.inputs[1].shape};
  TERN_ASSIGN_OR_RETURN(p.batch_dims, ctx.attrs().get_int("batch_dims", 0));
  return make_kernel("reference", std::move(p), run_gather_nd);
}

Status run_scatter_nd(const NDParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& x = *a.inputs[0];
  ops::copy_elements(p.dtype, x.raw(), 0, a.outputs[0]->raw(), 0, x.numel());
  Status st;
  auto go = [&](auto tag) {
    using T = decltype(tag);
    T* y = a.outputs[0]->data<T>();
    const T* u = a.inputs[2]->data<T>();
    st = walk_nd(p, *a.inputs[1], [&](int64_t t, int64_t off, int64_t slice) {
      for (int64_t e = 0; e < slice; ++e) combine(p.red, y[off + e], u[t * slice + e]);
    });
  };
  if (!ops::visit_all_numeric(p.dtype, go)) ops::visit_by_size(p.dtype, go);
  return st;
}

Expected<std::unique_ptr<Kernel>> make_scatter_nd(const OpContext& ctx) {
  NDParams p{ctx.inputs[0].dtype, 0, ctx.inputs[0].shape, ctx.inputs[1].shape};
  if (p.idx.empty() || p.idx.back() < 1 || static_cast<size_t>(p.idx.back()) > p.data.size()) {
    return invalid_model(ctx.where, ": indices' last dim does not fit the data's rank");
  }
  TERN_ASSIGN_OR_RETURN(p.red, reduction_attr(ctx));
  if (p.red != Red::kNone && !ops::visit_all_numeric(p.dtype, [](auto) {})) {
    return ops::dtype_error(ctx, 0, "numeric types (with a reduction)");
  }
  return make_kernel("reference", std::move(p), run_scatter_nd);
}

// ---- Expand / Tile ------------------------------------------------------------------------------

Status infer_expand(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(auto shape, ops::input_ints(ctx, 1));
  auto out = ops::broadcast_shapes(ctx.inputs[0].shape, Shape(shape.begin(), shape.end()));
  if (!out) return out.status().with_prefix(ctx.where);
  ctx.set_output(0, ctx.inputs[0].dtype, *out);
  return Status::ok();
}

struct ExpandParams {
  DType dtype;
  ops::BroadcastRows rows;
};

Status run_expand(const ExpandParams& p, const KernelArgs& a, const ExecContext& exec) {
  ops::visit_by_size(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = a.inputs[0]->data<T>();
    T* y = a.outputs[0]->data<T>();
    ops::broadcast_for_each<1>(p.rows, std::is_same_v<T, std::string> ? 1 : exec.num_threads,
                               [&](int64_t o, const int64_t* off) { y[o] = x[off[0]]; });
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_expand(const OpContext& ctx) {
  return make_kernel("reference",
                     ExpandParams{ctx.inputs[0].dtype,
                                  ops::plan_broadcast(ctx.outputs[0].shape, {ctx.inputs[0].shape})},
                     run_expand);
}

Status infer_tile(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(auto reps, ops::input_ints(ctx, 1));
  Shape out = ctx.inputs[0].shape;
  if (reps.size() != out.size()) {
    return invalid_model(ctx.where, ": repeats has ", reps.size(), " values for rank ", out.size());
  }
  for (size_t d = 0; d < out.size(); ++d) {
    if (reps[d] < 0) return invalid_model(ctx.where, ": negative repeat");
    out[d] *= reps[d];
  }
  ctx.set_output(0, ctx.inputs[0].dtype, out);
  return Status::ok();
}

struct TileParams {
  DType dtype;
  Shape in, out;
};

Status run_tile(const TileParams& p, const KernelArgs& a, const ExecContext&) {
  const Shape is = ops::contiguous_strides(p.in);
  const int64_t n = numel(p.out);
  const size_t r = p.out.size();
  std::vector<int64_t> pos(r, 0);
  for (int64_t o = 0; o < n; ++o) {
    int64_t off = 0;
    for (size_t d = 0; d < r; ++d) off += (pos[d] % p.in[d]) * is[d];
    ops::copy_elements(p.dtype, a.inputs[0]->raw(), off, a.outputs[0]->raw(), o, 1);
    for (size_t d = r; d-- > 0;) {
      if (++pos[d] < p.out[d]) break;
      pos[d] = 0;
    }
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_tile(const OpContext& ctx) {
  return make_kernel("reference",
                     TileParams{ctx.inputs[0].dtype, ctx.inputs[0].shape, ctx.outputs[0].shape},
                     run_tile);
}

// ---- Compress: the slices along axis (or of the flattened input) whose condition is true ------

Status infer_compress(OpContext& ctx) {
  const Tensor& cond = *ctx.inputs[1].value;
  const Shape& x = ctx.inputs[0].shape;
  if (ctx.inputs[1].dtype != DType::kBool) return ops::dtype_error(ctx, 1, "bool");
  int64_t kept = 0;
  const Attribute* ax = ctx.attrs().find("axis");
  const int64_t dim = ax ? 0 : numel(x);
  int64_t limit = dim;
  Shape out;
  if (ax) {
    TERN_ASSIGN_OR_RETURN(int64_t axis, ops::normalize_axis(ax->i, static_cast<int64_t>(x.size())));
    limit = x[static_cast<size_t>(axis)];
    out = x;
  }
  for (int64_t i = 0; i < std::min(limit, cond.numel()); ++i) kept += cond.data<uint8_t>()[i] != 0;
  if (ax) {
    TERN_ASSIGN_OR_RETURN(int64_t axis, ops::normalize_axis(ax->i, static_cast<int64_t>(x.size())));
    out[static_cast<size_t>(axis)] = kept;
  } else {
    out = {kept};
  }
  ctx.set_output(0, ctx.inputs[0].dtype, out);
  return Status::ok();
}

struct CompressParams {
  DType dtype;
  int64_t outer, dim, inner;
};

Status run_compress(const CompressParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& c = *a.inputs[1];
  int64_t w = 0;
  for (int64_t o = 0; o < p.outer; ++o) {
    for (int64_t k = 0; k < std::min(p.dim, c.numel()); ++k) {
      if (!c.data<uint8_t>()[k]) continue;
      ops::copy_elements(p.dtype, a.inputs[0]->raw(), (o * p.dim + k) * p.inner,
                         a.outputs[0]->raw(), w * p.inner, p.inner);
      ++w;
    }
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_compress(const OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  CompressParams p{ctx.inputs[0].dtype, 1, numel(x), 1};
  if (const Attribute* ax = ctx.attrs().find("axis")) {
    TERN_ASSIGN_OR_RETURN(int64_t axis, ops::normalize_axis(ax->i, static_cast<int64_t>(x.size())));
    p.dim = x[static_cast<size_t>(axis)];
    for (int64_t d = 0; d < axis; ++d) p.outer *= x[static_cast<size_t>(d)];
    for (size_t d = static_cast<size_t>(axis) + 1; d < x.size(); ++d) p.inner *= x[d];
  }
  return make_kernel("reference", p, run_compress);
}

}  // namespace

TERN_REGISTRATION void register_op_gather(OpRegistry& r) {
  r.add({"Gather", 2, 2, 1, 1, infer_gather, make_gather, {}, attrs("axis")});
  r.add({"GatherElements",
         2,
         2,
         1,
         1,
         infer_gather_elements,
         make_gather_elements,
         {},
         attrs("axis")});
  r.add({"GatherND", 2, 2, 1, 1, infer_gather_nd, make_gather_nd, {}, attrs("batch_dims")});
  r.add({"ScatterElements",
         3,
         3,
         1,
         1,
         infer_same,
         make_scatter_elements,
         {},
         attrs("axis, reduction")});
  r.add({"Scatter", 3, 3, 1, 1, infer_same, make_scatter_elements, {}, attrs("axis")});
  r.add({"ScatterND", 3, 3, 1, 1, infer_same, make_scatter_nd, {}, attrs("reduction")});
  r.add({"Expand", 2, 2, 1, 1, infer_expand, make_expand, {1}, attrs({})});
  r.add({"Tile", 2, 2, 1, 1, infer_tile, make_tile, {1}, attrs({})});
  r.add({"Compress", 2, 2, 1, 1, infer_compress, make_compress, {1}, attrs("axis")});
}

}  // namespace tern
