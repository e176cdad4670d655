// Softmax, LogSoftmax and Hardmax. Before opset 13 the input is coerced to 2-D at `axis` (default
// 1) and normalised over the flattened trailing dims; from opset 13 it is normalised over one axis
// (default -1).
#include <cmath>
#include <vector>

#include "core/parallel.h"
#include "ops/common/op_utils.h"
#include "ops/softmax.h"

namespace tern {
namespace ops {

Expected<SoftmaxSpan> parse_softmax_span(const OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  const int64_t r = static_cast<int64_t>(x.size());
  if (!visit_any_float(ctx.inputs[0].dtype, [](auto) {})) return dtype_error(ctx, 0, "float types");
  const bool legacy = ctx.opset > 0 && ctx.opset < 13;
  TERN_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", legacy ? 1 : -1));
  TERN_ASSIGN_OR_RETURN(axis, normalize_axis(axis, r));
  SoftmaxSpan p;
  for (int64_t i = 0; i < axis; ++i) p.outer *= x[static_cast<size_t>(i)];
  if (legacy) {
    for (int64_t i = axis; i < r; ++i) p.axis_len *= x[static_cast<size_t>(i)];
  } else {
    p.axis_len = r ? x[static_cast<size_t>(axis)] : 1;
    for (int64_t i = axis + 1; i < r; ++i) p.inner *= x[static_cast<size_t>(i)];
  }
  return p;
}

}  // namespace ops

namespace {

enum class Mode { kSoftmax, kLogSoftmax, kHardmax };

struct SoftmaxParams {
  int64_t outer, axis_len, inner;  // normalise over axis_len with stride inner
  DType dtype;
  Mode mode = Mode::kSoftmax;
};

Expected<SoftmaxParams> parse_softmax(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::SoftmaxSpan sp, ops::parse_softmax_span(ctx));
  return SoftmaxParams{sp.outer, sp.axis_len, sp.inner, ctx.inputs[0].dtype};
}

Status infer_softmax(OpContext& ctx) {
  TERN_RETURN_IF_ERROR(parse_softmax(ctx).status());
  ctx.set_output(0, ctx.inputs[0].dtype, ctx.inputs[0].shape);
  return Status::ok();
}

template <class T>
void other_rows(const SoftmaxParams& p, const T* x, T* y, int threads) {
  parallel_for(p.outer * p.inner, 1, threads, [&](int64_t b, int64_t e) {
    std::vector<double> v(static_cast<size_t>(p.axis_len));
    for (int64_t row = b; row < e; ++row) {
      const int64_t o = row / p.inner, in = row % p.inner;
      const int64_t base = o * p.axis_len * p.inner + in;
      double mx = -INFINITY;
      int64_t arg = 0;
      for (int64_t i = 0; i < p.axis_len; ++i) {
        v[static_cast<size_t>(i)] = ops::as_double(x[base + i * p.inner]);
        if (v[static_cast<size_t>(i)] > mx) mx = v[static_cast<size_t>(i)], arg = i;
      }
      double sum = 0;
      for (double d : v) sum += std::exp(d - mx);
      for (int64_t i = 0; i < p.axis_len; ++i) {
        const double r = p.mode == Mode::kHardmax ? (i == arg ? 1.0 : 0.0)
                         : p.mode == Mode::kLogSoftmax
                             ? v[static_cast<size_t>(i)] - mx - std::log(sum)
                             : std::exp(v[static_cast<size_t>(i)] - mx) / sum;
        y[base + i * p.inner] = ops::from_double<T>(r);
      }
    }
  });
}

template <class T>
void softmax_rows(const SoftmaxParams& p, const T* x, T* y, int threads) {
  parallel_for(p.outer * p.inner, std::max<int64_t>(1, 4096 / std::max<int64_t>(p.axis_len, 1)),
               threads, [&](int64_t b, int64_t e) {
                 for (int64_t row = b; row < e; ++row) {
                   const int64_t o = row / p.inner, in = row % p.inner;
                   const T* xr = x + o * p.axis_len * p.inner + in;
                   T* yr = y + o * p.axis_len * p.inner + in;
                   T mx = xr[0];
                   for (int64_t i = 1; i < p.axis_len; ++i) mx = std::max(mx, xr[i * p.inner]);
                   double sum = 0;
                   for (int64_t i = 0; i < p.axis_len; ++i) {
                     T e1 = std::exp(xr[i * p.inner] - mx);
                     yr[i * p.inner] = e1;
                     sum += e1;
                   }
                   const T inv = static_cast<T>(1.0 / sum);
                   for (int64_t i = 0; i < p.axis_len; ++i) yr[i * p.inner] *= inv;
                 }
               });
}

Status run_softmax(const SoftmaxParams& q, const KernelArgs& a, const ExecContext& exec) {
  if (q.axis_len == 0) return Status::ok();
  ops::visit_any_float(q.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      if (q.mode == Mode::kSoftmax) {
        softmax_rows<T>(q, a.inputs[0]->data<T>(), a.outputs[0]->data<T>(), exec.num_threads);
        return;
      }
    }
    other_rows<T>(q, a.inputs[0]->data<T>(), a.outputs[0]->data<T>(), exec.num_threads);
  });
  return Status::ok();
}

// One kernel for the three modes (the template only names the mode): code size.
Expected<std::unique_ptr<Kernel>> make_softmax(const OpContext& ctx, Mode mode) {
  TERN_ASSIGN_OR_RETURN(SoftmaxParams p, parse_softmax(ctx));
  p.mode = mode;
  return make_kernel("reference", p, run_softmax);
}

template <Mode M>
Expected<std::unique_ptr<Kernel>> make_softmax(const OpContext& ctx) {
  return make_softmax(ctx, M);
}

}  // namespace

TERN_REGISTRATION void register_op_softmax(OpRegistry& r) {
  r.add({"Softmax", 1, 1, 1, 1, infer_softmax, make_softmax<Mode::kSoftmax>, {}, attrs("axis")});
  r.add({"LogSoftmax",
         1,
         1,
         1,
         1,
         infer_softmax,
         make_softmax<Mode::kLogSoftmax>,
         {},
         attrs("axis")});
  r.add({"Hardmax", 1, 1, 1, 1, infer_softmax, make_softmax<Mode::kHardmax>, {}, attrs("axis")});
}

}  // namespace tern
