// LinearAttention: attributes, shape inference and the reference kernel (the recurrence written
// out token by token as the ONNX spec states it, the state and every sum in double). The CPU
// backend's kernel (backends/cpu/kernels/linear_attention.cpp) runs the same recurrence in
// float32 over rows of the state, batch x KV heads in parallel.
#include "ops/linear_attention.h"

#include <cmath>
#include <string>
#include <vector>

#include "ops/common/op_utils.h"

namespace tern::ops {

namespace {

bool is_attention_float(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16;
}

}  // namespace

Expected<LinearAttentionParams> parse_linear_attention(const OpContext& ctx) {
  LinearAttentionParams p;
  const Attributes& at = ctx.attrs();
  TERN_ASSIGN_OR_RETURN(std::string rule, at.get_string("update_rule", "gated_delta"));
  if (rule == "linear") {
    p.rule = LinearAttentionParams::Rule::kLinear;
  } else if (rule == "gated") {
    p.rule = LinearAttentionParams::Rule::kGated;
  } else if (rule == "delta") {
    p.rule = LinearAttentionParams::Rule::kDelta;
  } else if (rule == "gated_delta") {
    p.rule = LinearAttentionParams::Rule::kGatedDelta;
  } else {
    return invalid_model(ctx.where, ": update_rule '", rule,
                         "' is not linear, gated, delta or gated_delta");
  }
  TERN_ASSIGN_OR_RETURN(p.q_heads, at.get_int("q_num_heads", 0));
  TERN_ASSIGN_OR_RETURN(p.kv_heads, at.get_int("kv_num_heads", 0));
  if (p.q_heads <= 0 || p.kv_heads <= 0 || p.q_heads % p.kv_heads != 0) {
    return invalid_model(ctx.where, ": q_num_heads (", p.q_heads,
                         ") must be a positive multiple of kv_num_heads (", p.kv_heads, ")");
  }
  p.dtype = ctx.inputs[0].dtype;
  if (!is_attention_float(p.dtype)) return dtype_error(ctx, 0, "float32, float16, bfloat16");
  for (size_t i : {1, 2, 4, 5}) {
    if (ctx.has_input(i)) TERN_RETURN_IF_ERROR(require_same_dtype(ctx, 0, i));
  }
  const Shape& q = ctx.inputs[0].shape;
  const Shape& k = ctx.inputs[1].shape;
  const Shape& v = ctx.inputs[2].shape;
  if (q.size() != 3 || k.size() != 3 || v.size() != 3) {
    return invalid_argument(ctx.where, ": query, key and value must be (B, T, heads * dim); got ",
                            shape_str(q), ", ", shape_str(k), ", ", shape_str(v));
  }
  p.batch = q[0];
  p.seq = q[1];
  if (k[0] != p.batch || v[0] != p.batch || k[1] != p.seq || v[1] != p.seq) {
    return invalid_argument(ctx.where, ": batch or sequence lengths differ: query ", shape_str(q),
                            ", key ", shape_str(k), ", value ", shape_str(v));
  }
  if (q[2] % p.q_heads != 0 || v[2] % p.kv_heads != 0) {
    return invalid_argument(ctx.where, ": query's last dim ", q[2], " and value's ", v[2],
                            " must be multiples of q_num_heads ", p.q_heads, " and kv_num_heads ",
                            p.kv_heads);
  }
  p.dk = q[2] / p.q_heads;
  p.dv = v[2] / p.kv_heads;
  if (p.dk == 0 || p.dv == 0) {
    return invalid_argument(ctx.where, ": the query and value head sizes must be positive, got ",
                            p.dk, " and ", p.dv);
  }
  if (k[2] != p.kv_heads * p.dk) {
    return invalid_argument(ctx.where, ": key's last dim ", k[2], " is not kv_num_heads (",
                            p.kv_heads, ") x query's head size (", p.dk, ")");
  }
  p.has_past = ctx.has_input(3);
  p.state_dtype = p.dtype;
  if (p.has_past) {
    const TensorInfo& s = ctx.inputs[3];
    if (!is_attention_float(s.dtype)) return dtype_error(ctx, 3, "float32, float16, bfloat16");
    p.state_dtype = s.dtype;
    if (s.shape != Shape{p.batch, p.kv_heads, p.dk, p.dv}) {
      return invalid_argument(ctx.where, ": past_state ", shape_str(s.shape), " is not (", p.batch,
                              ", ", p.kv_heads, ", ", p.dk, ", ", p.dv, ")");
    }
  }
  const bool has_decay = ctx.has_input(4), has_beta = ctx.has_input(5);
  if (has_decay != p.gated()) {
    return invalid_model(ctx.where, ": update_rule '", rule, "' ", p.gated() ? "needs" : "takes no",
                         " decay input");
  }
  if (has_beta != p.delta()) {
    return invalid_model(ctx.where, ": update_rule '", rule, "' ", p.delta() ? "needs" : "takes no",
                         " beta input");
  }
  if (has_decay) {
    const Shape& g = ctx.inputs[4].shape;
    if (g.size() != 3 || g[0] != p.batch || g[1] != p.seq ||
        (g[2] != p.kv_heads && g[2] != p.kv_heads * p.dk)) {
      return invalid_argument(ctx.where, ": decay ", shape_str(g), " is not (", p.batch, ", ",
                              p.seq, ", ", p.kv_heads, ") or (", p.batch, ", ", p.seq, ", ",
                              p.kv_heads * p.dk, ")");
    }
    // With d_k 1 the two forms are the same.
    p.decay_per_key = g[2] == p.kv_heads * p.dk && p.dk != 1;
  }
  if (has_beta) {
    const Shape& b = ctx.inputs[5].shape;
    if (b.size() != 3 || b[0] != p.batch || b[1] != p.seq || (b[2] != p.kv_heads && b[2] != 1)) {
      return invalid_argument(ctx.where, ": beta ", shape_str(b), " is not (", p.batch, ", ", p.seq,
                              ", ", p.kv_heads, ") or (", p.batch, ", ", p.seq, ", 1)");
    }
    p.beta_heads = b[2];
  }
  TERN_ASSIGN_OR_RETURN(p.scale, at.get_float("scale", 0.0f));
  if (p.scale == 0.0f) p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.dk)));
  return p;
}

namespace {

Status infer_linear_attention(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(LinearAttentionParams p, parse_linear_attention(ctx));
  ctx.set_output(0, p.dtype, {p.batch, p.seq, p.q_heads * p.dv});
  if (ctx.outputs.size() > 1 && ctx.outputs[1].present) {
    ctx.set_output(1, p.state_dtype, {p.batch, p.kv_heads, p.dk, p.dv});
  }
  return Status::ok();
}

// The recurrence for one (batch, KV head) at a time, in double, exactly as the spec writes it.
Status run_reference(const LinearAttentionParams& p, const KernelArgs& a, const ExecContext&) {
  const std::vector<float> q = to_float32(*a.inputs[0]);
  const std::vector<float> k = to_float32(*a.inputs[1]);
  const std::vector<float> v = to_float32(*a.inputs[2]);
  const std::vector<float> past = p.has_past ? to_float32(*a.inputs[3]) : std::vector<float>();
  const std::vector<float> g = p.gated() ? to_float32(*a.inputs[4]) : std::vector<float>();
  const std::vector<float> beta = p.delta() ? to_float32(*a.inputs[5]) : std::vector<float>();
  Tensor* present = a.outputs.size() > 1 ? a.outputs[1] : nullptr;
  std::vector<float> out(static_cast<size_t>(p.batch * p.seq * p.q_heads * p.dv));
  std::vector<float> state_out(static_cast<size_t>(p.batch * p.kv_heads * p.dk * p.dv));
  const int64_t dk = p.dk, dv = p.dv, sz = dk * dv;
  std::vector<double> S(static_cast<size_t>(sz)), vt(static_cast<size_t>(dv));
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.kv_heads; ++h) {
      const int64_t s0 = (b * p.kv_heads + h) * sz;
      for (int64_t i = 0; i < sz; ++i) S[i] = p.has_past ? past[s0 + i] : 0.0;
      for (int64_t t = 0; t < p.seq; ++t) {
        const int64_t bt = b * p.seq + t;
        const float* kt = &k[(bt * p.kv_heads + h) * dk];
        const float* vin = &v[(bt * p.kv_heads + h) * dv];
        if (p.gated()) {
          for (int64_t d = 0; d < dk; ++d) {
            const double e = std::exp(static_cast<double>(
                p.decay_per_key ? g[(bt * p.kv_heads + h) * dk + d] : g[bt * p.kv_heads + h]));
            for (int64_t m = 0; m < dv; ++m) S[d * dv + m] *= e;
          }
        }
        for (int64_t m = 0; m < dv; ++m) vt[m] = vin[m];
        if (p.delta()) {
          const double bb = beta[bt * p.beta_heads + (p.beta_heads == 1 ? 0 : h)];
          for (int64_t m = 0; m < dv; ++m) {
            double retrieved = 0;
            for (int64_t d = 0; d < dk; ++d) retrieved += S[d * dv + m] * kt[d];
            vt[m] = bb * (vt[m] - retrieved);
          }
        }
        for (int64_t d = 0; d < dk; ++d) {
          for (int64_t m = 0; m < dv; ++m) S[d * dv + m] += kt[d] * vt[m];
        }
        for (int64_t j = 0; j < p.group(); ++j) {
          const int64_t hq = h * p.group() + j;
          const float* qt = &q[(bt * p.q_heads + hq) * dk];
          for (int64_t m = 0; m < dv; ++m) {
            double acc = 0;
            for (int64_t d = 0; d < dk; ++d) acc += qt[d] * S[d * dv + m];
            out[(bt * p.q_heads + hq) * dv + m] = static_cast<float>(p.scale * acc);
          }
        }
      }
      for (int64_t i = 0; i < sz; ++i) state_out[s0 + i] = static_cast<float>(S[i]);
    }
  }
  from_float32(out, *a.outputs[0]);
  if (present) from_float32(state_out, *present);
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_linear_attention(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(require_plain_layout(ctx));
  TERN_ASSIGN_OR_RETURN(LinearAttentionParams p, parse_linear_attention(ctx));
  return make_kernel("reference", p, run_reference);
}

}  // namespace
}  // namespace tern::ops

namespace tern {

TERN_REGISTRATION void register_op_linear_attention(OpRegistry& r) {
  r.add({"LinearAttention",
         3,
         6,
         1,
         2,
         ops::infer_linear_attention,
         ops::make_linear_attention,
         {},
         attrs("kv_num_heads, q_num_heads, scale, update_rule",
               {{"chunk_size", "a hint for chunked kernels; the result does not depend on it"}})});
}

}  // namespace tern
