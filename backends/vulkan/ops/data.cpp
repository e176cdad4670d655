// Data movement on Vulkan: the shape-only ops (Reshape, Flatten, Squeeze, Unsqueeze, Identity) as
// buffer copies the planner may turn into nothing (in place), Transpose, Slice, Expand and Concat
// as strided-copy dispatches, Gather and Resize.
#include "backends/vulkan/ops/vulkan_ops.h"
#include "core/kernel_registry.h"
#include "ops/common/device_ops.h"
#include "ops/resize.h"

namespace tern::vk {

namespace {

struct Empty {};

Expected<std::unique_ptr<Kernel>> make_copy(const OpContext& ctx) {
  if (ctx.inputs[0].dtype == DType::kString) return unsupported(ctx.where, ": strings on Vulkan");
  TERN_RETURN_IF_ERROR(context().status());
  return make_elementwise_kernel(
      "vulkan_copy", Empty{}, [](const Empty&, const KernelArgs& a, const ExecContext&) {
        TERN_ASSIGN_OR_RETURN(Context * c, context());
        return c->copy(a.inputs[0]->raw(), a.outputs[0]->raw(), a.outputs[0]->byte_size());
      });
}

struct CopyPush {
  uint32_t n, rank, es, oi, oo;
  uint32_t shape[kMaxRank], si[kMaxRank], so[kMaxRank];
};

// One strided copy: `shape` elements from the input (strides `si` from element `oi`) to the
// output (strides `so` from element `oo`); strides may be negative (two's complement).
struct CopyStep {
  Shape shape, si, so;
  int64_t oi = 0, oo = 0;
  int input = 0;
};

struct StridedParams {
  const Pipeline* pipe;
  size_t unit;  // bytes per shader word (2 or 4)
  uint32_t es;  // words per element
  std::vector<CopyPush> steps;
  std::vector<int> inputs;
};

Expected<std::unique_ptr<Kernel>> strided_kernel(const OpContext& ctx,
                                                 const std::vector<CopyStep>& steps) {
  const DType t = ctx.outputs[0].dtype;
  const size_t es = dtype_size(t);
  StridedParams p{};
  if (t == DType::kString || (es != 2 && es != 4 && es != 8)) {
    return unsupported(ctx.where, ": no Vulkan copy for ", dtype_name(t));
  }
  if (es == 2) {
    TERN_ASSIGN_OR_RETURN(Context * c, context());
    if (!c->info().fp16_storage)
      return unsupported(ctx.where, ": no 16-bit storage on this device");
  }
  TERN_ASSIGN_OR_RETURN(p.pipe, pipeline(es == 2 ? "copy_u16" : "copy_u32"));
  p.unit = es == 2 ? 2 : 4;
  p.es = static_cast<uint32_t>(es == 8 ? 2 : 1);
  for (const CopyStep& s : steps) {
    if (s.shape.size() > kMaxRank) return unsupported(ctx.where, ": rank ", s.shape.size());
    TERN_RETURN_IF_ERROR(check_count(ctx, numel(s.shape) * p.es));
    CopyPush push{};
    push.n = u32(numel(s.shape));
    push.rank = u32(static_cast<int64_t>(s.shape.size()));
    push.es = p.es;
    push.oi = u32(s.oi * p.es);
    push.oo = u32(s.oo * p.es);
    for (size_t d = 0; d < s.shape.size(); ++d) {
      push.shape[d] = u32(s.shape[d]);
      push.si[d] = u32(s.si[d]);
      push.so[d] = u32(s.so[d]);
    }
    p.steps.push_back(push);
    p.inputs.push_back(s.input);
  }
  return make_kernel(
      "vulkan_strided_copy", p,
      [](const StridedParams& q, const KernelArgs& a, const ExecContext&) {
        for (size_t i = 0; i < q.steps.size(); ++i) {
          const Tensor* x = a.inputs[static_cast<size_t>(q.inputs[i])];
          CopyPush push = q.steps[i];
          push.oi += off(x, q.unit);
          push.oo += off(a.outputs[0], q.unit);
          if (!push.n) continue;
          TERN_RETURN_IF_ERROR(run_1d(q.pipe, {x->raw(), a.outputs[0]->raw()}, push, push.n));
        }
        return Status::ok();
      });
}

// A copy of the whole output with input strides `si` from element `oi`.
Expected<std::unique_ptr<Kernel>> gather_copy(const OpContext& ctx, Shape si, int64_t oi) {
  const Shape& y = ctx.outputs[0].shape;
  CopyStep s{y, std::move(si), ops::contiguous_strides(y), oi, 0, 0};
  return strided_kernel(ctx, {s});
}

Expected<std::unique_ptr<Kernel>> make_transpose(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::StridedView v, ops::transpose_view(ctx));
  return gather_copy(ctx, v.strides, v.offset);
}

Expected<std::unique_ptr<Kernel>> make_slice(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::StridedView v, ops::slice_view(ctx));
  return gather_copy(ctx, v.strides, v.offset);
}

Expected<std::unique_ptr<Kernel>> make_expand(const OpContext& ctx) {
  const ops::StridedView v = ops::expand_view(ctx.inputs[0].shape, ctx.outputs[0].shape);
  return gather_copy(ctx, v.strides, v.offset);
}

// Each input is a [outer, width] block written at its column of the [outer, total] output.
Expected<std::unique_ptr<Kernel>> make_concat(const OpContext& ctx) {
  const Shape& y = ctx.outputs[0].shape;
  TERN_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 0));
  TERN_ASSIGN_OR_RETURN(axis, ops::normalize_axis(axis, static_cast<int64_t>(y.size())));
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= y[static_cast<size_t>(d)];
  const int64_t total = outer ? numel(y) / std::max<int64_t>(outer, 1) : 0;
  std::vector<CopyStep> steps;
  int64_t col = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const int64_t w = outer ? numel(ctx.inputs[i].shape) / std::max<int64_t>(outer, 1) : 0;
    steps.push_back({{outer, w}, {w, 1}, {total, 1}, 0, col, static_cast<int>(i)});
    col += w;
  }
  return strided_kernel(ctx, steps);
}

struct GatherPush {
  uint32_t n, inner, count, axis, es, idx64, ox, oi, oy, oe;
};

struct GatherParams {
  const Pipeline* pipe;
  size_t unit;
  GatherPush push;
};

Expected<std::unique_ptr<Kernel>> make_gather(const OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  const DType it = ctx.inputs[1].dtype;
  if (it != DType::kInt64 && it != DType::kInt32) return unsupported(ctx.where, ": index type");
  const size_t es = dtype_size(ctx.inputs[0].dtype);
  if (ctx.inputs[0].dtype == DType::kString || (es != 4 && es != 8)) {
    return unsupported(ctx.where, ": no Vulkan Gather for ", dtype_name(ctx.inputs[0].dtype));
  }
  TERN_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 0));
  TERN_ASSIGN_OR_RETURN(axis, ops::normalize_axis(axis, static_cast<int64_t>(x.size())));
  GatherParams p{};
  TERN_ASSIGN_OR_RETURN(p.pipe, pipeline("gather"));
  const int64_t dim = x[static_cast<size_t>(axis)];
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.size(); ++d) inner *= x[d];
  // Out-of-range indices are an error, as on the CPU: a constant index tensor is checked now;
  // indices computed on the device set the device error word, which fails the run.
  if (ctx.inputs[1].value) {
    const Tensor& idx = *ctx.inputs[1].value;
    for (int64_t j = 0; j < idx.numel(); ++j) {
      const int64_t k = idx.int_at(j);
      if (k < -dim || k >= dim) {
        return invalid_argument(ctx.where, ": index ", k, " is out of range for a dim of ", dim);
      }
    }
  }
  const uint32_t words = es == 8 ? 2 : 1;
  const int64_t n = numel(ctx.outputs[0].shape) * words;
  TERN_RETURN_IF_ERROR(check_count(ctx, n));
  TERN_RETURN_IF_ERROR(check_count(ctx, numel(x) * words));
  p.unit = 4;
  p.push = {u32(n),   u32(inner), u32(numel(ctx.inputs[1].shape)),
            u32(dim), words,      it == DType::kInt64 ? 1u : 0u,
            0,        0,          0,
            0};
  return make_kernel(
      "vulkan_gather", p, [](const GatherParams& q, const KernelArgs& a, const ExecContext&) {
        GatherPush push = q.push;
        push.ox = off(a.inputs[0], 4);
        push.oi = off(a.inputs[1], 4);
        push.oy = off(a.outputs[0], 4);
        TERN_ASSIGN_OR_RETURN(Context * c, context());
        TERN_ASSIGN_OR_RETURN(void* err, c->error_word());
        push.oe = offset_of(err, 4);
        return run_1d(q.pipe, {a.inputs[0]->raw(), a.inputs[1]->raw(), a.outputs[0]->raw(), err},
                      push, push.n);
      });
}

struct ResizePush {
  uint32_t planes, H, W, OH, OW, ox, ot, oy, tw;
};

struct ResizeParams {
  const Pipeline* pipe;
  ResizePush push;
  std::shared_ptr<void> taps;  // device buffer: (i0, i1, weight) per output row, then column
};

Expected<std::unique_ptr<Kernel>> make_resize(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::ResizeGeometry g, ops::resize_geometry(ctx));
  const size_t r = g.in.size();
  if (r < 2 || ctx.inputs[0].dtype != DType::kFloat32) {
    return unsupported(ctx.where, ": Vulkan Resize takes float32 of rank >= 2");
  }
  for (size_t d = 0; d + 2 < r; ++d) {
    if (g.in[d] != g.out[d]) {
      return unsupported(ctx.where, ": Vulkan Resize scales the last two dims only");
    }
  }
  ResizeParams p{};
  TERN_ASSIGN_OR_RETURN(p.pipe, pipeline("resize_f32"));
  int64_t planes = 1;
  for (size_t d = 0; d + 2 < r; ++d) planes *= g.in[d];
  TERN_RETURN_IF_ERROR(check_count(ctx, numel(g.out)));
  TERN_RETURN_IF_ERROR(check_count(ctx, numel(g.in)));
  std::vector<uint32_t> taps;
  for (size_t axis : {r - 2, r - 1}) {
    const ops::ResizeTaps& t = g.axes[axis];
    for (size_t o = 0; o < t.i0.size(); ++o) {
      uint32_t w;
      std::memcpy(&w, &t.w1[o], 4);
      taps.insert(taps.end(), {u32(t.i0[o]), u32(t.i1[o]), w});
    }
  }
  TERN_ASSIGN_OR_RETURN(Context * c, context());
  TERN_ASSIGN_OR_RETURN(p.taps, c->allocate(taps.size() * 4));
  TERN_RETURN_IF_ERROR(c->upload(taps.data(), p.taps.get(), taps.size() * 4));
  TERN_RETURN_IF_ERROR(c->flush());
  p.push = {u32(planes),
            u32(g.in[r - 2]),
            u32(g.in[r - 1]),
            u32(g.out[r - 2]),
            u32(g.out[r - 1]),
            0,
            offset_of(p.taps.get(), 4),
            0,
            u32(3 * g.out[r - 2])};
  return make_kernel(
      "vulkan_resize", p, [](const ResizeParams& q, const KernelArgs& a, const ExecContext&) {
        ResizePush push = q.push;
        push.ox = off(a.inputs[0]);
        push.oy = off(a.outputs[0]);
        return run_1d(q.pipe, {a.inputs[0]->raw(), q.taps.get(), a.outputs[0]->raw()}, push,
                      numel(a.outputs[0]->shape()));
      });
}

}  // namespace

}  // namespace tern::vk

namespace tern {

void register_vulkan_data(KernelRegistry& r) {
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}) {
    r.add(op, "vulkan", DType::kUndefined, vk::make_copy);
  }
  r.add("Transpose", "vulkan", DType::kUndefined, vk::make_transpose);
  r.add("Slice", "vulkan", DType::kUndefined, vk::make_slice);
  r.add("Expand", "vulkan", DType::kUndefined, vk::make_expand);
  r.add("Concat", "vulkan", DType::kUndefined, vk::make_concat);
  r.add("Gather", "vulkan", DType::kUndefined, vk::make_gather);
  r.add("Resize", "vulkan", DType::kUndefined, vk::make_resize);
}

}  // namespace tern
