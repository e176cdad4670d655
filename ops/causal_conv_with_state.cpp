// CausalConvWithState: attributes, shape inference and the reference kernel (each output element
// a sum over the prefixed row in double; float16/bfloat16 results rounded to their type before the
// activation, as the spec's reference does). The CPU backend's kernel is in
// backends/cpu/kernels/causal_conv_with_state.cpp.
#include "ops/causal_conv_with_state.h"

#include <cmath>
#include <string>
#include <vector>

#include "ops/common/op_utils.h"

namespace tern::ops {

Expected<CausalConvParams> parse_causal_conv(const OpContext& ctx) {
  CausalConvParams p;
  TERN_ASSIGN_OR_RETURN(std::string act, ctx.attrs().get_string("activation", "none"));
  if (act != "none" && act != "silu" && act != "swish") {
    return invalid_model(ctx.where, ": activation '", act, "' is not none, silu or swish");
  }
  p.silu = act != "none";
  p.dtype = ctx.inputs[0].dtype;
  if (p.dtype != DType::kFloat32 && p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16) {
    return dtype_error(ctx, 0, "float32, float16, bfloat16");
  }
  p.has_bias = ctx.has_input(2);
  p.has_past = ctx.has_input(3);
  for (size_t i = 1; i < 4; ++i) {
    if (ctx.has_input(i)) TERN_RETURN_IF_ERROR(require_same_dtype(ctx, 0, i));
  }
  const Shape& x = ctx.inputs[0].shape;
  const Shape& w = ctx.inputs[1].shape;
  if (x.size() != 3 || w.size() != 3) {
    return invalid_argument(ctx.where, ": input must be (B, C, L) and weight (C, 1, k); got ",
                            shape_str(x), ", ", shape_str(w));
  }
  p.batch = x[0], p.channels = x[1], p.length = x[2], p.taps = w[2];
  if (w[0] != p.channels || w[1] != 1 || p.taps < 1) {
    return invalid_argument(ctx.where, ": weight ", shape_str(w), " is not (", p.channels,
                            ", 1, k) with k >= 1");
  }
  if (p.has_bias && ctx.inputs[2].shape != Shape{p.channels}) {
    return invalid_argument(ctx.where, ": bias ", shape_str(ctx.inputs[2].shape), " is not (",
                            p.channels, ")");
  }
  if (p.has_past && ctx.inputs[3].shape != Shape{p.batch, p.channels, p.carry()}) {
    return invalid_argument(ctx.where, ": past_state ", shape_str(ctx.inputs[3].shape), " is not (",
                            p.batch, ", ", p.channels, ", ", p.carry(), ")");
  }
  return p;
}

namespace {

Status infer_causal_conv(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(CausalConvParams p, parse_causal_conv(ctx));
  ctx.set_output(0, p.dtype, {p.batch, p.channels, p.length});
  if (ctx.outputs.size() > 1 && ctx.outputs[1].present) {
    ctx.set_output(1, p.dtype, {p.batch, p.channels, p.carry()});
  }
  return Status::ok();
}

Status run_reference(const CausalConvParams& p, const KernelArgs& a, const ExecContext&) {
  const std::vector<float> x = to_float32(*a.inputs[0]);
  const std::vector<float> w = to_float32(*a.inputs[1]);
  const std::vector<float> bias = p.has_bias ? to_float32(*a.inputs[2]) : std::vector<float>();
  const std::vector<float> past = p.has_past ? to_float32(*a.inputs[3]) : std::vector<float>();
  Tensor* present = a.outputs.size() > 1 ? a.outputs[1] : nullptr;
  const int64_t K = p.taps, L = p.length, carry = p.carry();
  std::vector<float> y(static_cast<size_t>(p.batch * p.channels * L));
  std::vector<float> state(static_cast<size_t>(p.batch * p.channels * carry));
  std::vector<float> row(static_cast<size_t>(carry + L));  // past (or zeros), then the input
  for (int64_t bc = 0; bc < p.batch * p.channels; ++bc) {
    const int64_t c = bc % p.channels;
    for (int64_t i = 0; i < carry; ++i) row[i] = p.has_past ? past[bc * carry + i] : 0.0f;
    for (int64_t t = 0; t < L; ++t) row[carry + t] = x[bc * L + t];
    for (int64_t t = 0; t < L; ++t) {
      double acc = p.has_bias ? bias[c] : 0.0;
      for (int64_t j = 0; j < K; ++j) acc += static_cast<double>(w[c * K + j]) * row[t + j];
      // The convolution's result in the tensors' type, then the activation.
      double v = round_to(p.dtype, static_cast<float>(acc));
      if (p.silu) v = v / (1.0 + std::exp(-v));
      y[bc * L + t] = static_cast<float>(v);
    }
    for (int64_t i = 0; i < carry; ++i) state[bc * carry + i] = row[L + i];
  }
  from_float32(y, *a.outputs[0]);
  if (present) from_float32(state, *present);
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_causal_conv(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(require_plain_layout(ctx));
  TERN_ASSIGN_OR_RETURN(CausalConvParams p, parse_causal_conv(ctx));
  return make_kernel("reference", p, run_reference);
}

}  // namespace
}  // namespace tern::ops

namespace tern {

TERN_REGISTRATION void register_op_causal_conv_with_state(OpRegistry& r) {
  r.add({"CausalConvWithState",
         2,
         4,
         1,
         2,
         ops::infer_causal_conv,
         ops::make_causal_conv,
         {},
         attrs("activation")});
}

}  // namespace tern
