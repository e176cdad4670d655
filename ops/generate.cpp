// Ops that make tensors from shapes and scalars: Size, ConstantOfShape, Range, EyeLike, OneHot,
// Trilu, and the data-dependent NonZero.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/common/op_utils.h"

namespace tern {
namespace {

// ---- Size: known from the shape -----------------------------------------------------------------

Status infer_size(OpContext& ctx) {
  ctx.set_output(0, DType::kInt64, {});
  ctx.output_values[0] = ops::make_int64_tensor({numel(ctx.inputs[0].shape)}, {});
  return Status::ok();
}

Status run_size(const int64_t& n, const KernelArgs& a, const ExecContext&) {
  *a.outputs[0]->data<int64_t>() = n;
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_size(const OpContext& ctx) {
  return make_kernel("reference", numel(ctx.inputs[0].shape), run_size);
}

// ---- ConstantOfShape ----------------------------------------------------------------------------

Status infer_constant_of_shape(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(auto dims, ops::input_ints(ctx, 0));
  for (int64_t d : dims) {
    if (d < 0) return invalid_argument(ctx.where, ": negative dim ", d);
  }
  const Attribute* v = ctx.attrs().find("value");
  DType dt = DType::kFloat32;
  if (v) {
    if (v->kind != Attribute::Kind::kTensor || v->t.numel() != 1) {
      return invalid_model(ctx.where, ": value must be a one-element tensor");
    }
    dt = v->t.dtype();
  }
  ctx.set_output(0, dt, Shape(dims.begin(), dims.end()));
  return Status::ok();
}

// A fill: zero bytes by memset, other values of a fixed-size type by doubling copies of the
// first element (log n memcpys), strings one by one.
Status run_constant_of_shape(const Tensor& v, const KernelArgs& a, const ExecContext&) {
  Tensor& y = *a.outputs[0];
  const int64_t n = y.numel();
  if (n == 0) return Status::ok();
  if (v.dtype() == DType::kString) {
    for (int64_t i = 0; i < n; ++i) ops::copy_elements(v.dtype(), v.raw(), 0, y.raw(), i, 1);
    return Status::ok();
  }
  const size_t es = v.byte_size(), total = y.byte_size();
  auto* out = static_cast<uint8_t*>(y.raw());
  const auto* value = static_cast<const uint8_t*>(v.raw());
  if (std::all_of(value, value + es, [](uint8_t b) { return b == 0; })) {
    std::memset(out, 0, total);
    return Status::ok();
  }
  std::memcpy(out, value, es);
  for (size_t filled = es; filled < total;) {
    const size_t chunk = std::min(filled, total - filled);
    std::memcpy(out + filled, out, chunk);
    filled += chunk;
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_constant_of_shape(const OpContext& ctx) {
  Tensor v;
  if (const Attribute* a = ctx.attrs().find("value")) {
    v = a->t;
  } else {
    TERN_ASSIGN_OR_RETURN(v, Tensor::allocate(DType::kFloat32, {1}));
  }
  return make_kernel("fill", v, run_constant_of_shape);
}

// ---- Range --------------------------------------------------------------------------------------

Status infer_range(OpContext& ctx) {
  for (size_t i = 1; i < 3; ++i) TERN_RETURN_IF_ERROR(ops::require_same_dtype(ctx, 0, i));
  for (size_t i = 0; i < 3; ++i) {
    if (!ctx.inputs[i].value || ctx.inputs[i].value->numel() != 1) {
      return invalid_model(ctx.where, ": start, limit and delta must be scalars");
    }
  }
  const double start = ctx.inputs[0].value->float_at(0), limit = ctx.inputs[1].value->float_at(0),
               delta = ctx.inputs[2].value->float_at(0);
  if (delta == 0) return invalid_argument(ctx.where, ": delta is 0");
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((limit - start) / delta)));
  ctx.set_output(0, ctx.inputs[0].dtype, {n});
  return Status::ok();
}

Status run_range(const DType& dt, const KernelArgs& a, const ExecContext&) {
  Tensor& y = *a.outputs[0];
  ops::visit_all_numeric(dt, [&](auto tag) {
    using T = decltype(tag);
    const T start = a.inputs[0]->data<T>()[0], delta = a.inputs[2]->data<T>()[0];
    for (int64_t i = 0; i < y.numel(); ++i) {
      if constexpr (std::is_integral_v<T>) {
        y.data<T>()[i] = static_cast<T>(start + static_cast<T>(i) * delta);
      } else {
        y.data<T>()[i] = ops::from_double<T>(ops::as_double(start) +
                                             static_cast<double>(i) * ops::as_double(delta));
      }
    }
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_range(const OpContext& ctx) {
  if (!ops::visit_all_numeric(ctx.inputs[0].dtype, [](auto) {})) {
    return ops::dtype_error(ctx, 0, "numeric types");
  }
  return make_kernel("reference", ctx.inputs[0].dtype, run_range);
}

// ---- EyeLike ------------------------------------------------------------------------------------

struct EyeParams {
  DType dtype;
  int64_t k;
};

Status infer_eye(OpContext& ctx) {
  if (ctx.inputs[0].shape.size() != 2) return invalid_model(ctx.where, ": input must be 2-D");
  TERN_ASSIGN_OR_RETURN(int64_t dt,
                        ctx.attrs().get_int("dtype", static_cast<int64_t>(ctx.inputs[0].dtype)));
  if (!dtype_is_valid(static_cast<int32_t>(dt))) return invalid_model(ctx.where, ": bad dtype");
  ctx.set_output(0, static_cast<DType>(dt), ctx.inputs[0].shape);
  return Status::ok();
}

Status run_eye(const EyeParams& p, const KernelArgs& a, const ExecContext&) {
  Tensor& y = *a.outputs[0];
  const int64_t rows = y.shape()[0], cols = y.shape()[1];
  std::memset(y.raw(), 0, y.byte_size());
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t c = r + p.k;
    if (c < 0 || c >= cols) continue;
    ops::visit_all_numeric(p.dtype, [&](auto tag) {
      using T = decltype(tag);
      y.data<T>()[r * cols + c] = ops::from_double<T>(1.0);
    });
    if (p.dtype == DType::kBool) y.data<uint8_t>()[r * cols + c] = 1;
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_eye(const OpContext& ctx) {
  EyeParams p{ctx.outputs[0].dtype, 0};
  if (!ops::visit_all_numeric(p.dtype, [](auto) {}) && p.dtype != DType::kBool) {
    return unsupported(ctx.where, ": EyeLike of ", dtype_name(p.dtype));
  }
  TERN_ASSIGN_OR_RETURN(p.k, ctx.attrs().get_int("k", 0));
  return make_kernel("reference", p, run_eye);
}

// ---- OneHot(indices, depth, values) ------------------------------------------------------------

struct OneHotParams {
  DType dtype;
  int64_t axis, depth, outer, inner;
};

Status infer_one_hot(OpContext& ctx) {
  if (!ctx.inputs[1].value || ctx.inputs[1].value->numel() != 1) {
    return invalid_model(ctx.where, ": depth must be a known scalar");
  }
  const int64_t depth = static_cast<int64_t>(ctx.inputs[1].value->float_at(0));
  if (depth < 1) return invalid_argument(ctx.where, ": depth ", depth, " must be positive");
  TERN_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", -1));
  Shape out = ctx.inputs[0].shape;
  TERN_ASSIGN_OR_RETURN(axis, ops::normalize_axis(axis, static_cast<int64_t>(out.size()) + 1));
  out.insert(out.begin() + axis, depth);
  ctx.set_output(0, ctx.inputs[2].dtype, out);
  return Status::ok();
}

Status run_one_hot(const OneHotParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& idx = *a.inputs[0];
  const Tensor& vals = *a.inputs[2];
  Tensor& y = *a.outputs[0];
  for (int64_t i = 0; i < y.numel(); ++i) ops::copy_elements(p.dtype, vals.raw(), 0, y.raw(), i, 1);
  for (int64_t o = 0; o < p.outer; ++o) {
    for (int64_t i = 0; i < p.inner; ++i) {
      int64_t k = static_cast<int64_t>(idx.float_at(o * p.inner + i));
      if (k < 0) k += p.depth;
      if (k < 0 || k >= p.depth) continue;  // out of range: an all-off row, as ONNX says
      ops::copy_elements(p.dtype, vals.raw(), 1, y.raw(), (o * p.depth + k) * p.inner + i, 1);
    }
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_one_hot(const OpContext& ctx) {
  const Shape& in = ctx.inputs[0].shape;
  TERN_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", -1));
  TERN_ASSIGN_OR_RETURN(axis, ops::normalize_axis(axis, static_cast<int64_t>(in.size()) + 1));
  if (ctx.inputs[2].shape.size() != 1 || ctx.inputs[2].shape[0] != 2) {
    return invalid_model(ctx.where, ": values must hold [off, on]");
  }
  OneHotParams p{ctx.inputs[2].dtype, axis, ctx.outputs[0].shape[static_cast<size_t>(axis)], 1, 1};
  for (int64_t d = 0; d < axis; ++d) p.outer *= in[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis); d < in.size(); ++d) p.inner *= in[d];
  return make_kernel("reference", p, run_one_hot);
}

// ---- Trilu --------------------------------------------------------------------------------------

struct TriluParams {
  DType dtype;
  bool upper;
  int64_t k;
};

Status infer_same(OpContext& ctx) {
  ctx.set_output(0, ctx.inputs[0].dtype, ctx.inputs[0].shape);
  return Status::ok();
}

Status run_trilu(const TriluParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& x = *a.inputs[0];
  Tensor& y = *a.outputs[0];
  const Shape& s = x.shape();
  const int64_t rows = s[s.size() - 2], cols = s.back();
  const int64_t mats = rows * cols != 0 ? x.numel() / (rows * cols) : 0;
  std::memset(y.raw(), 0, y.byte_size());
  for (int64_t m = 0; m < mats; ++m) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const bool keep = p.upper ? c - r >= p.k : c - r <= p.k;
        if (keep)
          ops::copy_elements(p.dtype, x.raw(), (m * rows + r) * cols + c, y.raw(),
                             (m * rows + r) * cols + c, 1);
      }
    }
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_trilu(const OpContext& ctx) {
  if (ctx.inputs[0].shape.size() < 2) return invalid_model(ctx.where, ": input rank must be >= 2");
  if (ctx.inputs[0].dtype == DType::kString) return ops::dtype_error(ctx, 0, "non-string types");
  TriluParams p{ctx.inputs[0].dtype, true, 0};
  TERN_ASSIGN_OR_RETURN(int64_t upper, ctx.attrs().get_int("upper", 1));
  p.upper = upper != 0;
  if (ctx.has_input(1)) {
    TERN_ASSIGN_OR_RETURN(auto k, ops::input_ints(ctx, 1));
    if (k.size() != 1) return invalid_model(ctx.where, ": k must be a scalar");
    p.k = k[0];
  }
  return make_kernel("reference", p, run_trilu);
}

// ---- NonZero: indices of the non-zero elements, shape [rank, count] -----------------------------

// Non-zero test by element bits: a float is zero when all but its sign bit are (-0.0 is zero,
// NaN is not), any other type when all bits are. fn(flat index) for each non-zero element.
template <class Fn>
void for_each_nonzero(const Tensor& x, Fn&& fn) {
  const DType dt = x.dtype();
  const bool is_float = dt == DType::kFloat32 || dt == DType::kFloat64 || dt == DType::kFloat16 ||
                        dt == DType::kBFloat16;
  ops::visit_by_size(dt, [&](auto tag) {
    using U = decltype(tag);
    if constexpr (std::is_integral_v<U>) {
      const U mask =
          is_float ? static_cast<U>(~(U{1} << (8 * sizeof(U) - 1))) : static_cast<U>(~U{0});
      const U* v = static_cast<const U*>(x.raw());
      const int64_t n = x.numel();
      for (int64_t i = 0; i < n; ++i) {
        if (v[i] & mask) fn(i);
      }
    }
  });
}

Status infer_nonzero(OpContext& ctx) {
  const Tensor& x = *ctx.inputs[0].value;
  int64_t count = 0;
  for_each_nonzero(x, [&](int64_t) { ++count; });
  ctx.set_output(0, DType::kInt64, {static_cast<int64_t>(x.rank()), count});
  return Status::ok();
}

Status run_nonzero(const int&, const KernelArgs& a, const ExecContext&) {
  const Tensor& x = *a.inputs[0];
  Tensor& y = *a.outputs[0];
  const int64_t count = y.shape()[1];
  const size_t r = x.rank();
  int64_t* out = y.data<int64_t>();
  int64_t w = 0;
  for_each_nonzero(x, [&](int64_t i) {
    if (w >= count) return;         // the planned count bounds the writes
    for (size_t d = r; d-- > 0;) {  // the element's position, last dim first
      const int64_t dim = x.shape()[d];
      out[static_cast<int64_t>(d) * count + w] = i % dim;
      i /= dim;
    }
    ++w;
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_nonzero(const OpContext& ctx) {
  const size_t es = dtype_size(ctx.inputs[0].dtype);
  if (ctx.inputs[0].dtype == DType::kString || (es != 1 && es != 2 && es != 4 && es != 8)) {
    return ops::dtype_error(ctx, 0, "types of 1, 2, 4 or 8 bytes");
  }
  return make_kernel("nonzero_scan", 0, run_nonzero);
}

}  // namespace

TERN_REGISTRATION void register_op_generate(OpRegistry& r) {
  r.add({"Size", 1, 1, 1, 1, infer_size, make_size, {}, attrs({})});
  r.add({"ConstantOfShape",
         1,
         1,
         1,
         1,
         infer_constant_of_shape,
         make_constant_of_shape,
         {0},
         attrs("value")});
  r.add({"Range",
         3,
         3,
         1,
         1,
         infer_range,
         make_range,
         {0, 1, 2},
         attrs({}, {{"stash_type", "float16 and bfloat16 ranges are computed in double"}})});
  r.add({"EyeLike", 1, 1, 1, 1, infer_eye, make_eye, {}, attrs("dtype, k")});
  r.add({"OneHot", 3, 3, 1, 1, infer_one_hot, make_one_hot, {1}, attrs("axis")});
  r.add({"Trilu", 1, 2, 1, 1, infer_same, make_trilu, {1}, attrs("upper")});
  r.add({"NonZero", 1, 1, 1, 1, infer_nonzero, make_nonzero, {0}, attrs({})});
}

}  // namespace tern
