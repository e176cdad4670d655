// Normalisations: LayerNormalization (optional Mean / InvStdDev outputs), RMSNormalization,
// GroupNormalization (scale per group before opset 21, per channel since), InstanceNormalization,
// LpNormalization and LRN. Statistics in double; scale and bias broadcast over the normalised dims.
#include <cmath>

#include "ops/norm.h"

#include "core/parallel.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

// Offsets of a (unidirectionally broadcast) tensor of shape `s` for each flat index of `full`.
std::vector<int64_t> broadcast_index(const Shape& s, const Shape& full) {
  const size_t r = full.size();
  Shape a(r, 1);
  for (size_t i = 0; i < s.size() && i < r; ++i) a[r - s.size() + i] = s[i];
  Shape st(r, 0);
  int64_t m = 1;
  for (size_t d = r; d-- > 0;) {
    st[d] = a[d] == 1 ? 0 : m;
    m *= a[d];
  }
  std::vector<int64_t> idx(static_cast<size_t>(numel(full)));
  std::vector<int64_t> pos(r, 0);
  for (size_t i = 0; i < idx.size(); ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < r; ++d) off += pos[d] * st[d];
    idx[i] = off;
    for (size_t d = r; d-- > 0;) {
      if (++pos[d] < full[d]) break;
      pos[d] = 0;
    }
  }
  return idx;
}

std::vector<double> to_doubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.float_at(i);
  return v;
}

void store_doubles(Tensor& t, const std::vector<double>& v) {
  ops::visit_any_float(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < v.size(); ++i) t.data<T>()[i] = ops::from_double<T>(v[i]);
  });
}

// ---- LayerNormalization / RMSNormalization ------------------------------------------------------

struct LnParams {
  bool rms;
  double eps;
  int64_t outer, inner;
  std::vector<int64_t> scale_idx, bias_idx;
};

Expected<int64_t> ln_axis(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", -1));
  return ops::normalize_axis(axis, static_cast<int64_t>(ctx.inputs[0].shape.size()));
}

Status infer_ln(OpContext& ctx) {
  if (!ops::visit_any_float(ctx.inputs[0].dtype, [](auto) {})) {
    return ops::dtype_error(ctx, 0, "float types");
  }
  TERN_ASSIGN_OR_RETURN(int64_t axis, ln_axis(ctx));
  const Shape& x = ctx.inputs[0].shape;
  ctx.set_output(0, ctx.inputs[0].dtype, x);
  Shape stat = x;
  for (size_t d = static_cast<size_t>(axis); d < stat.size(); ++d) stat[d] = 1;
  TERN_ASSIGN_OR_RETURN(int64_t stash, ctx.attrs().get_int("stash_type", 1));
  const DType sd = stash == 1 ? DType::kFloat32 : ctx.inputs[0].dtype;
  for (size_t i = 1; i < ctx.outputs.size(); ++i) ctx.set_output(i, sd, stat);
  return Status::ok();
}

Status run_ln(const LnParams& p, const KernelArgs& a, const ExecContext& exec) {
  const std::vector<double> x = to_doubles(*a.inputs[0]);
  const std::vector<double> sc = to_doubles(*a.inputs[1]);
  const bool has_b = a.inputs.size() > 2 && a.inputs[2];
  const std::vector<double> b = has_b ? to_doubles(*a.inputs[2]) : std::vector<double>();
  std::vector<double> y(x.size()), mean(static_cast<size_t>(p.outer)),
      inv(static_cast<size_t>(p.outer));
  parallel_for(p.outer, 1, exec.num_threads, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const double* xr = x.data() + r * p.inner;
      double m = 0;
      if (!p.rms) {
        for (int64_t i = 0; i < p.inner; ++i) m += xr[i];
        m /= static_cast<double>(p.inner);
      }
      double var = 0;
      for (int64_t i = 0; i < p.inner; ++i) var += (xr[i] - m) * (xr[i] - m);
      var /= static_cast<double>(p.inner);
      const double is = 1.0 / std::sqrt(var + p.eps);
      mean[static_cast<size_t>(r)] = m, inv[static_cast<size_t>(r)] = is;
      for (int64_t i = 0; i < p.inner; ++i) {
        double v = (xr[i] - m) * is * sc[static_cast<size_t>(p.scale_idx[static_cast<size_t>(i)])];
        if (has_b) v += b[static_cast<size_t>(p.bias_idx[static_cast<size_t>(i)])];
        y[static_cast<size_t>(r * p.inner + i)] = v;
      }
    }
  });
  store_doubles(*a.outputs[0], y);
  if (a.outputs.size() > 1 && a.outputs[1]) store_doubles(*a.outputs[1], mean);
  if (a.outputs.size() > 2 && a.outputs[2]) store_doubles(*a.outputs[2], inv);
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_ln(const OpContext& ctx, bool rms) {
  TERN_ASSIGN_OR_RETURN(int64_t axis, ln_axis(ctx));
  const Shape& x = ctx.inputs[0].shape;
  LnParams p{rms, 1e-5, 1, 1, {}, {}};
  TERN_ASSIGN_OR_RETURN(float eps, ctx.attrs().get_float("epsilon", 1e-5f));
  p.eps = eps;
  for (int64_t d = 0; d < axis; ++d) p.outer *= x[static_cast<size_t>(d)];
  const Shape inner(x.begin() + axis, x.end());
  p.inner = numel(inner);
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    auto bs = ops::broadcast_shapes(ctx.inputs[i].shape, inner);
    if (!bs || *bs != inner) {
      return invalid_model(ctx.where, ": input ", i, " of shape ", shape_str(ctx.inputs[i].shape),
                           " does not broadcast to the normalised shape ", shape_str(inner));
    }
    (i == 1 ? p.scale_idx : p.bias_idx) = broadcast_index(ctx.inputs[i].shape, inner);
  }
  return make_kernel("reference", std::move(p), run_ln);
}

template <bool kRms>
Expected<std::unique_ptr<Kernel>> make_ln(const OpContext& ctx) {
  return make_ln(ctx, kRms);
}

// ---- GroupNormalization / InstanceNormalization -------------------------------------------------

Status infer_same(OpContext& ctx) {
  if (!ops::visit_any_float(ctx.inputs[0].dtype, [](auto) {})) {
    return ops::dtype_error(ctx, 0, "float types");
  }
  ctx.set_output(0, ctx.inputs[0].dtype, ctx.inputs[0].shape);
  return Status::ok();
}

Status run_gn(const ops::GroupNormParams& p, const KernelArgs& a, const ExecContext&) {
  const std::vector<double> x = to_doubles(*a.inputs[0]);
  const std::vector<double> sc = to_doubles(*a.inputs[1]);
  const std::vector<double> b = to_doubles(*a.inputs[2]);
  std::vector<double> y(x.size());
  const int64_t cpg = p.c / p.groups;
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t g = 0; g < p.groups; ++g) {
      const int64_t base = (n * p.c + g * cpg) * p.spatial, len = cpg * p.spatial;
      double m = 0, var = 0;
      for (int64_t i = 0; i < len; ++i) m += x[static_cast<size_t>(base + i)];
      m /= static_cast<double>(len);
      for (int64_t i = 0; i < len; ++i) {
        const double d = x[static_cast<size_t>(base + i)] - m;
        var += d * d;
      }
      const double is = 1.0 / std::sqrt(var / static_cast<double>(len) + p.eps);
      for (int64_t i = 0; i < len; ++i) {
        const int64_t ch = g * cpg + i / p.spatial;
        const size_t k = static_cast<size_t>(p.per_group_scale ? g : ch);
        y[static_cast<size_t>(base + i)] =
            (x[static_cast<size_t>(base + i)] - m) * is * sc[k] + b[k];
      }
    }
  }
  store_doubles(*a.outputs[0], y);
  return Status::ok();
}

template <bool kInstance>
Expected<std::unique_ptr<Kernel>> make_gn(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::GroupNormParams p, ops::parse_group_norm(ctx, kInstance));
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));  // the CPU's norm_vec reads blocks
  return make_kernel("reference", p, run_gn);
}

// ---- LpNormalization ----------------------------------------------------------------------------

struct LpParams {
  int64_t outer, dim, inner, p;
};

Status run_lp(const LpParams& p, const KernelArgs& a, const ExecContext&) {
  std::vector<double> x = to_doubles(*a.inputs[0]);
  for (int64_t o = 0; o < p.outer; ++o) {
    for (int64_t i = 0; i < p.inner; ++i) {
      double norm = 0;
      for (int64_t k = 0; k < p.dim; ++k) {
        const double v = x[static_cast<size_t>((o * p.dim + k) * p.inner + i)];
        norm += p.p == 1 ? std::fabs(v) : v * v;
      }
      if (p.p == 2) norm = std::sqrt(norm);
      for (int64_t k = 0; k < p.dim; ++k) {
        double& v = x[static_cast<size_t>((o * p.dim + k) * p.inner + i)];
        v = norm == 0 ? 0 : v / norm;
      }
    }
  }
  store_doubles(*a.outputs[0], x);
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_lp(const OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  TERN_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", -1));
  TERN_ASSIGN_OR_RETURN(axis, ops::normalize_axis(axis, static_cast<int64_t>(x.size())));
  LpParams p{1, x[static_cast<size_t>(axis)], 1, 2};
  TERN_ASSIGN_OR_RETURN(p.p, ctx.attrs().get_int("p", 2));
  if (p.p != 1 && p.p != 2) return invalid_model(ctx.where, ": p must be 1 or 2");
  for (int64_t d = 0; d < axis; ++d) p.outer *= x[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.size(); ++d) p.inner *= x[d];
  return make_kernel("reference", p, run_lp);
}

// ---- LRN ----------------------------------------------------------------------------------------

struct LrnParams {
  double alpha, beta, bias;
  int64_t size, n, c, spatial;
};

Status run_lrn(const LrnParams& p, const KernelArgs& a, const ExecContext&) {
  const std::vector<double> x = to_doubles(*a.inputs[0]);
  std::vector<double> y(x.size());
  const int64_t lo = (p.size - 1) / 2, hi = p.size - 1 - lo;
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t c = 0; c < p.c; ++c) {
      for (int64_t s = 0; s < p.spatial; ++s) {
        double sq = 0;
        for (int64_t k = std::max<int64_t>(0, c - lo); k <= std::min(p.c - 1, c + hi); ++k) {
          const double v = x[static_cast<size_t>((n * p.c + k) * p.spatial + s)];
          sq += v * v;
        }
        const size_t at = static_cast<size_t>((n * p.c + c) * p.spatial + s);
        y[at] = x[at] / std::pow(p.bias + p.alpha / static_cast<double>(p.size) * sq, p.beta);
      }
    }
  }
  store_doubles(*a.outputs[0], y);
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_lrn(const OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  if (x.size() < 2) return invalid_model(ctx.where, ": input must be [N, C, ...]");
  LrnParams p{1e-4, 0.75, 1.0, 0, x[0], x[1], 1};
  TERN_ASSIGN_OR_RETURN(float alpha, ctx.attrs().get_float("alpha", 1e-4f));
  TERN_ASSIGN_OR_RETURN(float beta, ctx.attrs().get_float("beta", 0.75f));
  TERN_ASSIGN_OR_RETURN(float bias, ctx.attrs().get_float("bias", 1.0f));
  TERN_ASSIGN_OR_RETURN(p.size, ctx.attrs().get_int("size", 0));
  if (p.size < 1) return invalid_model(ctx.where, ": size must be positive");
  p.alpha = alpha, p.beta = beta, p.bias = bias;
  for (size_t d = 2; d < x.size(); ++d) p.spatial *= x[d];
  return make_kernel("reference", p, run_lrn);
}

}  // namespace

namespace ops {

Expected<GroupNormParams> parse_group_norm(const OpContext& ctx, bool instance) {
  const Shape& x = ctx.inputs[0].shape;
  if (x.size() < 2) return invalid_model(ctx.where, ": input must be [N, C, ...]");
  GroupNormParams p{1e-5, x[0], x[1], x[1], 1, false};
  for (size_t d = 2; d < x.size(); ++d) p.spatial *= x[d];
  TERN_ASSIGN_OR_RETURN(float eps, ctx.attrs().get_float("epsilon", 1e-5f));
  p.eps = eps;
  if (!instance) {
    TERN_ASSIGN_OR_RETURN(p.groups, ctx.attrs().get_int("num_groups", 0));
    if (p.groups < 1 || p.c % p.groups) {
      return invalid_model(ctx.where, ": num_groups ", p.groups, " does not divide C = ", p.c);
    }
    p.per_group_scale = numel(ctx.inputs[1].shape) == p.groups && p.groups != p.c;
  }
  const int64_t want = p.per_group_scale ? p.groups : p.c;
  if (numel(ctx.inputs[1].shape) != want || numel(ctx.inputs[2].shape) != want) {
    return invalid_model(ctx.where, ": scale and bias must hold ", want, " values");
  }
  return p;
}

}  // namespace ops

TERN_REGISTRATION void register_op_norm(OpRegistry& r) {
  r.add({"LayerNormalization",
         2,
         3,
         1,
         3,
         infer_ln,
         make_ln<false>,
         {},
         attrs("axis, epsilon, stash_type")});
  r.add({"RMSNormalization",
         2,
         2,
         1,
         1,
         infer_ln,
         make_ln<true>,
         {},
         attrs("axis, epsilon, stash_type")});
  r.add({"GroupNormalization",
         3,
         3,
         1,
         1,
         infer_same,
         make_gn<false>,
         {},
         attrs("epsilon, num_groups, stash_type")});
  r.add({"InstanceNormalization", 3, 3, 1, 1, infer_same, make_gn<true>, {}, attrs("epsilon")});
  r.add({"LpNormalization", 1, 1, 1, 1, infer_same, make_lp, {}, attrs("axis, p")});
  r.add({"LRN", 1, 1, 1, 1, infer_same, make_lrn, {}, attrs("alpha, beta, bias, size")});
}

}  // namespace tern
