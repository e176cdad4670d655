// Shape: the input's dims as int64 (opset 15 start/end slice them). Known before every run, so
// the session computes it while planning and no kernel runs at run time.
#include <algorithm>

#include "ops/common/op_utils.h"

namespace tern {
namespace {

Expected<std::vector<int64_t>> shape_slice(const OpContext& ctx) {
  const Shape& s = ctx.inputs[0].shape;
  int64_t r = static_cast<int64_t>(s.size());
  TERN_ASSIGN_OR_RETURN(int64_t start, ctx.attrs().get_int("start", 0));
  TERN_ASSIGN_OR_RETURN(int64_t end, ctx.attrs().get_int("end", r));
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  return std::vector<int64_t>(s.begin() + start, s.begin() + std::max(start, end));
}

Status infer_shape(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(auto dims, shape_slice(ctx));
  ctx.set_output(0, DType::kInt64, {static_cast<int64_t>(dims.size())});
  ctx.output_values[0] = ops::make_int64_tensor(dims, {static_cast<int64_t>(dims.size())});
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_shape(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(auto dims, shape_slice(ctx));
  return make_kernel("reference", dims,
                     [](const std::vector<int64_t>& d, const KernelArgs& a, const ExecContext&) {
                       std::copy(d.begin(), d.end(), a.outputs[0]->data<int64_t>());
                       return Status::ok();
                     });
}

}  // namespace

TERN_REGISTRATION void register_op_shape(OpRegistry& r) {
  r.add({"Shape", 1, 1, 1, 1, infer_shape, make_shape, {}, attrs("end, start")});
}

}  // namespace tern
