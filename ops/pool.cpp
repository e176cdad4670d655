// MaxPool (with its Indices output), AveragePool, LpPool, GlobalAveragePool, GlobalMaxPool,
// GlobalLpPool, 1-D to 3-D. MaxPool takes every numeric type, the others float types.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/parallel.h"
#include "ops/common/op_utils.h"
#include "ops/common/window.h"

namespace tern {
namespace {

enum class PoolKind { kMax, kAverage, kLp };

struct PoolParams {
  PoolKind kind;
  ops::Window win;     // 3-D form
  int64_t planes = 0;  // N * C
  bool count_include_pad = false;
  DType dtype;
  int64_t p_norm = 2;         // LpPool
  bool want_indices = false;  // MaxPool's second output
  // MaxPool's Indices within a plane: row-major (storage_order 0) or column-major (1, the first
  // spatial dim fastest).
  bool column_major = false;
};

Expected<PoolParams> parse_pool(const OpContext& ctx, PoolKind kind, bool global) {
  const Shape& x = ctx.inputs[0].shape;
  const bool ok = kind == PoolKind::kMax ? ops::visit_all_numeric(ctx.inputs[0].dtype, [](auto) {})
                                         : ops::visit_any_float(ctx.inputs[0].dtype, [](auto) {});
  if (!ok) {
    return ops::dtype_error(ctx, 0, kind == PoolKind::kMax ? "numeric types" : "float types");
  }
  if (x.size() < 3) {
    return invalid_argument("input '", ctx.input_names[0], "' must be [N, C, spatial...], got ",
                            shape_str(x));
  }
  PoolParams p;
  p.want_indices = ctx.outputs.size() > 1 && ctx.outputs[1].present;
  if (kind == PoolKind::kLp) {
    TERN_ASSIGN_OR_RETURN(p.p_norm, ctx.attrs().get_int("p", 2));
  }
  p.kind = kind;
  p.dtype = ctx.inputs[0].dtype;
  p.planes = x[0] * x[1];
  ops::Window w;
  if (global) {
    Attributes none;
    TERN_ASSIGN_OR_RETURN(
        w, ops::forward_window(none, x, std::vector<int64_t>(x.begin() + 2, x.end()), false));
  } else {
    TERN_ASSIGN_OR_RETURN(int64_t ceil_mode, ctx.attrs().get_int("ceil_mode", 0));
    TERN_ASSIGN_OR_RETURN(int64_t cip, ctx.attrs().get_int("count_include_pad", 0));
    TERN_ASSIGN_OR_RETURN(int64_t storage_order, ctx.attrs().get_int("storage_order", 0));
    if (storage_order != 0 && storage_order != 1) {
      return invalid_model("storage_order ", storage_order, " is not 0 or 1");
    }
    p.column_major = storage_order == 1;
    p.count_include_pad = cip != 0;
    TERN_ASSIGN_OR_RETURN(w, ops::forward_window(ctx.attrs(), x, {}, ceil_mode != 0));
  }
  if (w.spatial > 3) return unsupported("pooling over ", w.spatial, " spatial dims");
  p.win = ops::as_3d(w);
  return p;
}

Shape pool_out_shape(const OpContext& ctx, const PoolParams& p) {
  Shape y = {ctx.inputs[0].shape[0], ctx.inputs[0].shape[1]};
  const size_t s = ctx.inputs[0].shape.size() - 2;
  y.insert(y.end(), p.win.out.end() - static_cast<std::ptrdiff_t>(s), p.win.out.end());
  return y;
}

template <class T>
void pool_plane(const PoolParams& p, const T* x, T* y, int64_t* idx, int64_t plane_base) {
  const ops::Window& v = p.win;
  for (int64_t od = 0; od < v.out[0]; ++od)
    for (int64_t oh = 0; oh < v.out[1]; ++oh)
      for (int64_t ow = 0; ow < v.out[2]; ++ow) {
        double acc = p.kind == PoolKind::kMax ? -std::numeric_limits<double>::infinity() : 0.0;
        int64_t count = 0, padded_count = 0, arg = 0;
        for (int64_t kd = 0; kd < v.kernel[0]; ++kd) {
          const int64_t id = od * v.strides[0] - v.pads_begin[0] + kd * v.dilations[0];
          for (int64_t kh = 0; kh < v.kernel[1]; ++kh) {
            const int64_t ih = oh * v.strides[1] - v.pads_begin[1] + kh * v.dilations[1];
            for (int64_t kw = 0; kw < v.kernel[2]; ++kw) {
              const int64_t iw = ow * v.strides[2] - v.pads_begin[2] + kw * v.dilations[2];
              // Positions inside input + explicit padding count for count_include_pad.
              if (id < v.in[0] + v.pads_end[0] && ih < v.in[1] + v.pads_end[1] &&
                  iw < v.in[2] + v.pads_end[2]) {
                ++padded_count;
              }
              if (id < 0 || id >= v.in[0] || ih < 0 || ih >= v.in[1] || iw < 0 || iw >= v.in[2]) {
                continue;
              }
              const int64_t at = (id * v.in[1] + ih) * v.in[2] + iw;
              const double xv = ops::as_double(x[at]);
              if (p.kind == PoolKind::kMax) {
                if (std::isnan(xv) || xv > acc) {
                  acc = xv;
                  arg = p.column_major ? (iw * v.in[1] + ih) * v.in[0] + id : at;
                }
              } else if (p.kind == PoolKind::kLp) {
                acc += std::pow(std::fabs(xv), static_cast<double>(p.p_norm));
              } else {
                acc += xv;
              }
              ++count;
            }
          }
        }
        if (p.kind == PoolKind::kAverage) {
          const int64_t div = p.count_include_pad ? padded_count : count;
          acc = div ? acc / static_cast<double>(div) : 0.0;
        }
        if (p.kind == PoolKind::kLp) acc = std::pow(acc, 1.0 / static_cast<double>(p.p_norm));
        y[(od * v.out[1] + oh) * v.out[2] + ow] = ops::from_double<T>(acc);
        if (idx) idx[(od * v.out[1] + oh) * v.out[2] + ow] = plane_base + arg;
      }
}

Status run_pool(const PoolParams& p, const KernelArgs& a, const ExecContext& exec) {
  const int64_t in_plane = p.win.in[0] * p.win.in[1] * p.win.in[2];
  const int64_t out_plane = p.win.out[0] * p.win.out[1] * p.win.out[2];
  int64_t* idx = p.want_indices && a.outputs[1] ? a.outputs[1]->data<int64_t>() : nullptr;
  ops::visit_all_numeric(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = a.inputs[0]->data<T>();
    T* y = a.outputs[0]->data<T>();
    parallel_for(p.planes, std::max<int64_t>(1, 4096 / std::max<int64_t>(in_plane, 1)),
                 exec.num_threads, [&](int64_t b, int64_t e) {
                   for (int64_t i = b; i < e; ++i) {
                     pool_plane<T>(p, x + i * in_plane, y + i * out_plane,
                                   idx ? idx + i * out_plane : nullptr, i * in_plane);
                   }
                 });
  });
  return Status::ok();
}

Status infer_pool(OpContext& ctx, PoolKind kind, bool global) {
  TERN_ASSIGN_OR_RETURN(PoolParams p, parse_pool(ctx, kind, global));
  ctx.set_output(0, ctx.inputs[0].dtype, pool_out_shape(ctx, p));
  if (ctx.outputs.size() > 1) ctx.set_output(1, DType::kInt64, pool_out_shape(ctx, p));
  return Status::ok();
}

template <PoolKind K, bool Global>
Status infer_pool(OpContext& ctx) {
  return infer_pool(ctx, K, Global);
}

Expected<std::unique_ptr<Kernel>> make_pool(const OpContext& ctx, PoolKind kind, bool global) {
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  TERN_ASSIGN_OR_RETURN(PoolParams p, parse_pool(ctx, kind, global));
  return make_kernel("reference", std::move(p), run_pool);
}

template <PoolKind K, bool Global>
Expected<std::unique_ptr<Kernel>> make_pool(const OpContext& ctx) {
  return make_pool(ctx, K, Global);
}

}  // namespace

TERN_REGISTRATION void register_op_pool(OpRegistry& r) {
  r.add({"MaxPool",
         1,
         1,
         1,
         2,
         infer_pool<PoolKind::kMax, false>,
         make_pool<PoolKind::kMax, false>,
         {},
         attrs("auto_pad, ceil_mode, dilations, kernel_shape, pads, storage_order, strides")});
  r.add({"AveragePool",
         1,
         1,
         1,
         1,
         infer_pool<PoolKind::kAverage, false>,
         make_pool<PoolKind::kAverage, false>,
         {},
         attrs("auto_pad, ceil_mode, count_include_pad, dilations, kernel_shape, pads, strides")});
  r.add({"LpPool",
         1,
         1,
         1,
         1,
         infer_pool<PoolKind::kLp, false>,
         make_pool<PoolKind::kLp, false>,
         {},
         attrs("auto_pad, ceil_mode, dilations, kernel_shape, p, pads, strides")});
  r.add({"GlobalLpPool",
         1,
         1,
         1,
         1,
         infer_pool<PoolKind::kLp, true>,
         make_pool<PoolKind::kLp, true>,
         {},
         attrs("p")});
  r.add({"GlobalMaxPool",
         1,
         1,
         1,
         1,
         infer_pool<PoolKind::kMax, true>,
         make_pool<PoolKind::kMax, true>,
         {},
         attrs({})});
  r.add({"GlobalAveragePool",
         1,
         1,
         1,
         1,
         infer_pool<PoolKind::kAverage, true>,
         make_pool<PoolKind::kAverage, true>,
         {},
         attrs({})});
}

}  // namespace tern
