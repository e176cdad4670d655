// Cast between numeric, bool, float16 and bfloat16 types. Float to integer truncates toward zero
// and saturates at the target's limits (NaN gives 0), so no input is undefined behaviour.
#include <cmath>
#include <limits>

#include "core/half.h"
#include "core/parallel.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

struct CastParams {
  DType from, to;
};

bool castable(DType t) {
  return ops::visit_numeric(t, [](auto) {}) || t == DType::kBool || t == DType::kFloat16 ||
         t == DType::kBFloat16;
}

Status infer_cast(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(int64_t to, ctx.attrs().get_int("to", 0));
  if (!dtype_is_valid(static_cast<int32_t>(to))) {
    return invalid_model("attribute 'to' is not a valid dtype (", to, ")");
  }
  ctx.set_output(0, static_cast<DType>(to), ctx.inputs[0].shape);
  return Status::ok();
}

template <class T>
T from_double(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (std::isnan(v)) return T{0};
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest()))
      return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max()))
      return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

void store(Tensor& out, int64_t i, const Tensor& in, bool integral_src) {
  const DType to = out.dtype();
  if (to == DType::kBool) {
    out.data<uint8_t>()[i] = integral_src ? in.int_at(i) != 0 : in.float_at(i) != 0.0;
    return;
  }
  if (to == DType::kFloat16) {
    out.data<uint16_t>()[i] = float_to_half(static_cast<float>(in.float_at(i)));
    return;
  }
  if (to == DType::kBFloat16) {
    out.data<uint16_t>()[i] = float_to_bfloat16(static_cast<float>(in.float_at(i)));
    return;
  }
  ops::visit_numeric(to, [&](auto tag) {
    using T = decltype(tag);
    if (integral_src && std::is_integral_v<T>) {
      out.data<T>()[i] = static_cast<T>(in.int_at(i));  // modular, as C and ONNX do
    } else {
      out.data<T>()[i] = from_double<T>(in.float_at(i));
    }
  });
}

Status run_cast(const CastParams& p, const KernelArgs& a, const ExecContext& exec) {
  const Tensor& in = *a.inputs[0];
  Tensor& out = *a.outputs[0];
  const bool integral_src = !dtype_is_float(p.from);
  parallel_for(in.numel(), 16384, exec.num_threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) store(out, i, in, integral_src);
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_cast(const OpContext& ctx) {
  CastParams p{ctx.inputs[0].dtype, ctx.outputs[0].dtype};
  if (!castable(p.from)) return ops::dtype_error(ctx, 0, "numeric, bool, float16, bfloat16");
  if (!castable(p.to)) return unsupported("cast to ", dtype_name(p.to), " is not supported");
  return make_kernel("reference", p, run_cast);
}

}  // namespace

void register_op_cast(OpRegistry& r) {
  r.add({"Cast", 1, 1, 1, 1, infer_cast, make_cast, {}});
}

}  // namespace tern
