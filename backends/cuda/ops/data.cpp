// Data movement on CUDA: the shape-only ops (Reshape, Flatten, Squeeze, Unsqueeze, Identity) as
// device copies the planner may turn into nothing (in place), Transpose, Slice and Expand as
// strided copies, Concat as 2-D copies, Gather and Resize.
#include <algorithm>

#include "backends/cuda/ops/cuda_ops.h"
#include "core/kernel_registry.h"
#include "ops/common/device_ops.h"
#include "ops/resize.h"

namespace tern::cuda {

namespace {

struct Empty {};

Expected<std::unique_ptr<Kernel>> make_copy(const OpContext& ctx) {
  if (ctx.inputs[0].dtype == DType::kString) return unsupported(ctx.where, ": strings on CUDA");
  return make_elementwise_kernel(
      "cuda_copy", Empty{}, [](const Empty&, const KernelArgs& a, const ExecContext&) {
        const Tensor& x = *a.inputs[0];
        Tensor& y = *a.outputs[0];
        if (x.raw() == y.raw() || !y.byte_size()) return Status::ok();  // in place: nothing to move
        return check(
            cudaMemcpyAsync(y.raw(), x.raw(), y.byte_size(), cudaMemcpyDeviceToDevice, stream()),
            "device copy");
      });
}

struct StridedParams {
  int esize;
  Strided d;
};

Expected<std::unique_ptr<Kernel>> strided_kernel(const OpContext& ctx, const Shape& strides,
                                                 int64_t offset) {
  const DType t = ctx.inputs[0].dtype;
  const size_t es = dtype_size(t);
  if (t == DType::kString || (es != 1 && es != 2 && es != 4 && es != 8)) {
    return unsupported(ctx.where, ": no CUDA copy for ", dtype_name(t));
  }
  StridedParams p{static_cast<int>(es), {}};
  TERN_ASSIGN_OR_RETURN(p.d, make_strided(ctx.outputs[0].shape, strides, offset));
  return make_kernel(
      "cuda_strided_copy", p, [](const StridedParams& q, const KernelArgs& a, const ExecContext&) {
        return launched(
            strided_copy(q.esize, a.inputs[0]->raw(), a.outputs[0]->raw(), q.d, stream()),
            "strided_copy");
      });
}

Expected<std::unique_ptr<Kernel>> make_transpose(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::StridedView v, ops::transpose_view(ctx));
  return strided_kernel(ctx, v.strides, v.offset);
}

Expected<std::unique_ptr<Kernel>> make_slice(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::StridedView v, ops::slice_view(ctx));
  return strided_kernel(ctx, v.strides, v.offset);
}

Expected<std::unique_ptr<Kernel>> make_expand(const OpContext& ctx) {
  const ops::StridedView v = ops::expand_view(ctx.inputs[0].shape, ctx.outputs[0].shape);
  return strided_kernel(ctx, v.strides, v.offset);
}

struct ConcatParams {
  int64_t outer = 0, out_inner = 0;  // rows before the axis; elements per row of the output
  std::vector<int64_t> inner;        // elements per row of each input
  size_t esize = 0;
};

Expected<std::unique_ptr<Kernel>> make_concat(const OpContext& ctx) {
  const Shape& y = ctx.outputs[0].shape;
  TERN_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 0));
  TERN_ASSIGN_OR_RETURN(axis, ops::normalize_axis(axis, static_cast<int64_t>(y.size())));
  if (ctx.outputs[0].dtype == DType::kString) return unsupported(ctx.where, ": strings on CUDA");
  ConcatParams p;
  p.esize = dtype_size(ctx.outputs[0].dtype);
  p.outer = 1;
  for (int64_t d = 0; d < axis; ++d) p.outer *= y[static_cast<size_t>(d)];
  p.out_inner = p.outer ? numel(y) / std::max<int64_t>(p.outer, 1) : 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const int64_t n = numel(ctx.inputs[i].shape);
    p.inner.push_back(p.outer ? n / std::max<int64_t>(p.outer, 1) : 0);
  }
  return make_kernel(
      "cuda_concat", p, [](const ConcatParams& q, const KernelArgs& a, const ExecContext&) {
        auto* dst = static_cast<uint8_t*>(a.outputs[0]->raw());
        size_t col = 0;
        for (size_t i = 0; i < q.inner.size(); ++i) {
          const size_t w = static_cast<size_t>(q.inner[i]) * q.esize;
          if (w && q.outer) {
            TERN_CUDA_CHECK(cudaMemcpy2DAsync(
                dst + col, static_cast<size_t>(q.out_inner) * q.esize, a.inputs[i]->raw(), w, w,
                static_cast<size_t>(q.outer), cudaMemcpyDeviceToDevice, stream()));
          }
          col += w;
        }
        return Status::ok();
      });
}

struct GatherParams {
  int esize;
  bool i64;
  int64_t outer, axis, n, inner;
};

Expected<std::unique_ptr<Kernel>> make_gather(const OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  const DType it = ctx.inputs[1].dtype;
  if (it != DType::kInt64 && it != DType::kInt32) return unsupported(ctx.where, ": index type");
  const size_t es = dtype_size(ctx.inputs[0].dtype);
  if (ctx.inputs[0].dtype == DType::kString || (es != 1 && es != 2 && es != 4 && es != 8)) {
    return unsupported(ctx.where, ": no CUDA Gather for ", dtype_name(ctx.inputs[0].dtype));
  }
  TERN_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 0));
  TERN_ASSIGN_OR_RETURN(axis, ops::normalize_axis(axis, static_cast<int64_t>(x.size())));
  GatherParams p{static_cast<int>(es),         it == DType::kInt64,        1,
                 x[static_cast<size_t>(axis)], numel(ctx.inputs[1].shape), 1};
  for (int64_t d = 0; d < axis; ++d) p.outer *= x[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.size(); ++d) p.inner *= x[d];
  // Out-of-range indices are an error, as on the CPU: a constant index tensor is checked now;
  // indices computed on the device set the thread's device error word, which fails the run when
  // the backend synchronizes.
  if (ctx.inputs[1].value) {
    const Tensor& idx = *ctx.inputs[1].value;
    for (int64_t j = 0; j < idx.numel(); ++j) {
      const int64_t k = idx.int_at(j);
      if (k < -p.axis || k >= p.axis) {
        return invalid_argument(ctx.where, ": index ", k, " is out of range for a dim of ", p.axis);
      }
    }
  }
  return make_kernel(
      "cuda_gather", p, [](const GatherParams& q, const KernelArgs& a, const ExecContext&) {
        TERN_ASSIGN_OR_RETURN(unsigned* error, error_word());
        return launched(gather(q.esize, a.inputs[0]->raw(), a.inputs[1]->raw(), q.i64,
                               a.outputs[0]->raw(), q.outer, q.axis, q.n, q.inner, error, stream()),
                        "gather");
      });
}

struct ResizeParams {
  int esize;
  bool linear;
  int64_t planes, ih, iw, oh, ow;
  std::shared_ptr<void> tables;  // h0, h1, w0, w1 (int64), then hw, ww (float)
};

Expected<std::unique_ptr<Kernel>> make_resize(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::ResizeGeometry g, ops::resize_geometry(ctx));
  const size_t r = g.in.size();
  if (r < 2) return unsupported(ctx.where, ": CUDA Resize needs rank >= 2");
  for (size_t d = 0; d + 2 < r; ++d) {
    if (g.in[d] != g.out[d]) {
      return unsupported(ctx.where, ": CUDA Resize scales the last two dims only");
    }
  }
  const DType t = ctx.inputs[0].dtype;
  if (t == DType::kString || (g.linear && t != DType::kFloat32)) {
    return unsupported(ctx.where, ": CUDA Resize for ", dtype_name(t));
  }
  ResizeParams p{static_cast<int>(dtype_size(t)),
                 g.linear,
                 1,
                 g.in[r - 2],
                 g.in[r - 1],
                 g.out[r - 2],
                 g.out[r - 1],
                 nullptr};
  for (size_t d = 0; d + 2 < r; ++d) p.planes *= g.in[d];
  const ops::ResizeTaps& th = g.axes[r - 2];
  const ops::ResizeTaps& tw = g.axes[r - 1];
  std::vector<uint8_t> host;
  auto put = [&](const void* src, size_t bytes) {
    const auto* b = static_cast<const uint8_t*>(src);
    host.insert(host.end(), b, b + bytes);
  };
  put(th.i0.data(), th.i0.size() * 8);
  put(th.i1.data(), th.i1.size() * 8);
  put(tw.i0.data(), tw.i0.size() * 8);
  put(tw.i1.data(), tw.i1.size() * 8);
  put(th.w1.data(), th.w1.size() * 4);
  put(tw.w1.data(), tw.w1.size() * 4);
  TERN_ASSIGN_OR_RETURN(p.tables, upload(host.data(), host.size()));
  return make_kernel(
      "cuda_resize", p, [](const ResizeParams& q, const KernelArgs& a, const ExecContext&) {
        const auto* base = static_cast<const uint8_t*>(q.tables.get());
        const auto* h0 = reinterpret_cast<const int64_t*>(base);
        const int64_t* h1 = h0 + q.oh;
        const int64_t* w0 = h1 + q.oh;
        const int64_t* w1 = w0 + q.ow;
        const auto* hw = reinterpret_cast<const float*>(w1 + q.ow);
        const float* ww = hw + q.oh;
        return launched(
            resize2d(q.esize, q.linear, a.inputs[0]->raw(), a.outputs[0]->raw(), q.planes, q.ih,
                     q.iw, q.oh, q.ow, h0, h1, hw, w0, w1, ww, stream()),
            "resize2d");
      });
}

}  // namespace

}  // namespace tern::cuda

namespace tern {

void register_cuda_data(KernelRegistry& r) {
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}) {
    r.add(op, "cuda", DType::kUndefined, cuda::make_copy);
  }
  r.add("Transpose", "cuda", DType::kUndefined, cuda::make_transpose);
  r.add("Slice", "cuda", DType::kUndefined, cuda::make_slice);
  r.add("Expand", "cuda", DType::kUndefined, cuda::make_expand);
  r.add("Concat", "cuda", DType::kUndefined, cuda::make_concat);
  r.add("Gather", "cuda", DType::kUndefined, cuda::make_gather);
  r.add("Resize", "cuda", DType::kUndefined, cuda::make_resize);
}

}  // namespace tern
