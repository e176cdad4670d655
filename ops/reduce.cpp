// Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare (axes as attribute
// before opset 18 — 13 for ReduceSum — and as an optional input since; keepdims;
// noop_with_empty_axes), ArgMax/ArgMin (select_last_index) and CumSum/CumProd (exclusive, reverse).
// Floats accumulate in double; integers in 64-bit integers.
#include <cmath>
#include <limits>

#include "ops/reduce.h"

#include "core/parallel.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

enum class R { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

// Output element o covers input offsets base[o] + inner_offsets[k] for every k.
struct ReduceLayout {
  Shape out;
  std::vector<int64_t> base, inner;
};

bool axes_from_input(const std::string& op, int64_t opset) {
  return op == "ReduceSum" ? opset >= 13 : opset >= 18;
}

}  // namespace

namespace ops {

Expected<ReduceSpec> reduce_spec(const OpContext& ctx) {
  ReduceSpec s;
  const int64_t rank = static_cast<int64_t>(ctx.inputs[0].shape.size());
  TERN_ASSIGN_OR_RETURN(int64_t keep, ctx.attrs().get_int("keepdims", 1));
  TERN_ASSIGN_OR_RETURN(int64_t noop, ctx.attrs().get_int("noop_with_empty_axes", 0));
  s.keepdims = keep != 0;
  std::vector<int64_t> axes;
  if (axes_from_input(ctx.node->op_type, ctx.opset)) {
    if (ctx.has_input(1)) {
      TERN_ASSIGN_OR_RETURN(axes, ops::input_ints(ctx, 1));
    }
  } else {
    TERN_ASSIGN_OR_RETURN(axes, ctx.attrs().get_ints("axes"));
  }
  s.reduced.assign(static_cast<size_t>(rank), axes.empty());
  if (axes.empty() && noop) {
    s.identity = true;
    s.reduced.assign(static_cast<size_t>(rank), false);
  }
  for (int64_t a : axes) {
    TERN_ASSIGN_OR_RETURN(int64_t ax, ops::normalize_axis(a, rank));
    s.reduced[static_cast<size_t>(ax)] = true;
  }
  return s;
}

Expected<ReduceRows> reduce_rows(const Shape& x, const ReduceSpec& spec) {
  int first = -1, last = -1;
  for (size_t d = 0; d < x.size(); ++d) {
    if (!spec.reduced[d] || x[d] == 1) continue;
    if (first < 0) first = static_cast<int>(d);
    last = static_cast<int>(d);
  }
  for (int d = first; first >= 0 && d <= last; ++d) {
    if (!spec.reduced[static_cast<size_t>(d)] && x[static_cast<size_t>(d)] != 1) {
      return unsupported("device reductions take one contiguous run of dims");
    }
  }
  ReduceRows rows;
  for (int d = 0; d < static_cast<int>(x.size()); ++d) {
    const int64_t n = x[static_cast<size_t>(d)];
    if (first >= 0 && d >= first && d <= last) {
      rows.r *= n;
    } else if (first < 0 || d < first) {
      rows.outer *= n;
    } else {
      rows.inner *= n;
    }
  }
  return rows;
}

}  // namespace ops

namespace {

using ops::reduce_spec;
using ops::ReduceSpec;

ReduceLayout layout_of(const Shape& in, const std::vector<bool>& reduced, bool keepdims) {
  ReduceLayout l;
  const size_t r = in.size();
  std::vector<int64_t> stride(r, 1);
  for (size_t d = r; d-- > 1;) stride[d - 1] = stride[d] * in[d];
  Shape kept_dims;
  std::vector<int64_t> kept_strides, red_dims, red_strides;
  for (size_t d = 0; d < r; ++d) {
    if (reduced[d]) {
      red_dims.push_back(in[d]), red_strides.push_back(stride[d]);
      if (keepdims) l.out.push_back(1);
    } else {
      kept_dims.push_back(in[d]), kept_strides.push_back(stride[d]);
      l.out.push_back(in[d]);
    }
  }
  auto offsets = [](const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
    std::vector<int64_t> offs{0};
    for (size_t d = 0; d < dims.size(); ++d) {
      std::vector<int64_t> next;
      next.reserve(offs.size() * static_cast<size_t>(std::max<int64_t>(dims[d], 0)));
      for (int64_t o : offs) {
        for (int64_t i = 0; i < dims[d]; ++i) next.push_back(o + i * strides[d]);
      }
      offs = std::move(next);
    }
    return offs;
  };
  l.base = offsets(kept_dims, kept_strides);
  l.inner = offsets(red_dims, red_strides);
  return l;
}

struct ReduceParams {
  R op;
  DType dtype;
  ReduceLayout layout;
};

Status infer_reduce(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ReduceSpec s, reduce_spec(ctx));
  ReduceLayout l = layout_of(ctx.inputs[0].shape, s.reduced, s.keepdims);
  ctx.set_output(0, ctx.inputs[0].dtype, l.out);
  return Status::ok();
}

template <class T>
void reduce_typed(const ReduceParams& p, const T* x, T* y, int threads) {
  const auto& l = p.layout;
  const int64_t n = static_cast<int64_t>(l.inner.size());
  parallel_for(static_cast<int64_t>(l.base.size()), std::max<int64_t>(1, 8192 / std::max<int64_t>(n, 1)),
               threads, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      const T* px = x + l.base[static_cast<size_t>(o)];
      if constexpr (std::is_integral_v<T>) {
        using A = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
        A acc = p.op == R::kProd ? 1
                : p.op == R::kMax ? static_cast<A>(std::numeric_limits<T>::lowest())
                : p.op == R::kMin ? static_cast<A>(std::numeric_limits<T>::max())
                                  : 0;
        for (int64_t k = 0; k < n; ++k) {
          const A v = static_cast<A>(px[l.inner[static_cast<size_t>(k)]]);
          switch (p.op) {
            case R::kMax:
              acc = std::max(acc, v);
              break;
            case R::kMin:
              acc = std::min(acc, v);
              break;
            case R::kProd:
              acc *= v;
              break;
            case R::kL1:
              if constexpr (std::is_signed_v<A>) {
                acc += v < 0 ? -v : v;
              } else {
                acc += v;
              }
              break;
            case R::kSumSquare:
            case R::kL2:
              acc += v * v;
              break;
            default:
              acc += v;
          }
        }
        double r = static_cast<double>(acc);
        if (p.op == R::kMean) r = n ? r / static_cast<double>(n) : 0;
        if (p.op == R::kL2) r = std::sqrt(r);
        if (p.op == R::kLogSum) r = std::log(r);
        y[o] = (p.op == R::kMean || p.op == R::kL2 || p.op == R::kLogSum) ? static_cast<T>(r)
                                                                          : static_cast<T>(acc);
      } else {
        double acc = p.op == R::kProd ? 1
                     : p.op == R::kMax ? -std::numeric_limits<double>::infinity()
                     : p.op == R::kMin ? std::numeric_limits<double>::infinity()
                                       : 0;
        double mx = -std::numeric_limits<double>::infinity();
        if (p.op == R::kLogSumExp) {
          for (int64_t k = 0; k < n; ++k) {
            mx = std::max(mx, ops::as_double(px[l.inner[static_cast<size_t>(k)]]));
          }
        }
        bool nan = false;
        for (int64_t k = 0; k < n; ++k) {
          const double v = ops::as_double(px[l.inner[static_cast<size_t>(k)]]);
          if (std::isnan(v)) nan = true;
          switch (p.op) {
            case R::kMax:
              acc = std::max(acc, v);
              break;
            case R::kMin:
              acc = std::min(acc, v);
              break;
            case R::kProd:
              acc *= v;
              break;
            case R::kL1:
              acc += std::fabs(v);
              break;
            case R::kL2:
            case R::kSumSquare:
              acc += v * v;
              break;
            case R::kLogSumExp:
              acc += std::exp(v - mx);
              break;
            default:
              acc += v;
          }
        }
        if (p.op == R::kMean) acc = acc / static_cast<double>(n);  // NaN for an empty reduction
        if (p.op == R::kL2) acc = std::sqrt(acc);
        if (p.op == R::kLogSum) acc = std::log(acc);
        if (p.op == R::kLogSumExp) acc = n ? mx + std::log(acc) : -std::numeric_limits<double>::infinity();
        if (nan && (p.op == R::kMax || p.op == R::kMin)) acc = std::nan("");
        y[o] = ops::from_double<T>(acc);
      }
    }
  });
}

Status run_reduce(const ReduceParams& p, const KernelArgs& a, const ExecContext& exec) {
  if (p.dtype == DType::kBool) {  // ReduceMax / ReduceMin on bool: any / all
    reduce_typed<uint8_t>(p, a.inputs[0]->data<uint8_t>(), a.outputs[0]->data<uint8_t>(),
                          exec.num_threads);
    return Status::ok();
  }
  ops::visit_all_numeric(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    reduce_typed<T>(p, a.inputs[0]->data<T>(), a.outputs[0]->data<T>(), exec.num_threads);
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_reduce(const OpContext& ctx, R op) {
  ReduceParams p{op, ctx.inputs[0].dtype, {}};
  const bool ok = ops::visit_all_numeric(p.dtype, [](auto) {}) ||
                  (p.dtype == DType::kBool && (op == R::kMax || op == R::kMin));
  if (!ok) return ops::dtype_error(ctx, 0, "numeric types");
  TERN_ASSIGN_OR_RETURN(ReduceSpec s, reduce_spec(ctx));
  p.layout = layout_of(ctx.inputs[0].shape, s.reduced, s.keepdims);
  if (s.identity) p.layout.inner = {0};
  return make_kernel("reference", std::move(p), run_reduce);
}

template <R Op>
Expected<std::unique_ptr<Kernel>> make_reduce(const OpContext& ctx) {
  return make_reduce(ctx, Op);
}

// ---- ArgMax / ArgMin ----------------------------------------------------------------------------

struct ArgParams {
  bool max;
  bool last;
  DType dtype;
  int64_t outer, n, inner;
};

Expected<ArgParams> arg_params(const OpContext& ctx, bool max, Shape* out) {
  const Shape& in = ctx.inputs[0].shape;
  TERN_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 0));
  TERN_ASSIGN_OR_RETURN(int64_t keep, ctx.attrs().get_int("keepdims", 1));
  TERN_ASSIGN_OR_RETURN(int64_t last, ctx.attrs().get_int("select_last_index", 0));
  TERN_ASSIGN_OR_RETURN(axis, ops::normalize_axis(axis, static_cast<int64_t>(in.size())));
  ArgParams p{max, last != 0, ctx.inputs[0].dtype, 1, in[static_cast<size_t>(axis)], 1};
  for (int64_t d = 0; d < axis; ++d) p.outer *= in[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < in.size(); ++d) p.inner *= in[d];
  // (Unknown sizes are negative: only a known empty axis with elements to choose for is refused.)
  if (p.n == 0 && p.outer != 0 && p.inner != 0) {
    return invalid_argument(ctx.where, ": empty axis ", axis);
  }
  *out = in;
  if (keep) {
    (*out)[static_cast<size_t>(axis)] = 1;
  } else {
    out->erase(out->begin() + axis);
  }
  return p;
}

Status infer_arg(OpContext& ctx) {
  Shape out;
  TERN_RETURN_IF_ERROR(arg_params(ctx, true, &out).status());
  ctx.set_output(0, DType::kInt64, out);
  return Status::ok();
}

Status run_arg(const ArgParams& p, const KernelArgs& a, const ExecContext&) {
  int64_t* y = a.outputs[0]->data<int64_t>();
  ops::visit_all_numeric(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = a.inputs[0]->data<T>();
    for (int64_t o = 0; o < p.outer; ++o) {
      for (int64_t i = 0; i < p.inner; ++i) {
        int64_t best = 0;
        double bv = ops::as_double(x[o * p.n * p.inner + i]);
        for (int64_t k = 1; k < p.n; ++k) {
          const double v = ops::as_double(x[(o * p.n + k) * p.inner + i]);
          const bool better = p.max ? (v > bv || (p.last && v == bv)) : (v < bv || (p.last && v == bv));
          if (better) best = k, bv = v;
        }
        y[o * p.inner + i] = best;
      }
    }
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_arg(const OpContext& ctx, bool max) {
  if (!ops::visit_all_numeric(ctx.inputs[0].dtype, [](auto) {})) {
    return ops::dtype_error(ctx, 0, "numeric types");
  }
  Shape out;
  TERN_ASSIGN_OR_RETURN(ArgParams p, arg_params(ctx, max, &out));
  return make_kernel("reference", p, run_arg);
}

template <bool kMax>
Expected<std::unique_ptr<Kernel>> make_arg(const OpContext& ctx) {
  return make_arg(ctx, kMax);
}

// ---- CumSum / CumProd ---------------------------------------------------------------------------

struct CumParams {
  bool prod, exclusive, reverse;
  DType dtype;
  int64_t outer, n, inner;
};

Status infer_same(OpContext& ctx) {
  ctx.set_output(0, ctx.inputs[0].dtype, ctx.inputs[0].shape);
  return Status::ok();
}

Status run_cum(const CumParams& p, const KernelArgs& a, const ExecContext&) {
  ops::visit_all_numeric(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    using A = std::conditional_t<ops::is_float_like_v<T>, double, T>;
    const T* x = a.inputs[0]->data<T>();
    T* y = a.outputs[0]->data<T>();
    for (int64_t o = 0; o < p.outer; ++o) {
      for (int64_t i = 0; i < p.inner; ++i) {
        A acc = p.prod ? A(1) : A(0);
        for (int64_t s = 0; s < p.n; ++s) {
          const int64_t k = p.reverse ? p.n - 1 - s : s;
          const int64_t at = (o * p.n + k) * p.inner + i;
          A v;
          if constexpr (ops::is_float_like_v<T>) {
            v = ops::as_double(x[at]);
          } else {
            v = x[at];
          }
          if (p.exclusive) {
            y[at] = ops::from_double<T>(static_cast<double>(acc));
            if constexpr (!ops::is_float_like_v<T>) y[at] = acc;
          }
          acc = p.prod ? static_cast<A>(acc * v) : static_cast<A>(acc + v);
          if (!p.exclusive) {
            if constexpr (ops::is_float_like_v<T>) {
              y[at] = ops::from_double<T>(acc);
            } else {
              y[at] = acc;
            }
          }
        }
      }
    }
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_cum(const OpContext& ctx, bool prod) {
  if (!ops::visit_all_numeric(ctx.inputs[0].dtype, [](auto) {})) {
    return ops::dtype_error(ctx, 0, "numeric types");
  }
  TERN_ASSIGN_OR_RETURN(auto axis_v, ops::input_ints(ctx, 1));
  if (axis_v.size() != 1) return invalid_model(ctx.where, ": axis must hold one value");
  const Shape& in = ctx.inputs[0].shape;
  TERN_ASSIGN_OR_RETURN(int64_t axis, ops::normalize_axis(axis_v[0], static_cast<int64_t>(in.size())));
  TERN_ASSIGN_OR_RETURN(int64_t excl, ctx.attrs().get_int("exclusive", 0));
  TERN_ASSIGN_OR_RETURN(int64_t rev, ctx.attrs().get_int("reverse", 0));
  CumParams p{prod, excl != 0, rev != 0, ctx.inputs[0].dtype, 1, in[static_cast<size_t>(axis)], 1};
  for (int64_t d = 0; d < axis; ++d) p.outer *= in[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < in.size(); ++d) p.inner *= in[d];
  return make_kernel("reference", p, run_cum);
}

template <bool kProd>
Expected<std::unique_ptr<Kernel>> make_cum(const OpContext& ctx) {
  return make_cum(ctx, kProd);
}

}  // namespace

TERN_REGISTRATION void register_op_reduce(OpRegistry& r) {
  auto add = [&](const char* name, KernelFactory f, OpAttributeNames a) {
    r.add({name, 1, 2, 1, 1, infer_reduce, f, {1}, a});
  };
  add("ReduceSum", make_reduce<R::kSum>, attrs("axes, keepdims, noop_with_empty_axes"));
  add("ReduceMean", make_reduce<R::kMean>, attrs("axes, keepdims, noop_with_empty_axes"));
  add("ReduceMax", make_reduce<R::kMax>, attrs("axes, keepdims, noop_with_empty_axes"));
  add("ReduceMin", make_reduce<R::kMin>, attrs("axes, keepdims, noop_with_empty_axes"));
  add("ReduceProd", make_reduce<R::kProd>, attrs("axes, keepdims, noop_with_empty_axes"));
  add("ReduceL1", make_reduce<R::kL1>, attrs("axes, keepdims, noop_with_empty_axes"));
  add("ReduceL2", make_reduce<R::kL2>, attrs("axes, keepdims, noop_with_empty_axes"));
  add("ReduceLogSum", make_reduce<R::kLogSum>, attrs("axes, keepdims, noop_with_empty_axes"));
  add("ReduceLogSumExp", make_reduce<R::kLogSumExp>, attrs("axes, keepdims, noop_with_empty_axes"));
  add("ReduceSumSquare", make_reduce<R::kSumSquare>, attrs("axes, keepdims, noop_with_empty_axes"));
  r.add({"ArgMax",
         1,
         1,
         1,
         1,
         infer_arg,
         make_arg<true>,
         {},
         attrs("axis, keepdims, select_last_index")});
  r.add({"ArgMin",
         1,
         1,
         1,
         1,
         infer_arg,
         make_arg<false>,
         {},
         attrs("axis, keepdims, select_last_index")});
  r.add({"CumSum", 2, 2, 1, 1, infer_same, make_cum<false>, {1}, attrs("exclusive, reverse")});
  r.add({"CumProd", 2, 2, 1, 1, infer_same, make_cum<true>, {1}, attrs("exclusive, reverse")});
}

}  // namespace tern
