// Ops of transformer and signal pipelines: the window functions (HannWindow, HammingWindow,
// BlackmanWindow), SwiGLU, RotaryEmbedding (half or interleaved rotation, partial rotary_dim,
// position ids or per-token caches, 3-D input with num_heads), TensorScatter (KV-cache writes,
// linear or circular) and Det.
#include <cmath>
#include <numbers>

#include "ops/common/op_utils.h"

namespace tern {
namespace {

// ---- windows ------------------------------------------------------------------------------------

enum class Win { kHann, kHamming, kBlackman };

Status infer_window(OpContext& ctx) {
  if (!ctx.inputs[0].value || ctx.inputs[0].value->numel() != 1) {
    return invalid_model(ctx.where, ": size must be a known scalar");
  }
  const int64_t n = ctx.inputs[0].value->int_at(0);
  if (n < 0) return invalid_argument(ctx.where, ": negative size ", n);
  TERN_ASSIGN_OR_RETURN(int64_t dt, ctx.attrs().get_int("output_datatype", 1));
  if (!ops::visit_all_numeric(static_cast<DType>(dt), [](auto) {})) {
    return unsupported(ctx.where, ": output_datatype ", dt);
  }
  ctx.set_output(0, static_cast<DType>(dt), {n});
  return Status::ok();
}

struct WinParams {
  Win kind;
  bool periodic;
};

Status run_window(const WinParams& p, const KernelArgs& a, const ExecContext&) {
  Tensor& y = *a.outputs[0];
  const int64_t n = y.numel();
  const double denom = p.periodic ? static_cast<double>(n) : static_cast<double>(n - 1);
  ops::visit_all_numeric(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < n; ++i) {
      const double t = denom > 0 ? 2 * std::numbers::pi * static_cast<double>(i) / denom : 0;
      double v = 0;
      switch (p.kind) {
        case Win::kHann:
          v = 0.5 - 0.5 * std::cos(t);
          break;
        case Win::kHamming:
          v = 25.0 / 46.0 - 21.0 / 46.0 * std::cos(t);
          break;
        case Win::kBlackman:
          v = 0.42 - 0.5 * std::cos(t) + 0.08 * std::cos(2 * t);
          break;
      }
      y.data<T>()[i] = ops::from_double<T>(v);
    }
  });
  return Status::ok();
}

template <Win W>
Expected<std::unique_ptr<Kernel>> make_window(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(int64_t periodic, ctx.attrs().get_int("periodic", 1));
  return make_kernel("reference", WinParams{W, periodic != 0}, run_window);
}

// ---- SwiGLU(a, b) = a * sigmoid(alpha * a) * b --------------------------------------------------

Status infer_same(OpContext& ctx) {
  ctx.set_output(0, ctx.inputs[0].dtype, ctx.inputs[0].shape);
  return Status::ok();
}

Status infer_swiglu(OpContext& ctx) {
  TERN_RETURN_IF_ERROR(ops::require_same_dtype(ctx, 0, 1));
  if (ctx.inputs[0].shape != ctx.inputs[1].shape) {
    return invalid_model(ctx.where, ": a and b must have the same shape");
  }
  return infer_same(ctx);
}

Status run_swiglu(const double& alpha, const KernelArgs& a, const ExecContext&) {
  ops::visit_any_float(a.inputs[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = a.inputs[0]->data<T>();
    const T* g = a.inputs[1]->data<T>();
    T* y = a.outputs[0]->data<T>();
    for (int64_t i = 0; i < a.outputs[0]->numel(); ++i) {
      const double v = ops::as_double(x[i]);
      y[i] = ops::from_double<T>(v / (1 + std::exp(-alpha * v)) * ops::as_double(g[i]));
    }
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_swiglu(const OpContext& ctx) {
  if (!ops::visit_any_float(ctx.inputs[0].dtype, [](auto) {})) {
    return ops::dtype_error(ctx, 0, "float types");
  }
  TERN_ASSIGN_OR_RETURN(float alpha, ctx.attrs().get_float("alpha", 1.0f));
  return make_kernel("reference", static_cast<double>(alpha), run_swiglu);
}

// ---- RotaryEmbedding ----------------------------------------------------------------------------

struct RopeParams {
  bool interleaved, three_d, has_pos;
  int64_t batch, heads, seq, head, rot;
};

Expected<RopeParams> rope_params(const OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  RopeParams p{};
  TERN_ASSIGN_OR_RETURN(int64_t inter, ctx.attrs().get_int("interleaved", 0));
  TERN_ASSIGN_OR_RETURN(int64_t rot, ctx.attrs().get_int("rotary_embedding_dim", 0));
  TERN_ASSIGN_OR_RETURN(int64_t nh, ctx.attrs().get_int("num_heads", 0));
  p.interleaved = inter != 0;
  p.has_pos = ctx.has_input(3);
  if (x.size() == 4) {  // [batch, heads, seq, head]
    p.batch = x[0], p.heads = x[1], p.seq = x[2], p.head = x[3];
  } else if (x.size() == 3) {  // [batch, seq, heads * head]
    if (nh <= 0 || x[2] % nh) return invalid_model(ctx.where, ": 3-D input needs num_heads");
    p.three_d = true;
    p.batch = x[0], p.seq = x[1], p.heads = nh, p.head = x[2] / nh;
  } else {
    return invalid_model(ctx.where, ": input must be 3-D or 4-D");
  }
  p.rot = rot > 0 ? rot : p.head;
  if (p.rot % 2 || p.rot > p.head) return invalid_model(ctx.where, ": bad rotary_embedding_dim");
  return p;
}

Status infer_rope(OpContext& ctx) {
  TERN_RETURN_IF_ERROR(rope_params(ctx).status());
  return infer_same(ctx);
}

Status run_rope(const RopeParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& xt = *a.inputs[0];
  const Tensor& cos_t = *a.inputs[1];
  const Tensor& sin_t = *a.inputs[2];
  const Tensor* pos = p.has_pos ? a.inputs[3] : nullptr;
  const int64_t half = p.rot / 2;
  const int64_t cache_width = cos_t.shape().back();
  std::vector<double> x(static_cast<size_t>(xt.numel()));
  for (int64_t i = 0; i < xt.numel(); ++i) x[static_cast<size_t>(i)] = xt.float_at(i);
  std::vector<double> y = x;
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads; ++h) {
      for (int64_t s = 0; s < p.seq; ++s) {
        const int64_t base = p.three_d ? ((b * p.seq + s) * p.heads + h) * p.head
                                       : ((b * p.heads + h) * p.seq + s) * p.head;
        // The cache row: by position id, or per (batch, seq) when no ids are given.
        int64_t row = pos ? pos->int_at(b * p.seq + s) : b * p.seq + s;
        if (pos && (row < 0 || row >= cos_t.shape()[0])) {
          return invalid_argument("position id ", row, " is outside the cache");
        }
        for (int64_t i = 0; i < half; ++i) {
          const double c = cos_t.float_at(row * cache_width + i);
          const double sn = sin_t.float_at(row * cache_width + i);
          const int64_t i1 = p.interleaved ? 2 * i : i, i2 = p.interleaved ? 2 * i + 1 : i + half;
          const double x1 = x[static_cast<size_t>(base + i1)],
                       x2 = x[static_cast<size_t>(base + i2)];
          y[static_cast<size_t>(base + i1)] = x1 * c - x2 * sn;
          y[static_cast<size_t>(base + i2)] = x2 * c + x1 * sn;
        }
      }
    }
  }
  ops::visit_any_float(xt.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < y.size(); ++i) a.outputs[0]->data<T>()[i] = ops::from_double<T>(y[i]);
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_rope(const OpContext& ctx) {
  if (!ops::visit_any_float(ctx.inputs[0].dtype, [](auto) {})) {
    return ops::dtype_error(ctx, 0, "float types");
  }
  TERN_ASSIGN_OR_RETURN(RopeParams p, rope_params(ctx));
  return make_kernel("reference", p, run_rope);
}

// ---- TensorScatter(past, update, write_indices) -------------------------------------------------

struct ScatterParams {
  DType dtype;
  bool circular;
  int64_t batch, outer, max_seq, upd_seq, inner;  // past [batch, outer, max_seq, inner]
};

Expected<ScatterParams> tscatter_params(const OpContext& ctx) {
  const Shape& past = ctx.inputs[0].shape;
  const Shape& upd = ctx.inputs[1].shape;
  TERN_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", -2));
  TERN_ASSIGN_OR_RETURN(std::string mode, ctx.attrs().get_string("mode", "linear"));
  TERN_ASSIGN_OR_RETURN(axis, ops::normalize_axis(axis, static_cast<int64_t>(past.size())));
  if (axis == 0 || upd.size() != past.size()) {
    return invalid_model(ctx.where, ": axis must not be the batch axis; ranks must match");
  }
  ScatterParams p{ctx.inputs[0].dtype,
                  mode == "circular",
                  past[0],
                  1,
                  past[static_cast<size_t>(axis)],
                  upd[static_cast<size_t>(axis)],
                  1};
  for (int64_t d = 1; d < axis; ++d) p.outer *= past[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < past.size(); ++d) p.inner *= past[d];
  return p;
}

Status infer_tscatter(OpContext& ctx) {
  TERN_RETURN_IF_ERROR(tscatter_params(ctx).status());
  return infer_same(ctx);
}

Status run_tscatter(const ScatterParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& past = *a.inputs[0];
  const Tensor& upd = *a.inputs[1];
  const Tensor* wi = a.inputs.size() > 2 ? a.inputs[2] : nullptr;
  Tensor& y = *a.outputs[0];
  ops::copy_elements(p.dtype, past.raw(), 0, y.raw(), 0, past.numel());
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t start = wi ? wi->int_at(b) : 0;
    for (int64_t o = 0; o < p.outer; ++o) {
      for (int64_t s = 0; s < p.upd_seq; ++s) {
        int64_t t = start + s;
        if (p.circular) t %= p.max_seq;
        if (t < 0 || t >= p.max_seq) return invalid_argument("write index ", t, " is out of range");
        ops::copy_elements(p.dtype, upd.raw(), ((b * p.outer + o) * p.upd_seq + s) * p.inner,
                           y.raw(), ((b * p.outer + o) * p.max_seq + t) * p.inner, p.inner);
      }
    }
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_tscatter(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ScatterParams p, tscatter_params(ctx));
  return make_kernel("reference", p, run_tscatter);
}

// ---- Det: LU with partial pivoting per matrix ---------------------------------------------------

Status infer_det(OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  if (x.size() < 2 || x[x.size() - 1] != x[x.size() - 2]) {
    return invalid_model(ctx.where, ": input must be [..., M, M]");
  }
  ctx.set_output(0, ctx.inputs[0].dtype, Shape(x.begin(), x.end() - 2));
  return Status::ok();
}

Status run_det(const int&, const KernelArgs& a, const ExecContext&) {
  const Tensor& x = *a.inputs[0];
  const int64_t m = x.shape().back();
  const int64_t mats = m ? x.numel() / (m * m) : 0;
  std::vector<double> out(static_cast<size_t>(a.outputs[0]->numel()), 1.0);
  for (int64_t k = 0; k < mats; ++k) {
    std::vector<double> A(static_cast<size_t>(m * m));
    for (int64_t i = 0; i < m * m; ++i) A[static_cast<size_t>(i)] = x.float_at(k * m * m + i);
    double det = 1;
    for (int64_t c = 0; c < m; ++c) {
      int64_t piv = c;
      for (int64_t r = c + 1; r < m; ++r) {
        if (std::fabs(A[static_cast<size_t>(r * m + c)]) >
            std::fabs(A[static_cast<size_t>(piv * m + c)]))
          piv = r;
      }
      if (A[static_cast<size_t>(piv * m + c)] == 0) {
        det = 0;
        break;
      }
      if (piv != c) {
        for (int64_t j = 0; j < m; ++j)
          std::swap(A[static_cast<size_t>(c * m + j)], A[static_cast<size_t>(piv * m + j)]);
        det = -det;
      }
      const double d = A[static_cast<size_t>(c * m + c)];
      det *= d;
      for (int64_t r = c + 1; r < m; ++r) {
        const double f = A[static_cast<size_t>(r * m + c)] / d;
        for (int64_t j = c; j < m; ++j)
          A[static_cast<size_t>(r * m + j)] -= f * A[static_cast<size_t>(c * m + j)];
      }
    }
    out[static_cast<size_t>(k)] = det;
  }
  ops::visit_any_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < out.size(); ++i)
      a.outputs[0]->data<T>()[i] = ops::from_double<T>(out[i]);
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_det(const OpContext& ctx) {
  if (!ops::visit_any_float(ctx.inputs[0].dtype, [](auto) {})) {
    return ops::dtype_error(ctx, 0, "float types");
  }
  return make_kernel("reference", 0, run_det);
}

}  // namespace

TERN_REGISTRATION void register_op_sequence_models(OpRegistry& r) {
  r.add({"HannWindow",
         1,
         1,
         1,
         1,
         infer_window,
         make_window<Win::kHann>,
         {0},
         attrs("output_datatype, periodic")});
  r.add({"HammingWindow",
         1,
         1,
         1,
         1,
         infer_window,
         make_window<Win::kHamming>,
         {0},
         attrs("output_datatype, periodic")});
  r.add({"BlackmanWindow",
         1,
         1,
         1,
         1,
         infer_window,
         make_window<Win::kBlackman>,
         {0},
         attrs("output_datatype, periodic")});
  r.add({"SwiGLU", 2, 2, 1, 1, infer_swiglu, make_swiglu, {}, attrs("alpha")});
  r.add({"RotaryEmbedding",
         3,
         4,
         1,
         1,
         infer_rope,
         make_rope,
         {},
         attrs("interleaved, num_heads, rotary_embedding_dim")});
  r.add({"TensorScatter", 2, 3, 1, 1, infer_tscatter, make_tscatter, {}, attrs("axis, mode")});
  r.add({"Det", 1, 1, 1, 1, infer_det, make_det, {}, attrs({})});
}

}  // namespace tern
