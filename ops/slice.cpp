// Slice: starts/ends/axes/steps as attributes (opset < 10) or known inputs (opset >= 10), with
// ONNX's clamping rules; any non-string dtype.
#include <algorithm>
#include <cstring>

#include "ops/slice.h"

#include "ops/common/op_utils.h"

namespace tern {
namespace ops {

Expected<SliceParams> parse_slice(const OpContext& ctx) {
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.num_inputs() == 1) {
    TERN_ASSIGN_OR_RETURN(starts, ctx.attrs().get_ints("starts"));
    TERN_ASSIGN_OR_RETURN(ends, ctx.attrs().get_ints("ends"));
    TERN_ASSIGN_OR_RETURN(axes, ctx.attrs().get_ints("axes"));
  } else {
    if (!ctx.has_input(2)) return invalid_model("input 'ends' is required");
    starts = ops::read_ints(*ctx.inputs[1].value);
    ends = ops::read_ints(*ctx.inputs[2].value);
    if (ctx.has_input(3)) axes = ops::read_ints(*ctx.inputs[3].value);
    if (ctx.has_input(4)) steps = ops::read_ints(*ctx.inputs[4].value);
  }
  const Shape& in = ctx.inputs[0].shape;
  const int64_t r = static_cast<int64_t>(in.size());
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (starts.size() != ends.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    return invalid_model("starts, ends, axes and steps must have the same length");
  }
  SliceParams p;
  p.in_shape = in;
  p.out_shape = in;
  p.start.assign(in.size(), 0);
  p.step.assign(in.size(), 1);
  p.esize = dtype_size(ctx.inputs[0].dtype);
  std::vector<bool> seen(in.size(), false);
  for (size_t k = 0; k < axes.size(); ++k) {
    TERN_ASSIGN_OR_RETURN(int64_t ax, ops::normalize_axis(axes[k], r));
    size_t a = static_cast<size_t>(ax);
    if (seen[a]) return invalid_model("axis ", axes[k], " is repeated");
    seen[a] = true;
    int64_t dim = in[a], st = steps[k], s = starts[k], e = ends[k];
    if (st == 0) return invalid_model("step 0 on axis ", ax);
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    int64_t len;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      len = e > s ? (e - s + st - 1) / st : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      len = s > e ? (s - e + (-st) - 1) / (-st) : 0;
    }
    p.start[a] = s;
    p.step[a] = st;
    p.out_shape[a] = dim == 0 ? 0 : len;
  }
  return p;
}

}  // namespace ops

namespace {

using ops::parse_slice;
using ops::SliceParams;

Status infer_slice(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(SliceParams p, parse_slice(ctx));
  ctx.set_output(0, ctx.inputs[0].dtype, p.out_shape);
  return Status::ok();
}

Status run_slice(const SliceParams& p, const KernelArgs& a, const ExecContext&) {
  const size_t r = p.in_shape.size();
  const int64_t total = numel(p.out_shape);
  if (total == 0) return Status::ok();
  if (r == 0) {
    std::memcpy(a.outputs[0]->raw(), a.inputs[0]->raw(), p.esize);
    return Status::ok();
  }
  std::vector<int64_t> in_stride(r, 1);
  for (size_t d = r - 1; d-- > 0;) in_stride[d] = in_stride[d + 1] * p.in_shape[d + 1];
  const auto* src = static_cast<const uint8_t*>(a.inputs[0]->raw());
  auto* dst = static_cast<uint8_t*>(a.outputs[0]->raw());
  const int64_t inner = p.out_shape[r - 1];
  const int64_t rows = total / inner;
  std::vector<int64_t> idx(r, 0);
  for (int64_t row = 0; row < rows; ++row) {
    int64_t off = 0;
    for (size_t d = 0; d + 1 < r; ++d) off += (p.start[d] + idx[d] * p.step[d]) * in_stride[d];
    off += p.start[r - 1];
    if (p.step[r - 1] == 1) {
      std::memcpy(dst, src + off * static_cast<int64_t>(p.esize),
                  static_cast<size_t>(inner) * p.esize);
      dst += static_cast<size_t>(inner) * p.esize;
    } else {
      for (int64_t i = 0; i < inner; ++i, dst += p.esize) {
        std::memcpy(dst, src + (off + i * p.step[r - 1]) * static_cast<int64_t>(p.esize), p.esize);
      }
    }
    for (size_t d = r - 1; d-- > 0;) {  // advance the row index
      if (++idx[d] < p.out_shape[d]) break;
      idx[d] = 0;
    }
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_slice(const OpContext& ctx) {
  if (ctx.inputs[0].dtype == DType::kString) return ops::dtype_error(ctx, 0, "non-string types");
  TERN_ASSIGN_OR_RETURN(SliceParams p, parse_slice(ctx));
  return make_kernel("reference", std::move(p), run_slice);
}

}  // namespace

TERN_REGISTRATION void register_op_slice(OpRegistry& r) {
  r.add({"Slice", 1, 5, 1, 1, infer_slice, make_slice, {1, 2, 3, 4}, attrs("axes, ends, starts")});
}

}  // namespace tern
