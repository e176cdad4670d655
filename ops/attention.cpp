// Attention: params, shape inference and the naive reference (accumulates in double).
#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/opt/attention_fusion.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace ops {

namespace {

HeadView view_of(bool three_d, bool seq_first, int64_t batch, int64_t heads, int64_t seq,
                 int64_t dim) {
  // 3-D: (B, S, heads*dim), or (S, B, heads*dim) sequence-first; 4-D: (B, heads, S, dim).
  if (seq_first) return HeadView{heads * dim, dim, batch * heads * dim};
  return three_d ? HeadView{seq * heads * dim, dim, heads * dim}
                 : HeadView{heads * seq * dim, seq * dim, dim};
}

}  // namespace

Expected<AttentionParams> parse_attention(const OpContext& ctx) {
  AttentionParams p;
  const Shape& q = ctx.inputs[0].shape;
  const Shape& k = ctx.inputs[1].shape;
  const Shape& v = ctx.inputs[2].shape;
  p.dtype = ctx.inputs[0].dtype;
  if (p.dtype != DType::kFloat32 && p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16) {
    return dtype_error(ctx, 0, "float32, float16, bfloat16");
  }
  TERN_RETURN_IF_ERROR(require_same_dtype(ctx, 0, 1));
  TERN_RETURN_IF_ERROR(require_same_dtype(ctx, 0, 2));
  if (ctx.attrs().has("softmax_precision")) {
    TERN_ASSIGN_OR_RETURN(int64_t precision, ctx.attrs().get_int("softmax_precision", 1));
    // ONNX TensorProto types: FLOAT 1, FLOAT16 10, DOUBLE 11, BFLOAT16 16.
    if (precision == 10) {
      p.softmax_round = DType::kFloat16;
    } else if (precision == 16) {
      p.softmax_round = DType::kBFloat16;
    } else if (precision != 1 && precision != 11) {
      return invalid_model(ctx.where, ": softmax_precision ", precision,
                           " is not 1 (float), 10 (float16), 11 (double) or 16 (bfloat16)");
    }
  }
  p.nonpad = ctx.num_inputs() > 6 && ctx.has_input(6);
  p.want_qk = ctx.outputs.size() > 3 && ctx.outputs[3].present;
  TERN_ASSIGN_OR_RETURN(int64_t qh_attr, ctx.attrs().get_int("q_num_heads", 0));
  TERN_ASSIGN_OR_RETURN(int64_t kvh_attr, ctx.attrs().get_int("kv_num_heads", 0));
  TERN_ASSIGN_OR_RETURN(int64_t causal, ctx.attrs().get_int("is_causal", 0));
  TERN_ASSIGN_OR_RETURN(int64_t qk_mode, ctx.attrs().get_int("qk_matmul_output_mode", 0));
  TERN_ASSIGN_OR_RETURN(p.softcap, ctx.attrs().get_float("softcap", 0.0f));
  for (const char* window : {"left_window_size", "right_window_size"}) {  // opset 25
    TERN_ASSIGN_OR_RETURN(int64_t w, ctx.attrs().get_int(window, -1));
    if (w != -1) return unsupported(window, "=", w, " (sliding-window attention)");
  }
  p.qk_mode = qk_mode;
  p.causal = causal != 0;
  if (q.size() != k.size() || q.size() != v.size() || (q.size() != 3 && q.size() != 4)) {
    return invalid_argument(ctx.where, ": Q, K and V must all be 3-D or all be 4-D, got ",
                            shape_str(q), ", ", shape_str(k), ", ", shape_str(v));
  }
  const bool three_d = q.size() == 3;
  TERN_ASSIGN_OR_RETURN(int64_t seq_first, ctx.attrs().get_int(kAttentionSeqFirst, 0));
  p.seq_first = seq_first != 0;
  if (p.seq_first && (!three_d || ctx.num_inputs() > 4 || ctx.outputs.size() > 1)) {
    return invalid_argument(ctx.where, ": ", kAttentionSeqFirst,
                            " takes 3-D Q, K, V, an optional mask and one output");
  }
  const size_t bd = p.seq_first ? 1 : 0, sd = 1 - bd;  // the batch and sequence dims (3-D)
  p.batch = q[bd];
  if (k[bd] != p.batch || v[bd] != p.batch) {
    return invalid_argument(ctx.where, ": batch sizes differ: Q ", shape_str(q), ", K ",
                            shape_str(k), ", V ", shape_str(v));
  }
  int64_t seq_new = 0;
  if (three_d) {
    if (qh_attr <= 0 || kvh_attr <= 0) {
      return invalid_argument(ctx.where,
                              ": 3-D inputs need the q_num_heads and kv_num_heads attributes");
    }
    p.q_heads = qh_attr;
    p.kv_heads = kvh_attr;
    if (q[2] % p.q_heads || k[2] % p.kv_heads || v[2] % p.kv_heads) {
      return invalid_argument(ctx.where, ": hidden sizes ", q[2], ", ", k[2], ", ", v[2],
                              " are not multiples of the head counts ", p.q_heads, "/", p.kv_heads);
    }
    p.seq_q = q[sd];
    p.head_dim = q[2] / p.q_heads;
    seq_new = k[sd];
    if (k[2] / p.kv_heads != p.head_dim) {
      return invalid_argument(ctx.where, ": Q and K head sizes differ");
    }
    if (v[sd] != seq_new) return invalid_argument(ctx.where, ": K and V sequence lengths differ");
    p.v_head_dim = v[2] / p.kv_heads;
  } else {
    p.q_heads = q[1];
    p.kv_heads = k[1];
    p.seq_q = q[2];
    p.head_dim = q[3];
    seq_new = k[2];
    if (k[3] != p.head_dim) {
      return invalid_argument(ctx.where, ": Q and K head sizes differ: ", shape_str(q), " vs ",
                              shape_str(k));
    }
    if (v[1] != p.kv_heads || v[2] != seq_new) {
      return invalid_argument(ctx.where, ": V ", shape_str(v), " does not match K ", shape_str(k));
    }
    p.v_head_dim = v[3];
  }
  if (p.kv_heads <= 0 || p.q_heads % p.kv_heads != 0) {
    return invalid_argument(ctx.where, ": q heads (", p.q_heads,
                            ") must be a multiple of kv heads (", p.kv_heads, ")");
  }
  p.q = view_of(three_d, p.seq_first, p.batch, p.q_heads, p.seq_q, p.head_dim);
  p.k = view_of(three_d, p.seq_first, p.batch, p.kv_heads, seq_new, p.head_dim);
  p.v = view_of(three_d, p.seq_first, p.batch, p.kv_heads, seq_new, p.v_head_dim);
  p.y = view_of(three_d, p.seq_first, p.batch, p.q_heads, p.seq_q, p.v_head_dim);
  p.has_past = ctx.has_input(4) || ctx.has_input(5);
  if (p.has_past) {
    if (!ctx.has_input(4) || !ctx.has_input(5)) {
      return invalid_argument(ctx.where, ": past_key and past_value come together");
    }
    const Shape& pk = ctx.inputs[4].shape;
    const Shape& pv = ctx.inputs[5].shape;
    TERN_RETURN_IF_ERROR(require_same_dtype(ctx, 0, 4));
    TERN_RETURN_IF_ERROR(require_same_dtype(ctx, 0, 5));
    if (pk.size() != 4 || pv.size() != 4 || pk[0] != p.batch || pk[1] != p.kv_heads ||
        pk[3] != p.head_dim || pv[0] != p.batch || pv[1] != p.kv_heads || pv[2] != pk[2] ||
        pv[3] != p.v_head_dim) {
      return invalid_argument(ctx.where, ": past_key ", shape_str(pk), " / past_value ",
                              shape_str(pv), " must be (batch, kv_heads, past, head_size)");
    }
    p.past = pk[2];
    p.causal_offset = p.past;
  }
  p.seq_kv = p.past + seq_new;
  p.want_present_key = ctx.outputs.size() > 1 && ctx.outputs[1].present;
  p.want_present_value = ctx.outputs.size() > 2 && ctx.outputs[2].present;
  if (p.has_past && (!p.want_present_key || !p.want_present_value)) {
    return unsupported(ctx.where,
                       ": with past_key/past_value, present_key and present_value "
                       "must be outputs (Tern reads the cache through them)");
  }
  TERN_ASSIGN_OR_RETURN(
      p.scale, ctx.attrs().get_float("scale", 1.0f / std::sqrt(static_cast<float>(p.head_dim))));
  if (ctx.has_input(3)) {
    const TensorInfo& m = ctx.inputs[3];
    if (m.dtype == DType::kBool) {
      p.mask = AttentionParams::Mask::kBool;
    } else if (m.dtype == p.dtype) {
      p.mask = AttentionParams::Mask::kFloat;
    } else {
      return dtype_error(ctx, 3, "bool or Q's float type");
    }
    const Shape full = {p.batch, p.q_heads, p.seq_q, p.seq_kv};
    if (m.shape.size() > 4) {
      return invalid_argument(ctx.where, ": attn_mask ", shape_str(m.shape), " has rank > 4");
    }
    int64_t stride = 1;
    for (int d = 3, md = static_cast<int>(m.shape.size()) - 1; d >= 0; --d, --md) {
      if (md < 0) break;
      int64_t dim = m.shape[static_cast<size_t>(md)];
      if (d == 3 && dim > 1 && dim < p.seq_kv) {
        p.mask_len = dim;  // a shorter mask: the keys past it are masked out
      } else if (dim != 1 && dim != full[static_cast<size_t>(d)]) {
        return invalid_argument(ctx.where, ": attn_mask ", shape_str(m.shape),
                                " does not broadcast to ", shape_str(full));
      }
      p.mask_stride[d] = dim == 1 ? 0 : stride;
      stride *= dim;
    }
  }
  return p;
}

SdpCase sdp_case(const AttentionParams& p) {
  SdpCase c;
  c.batch = p.batch;
  c.heads = p.q_heads;
  c.seq_q = p.seq_q;
  c.seq_kv = p.seq_kv;
  c.head_dim = p.head_dim;
  c.dtype = p.dtype;
  c.causal = p.causal;
  c.mask = p.mask != AttentionParams::Mask::kNone;
  return c;
}

void write_present(const AttentionParams& p, const KernelArgs& a) {
  auto fill = [&](const Tensor* past, const Tensor* fresh, const HeadView& fv, int64_t dim,
                  Tensor* out) {
    if (!out) return;
    float* o = out->data<float>();
    for (int64_t b = 0; b < p.batch; ++b) {
      for (int64_t h = 0; h < p.kv_heads; ++h) {
        float* dst = o + (b * p.kv_heads + h) * p.seq_kv * dim;
        if (p.past) {
          std::memcpy(dst, past->data<float>() + (b * p.kv_heads + h) * p.past * dim,
                      static_cast<size_t>(p.past * dim) * sizeof(float));
        }
        for (int64_t s = 0; s < p.seq_kv - p.past; ++s) {
          std::memcpy(dst + (p.past + s) * dim, fresh->data<float>() + fv.offset(b, h, s),
                      static_cast<size_t>(dim) * sizeof(float));
        }
      }
    }
  };
  const Tensor* pk = a.inputs.size() > 4 ? a.inputs[4] : nullptr;
  const Tensor* pv = a.inputs.size() > 5 ? a.inputs[5] : nullptr;
  fill(pk, a.inputs[1], p.k, p.head_dim, a.outputs.size() > 1 ? a.outputs[1] : nullptr);
  fill(pv, a.inputs[2], p.v, p.v_head_dim, a.outputs.size() > 2 ? a.outputs[2] : nullptr);
}

KvSource kv_source(const AttentionParams& p, const KernelArgs& a) {
  if (!p.has_past) return {a.inputs[1]->data<float>(), a.inputs[2]->data<float>(), p.k, p.v};
  HeadView kv{p.kv_heads * p.seq_kv * p.head_dim, p.seq_kv * p.head_dim, p.head_dim};
  HeadView vv{p.kv_heads * p.seq_kv * p.v_head_dim, p.seq_kv * p.v_head_dim, p.v_head_dim};
  return {a.outputs[1]->data<float>(), a.outputs[2]->data<float>(), kv, vv};
}

}  // namespace ops

namespace {

Status infer_attention(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::AttentionParams p, ops::parse_attention(ctx));
  const bool three_d = ctx.inputs[0].shape.size() == 3;
  ctx.set_output(0, p.dtype,
                 p.seq_first ? Shape{p.seq_q, p.batch, p.q_heads * p.v_head_dim}
                 : three_d   ? Shape{p.batch, p.seq_q, p.q_heads * p.v_head_dim}
                             : Shape{p.batch, p.q_heads, p.seq_q, p.v_head_dim});
  if (ctx.outputs.size() > 1 && ctx.outputs[1].present) {
    ctx.set_output(1, p.dtype, {p.batch, p.kv_heads, p.seq_kv, p.head_dim});
  }
  if (ctx.outputs.size() > 2 && ctx.outputs[2].present) {
    ctx.set_output(2, p.dtype, {p.batch, p.kv_heads, p.seq_kv, p.v_head_dim});
  }
  if (p.want_qk) ctx.set_output(3, p.dtype, {p.batch, p.q_heads, p.seq_q, p.seq_kv});
  return Status::ok();
}

// The ground truth: one (batch, head, query) row at a time, in double; float32 tensors.
Status run_reference_f32(const ops::AttentionParams& p, const KernelArgs& a) {
  ops::write_present(p, a);
  const ops::KvSource kv = ops::kv_source(p, a);
  const float* q = a.inputs[0]->data<float>();
  const void* mask = a.inputs.size() > 3 && a.inputs[3] ? a.inputs[3]->raw() : nullptr;
  const Tensor* nonpad = p.nonpad ? a.inputs[6] : nullptr;
  float* y = a.outputs[0]->data<float>();
  float* qk_out = p.want_qk ? a.outputs[3]->data<float>() : nullptr;
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  std::vector<double> s(static_cast<size_t>(p.seq_kv));
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t valid = nonpad ? nonpad->int_at(b) : p.seq_kv;
    // Without a past, a static cache's causal frontier is its valid length minus the queries.
    const int64_t offset = nonpad && !p.has_past ? valid - p.seq_q : p.causal_offset;
    for (int64_t h = 0; h < p.q_heads; ++h) {
      const int64_t hk = h / p.group();
      for (int64_t i = 0; i < p.seq_q; ++i) {
        const float* qi = q + p.q.offset(b, h, i);
        float* qk_row = qk_out ? qk_out + ((b * p.q_heads + h) * p.seq_q + i) * p.seq_kv : nullptr;
        double mx = kNegInf;
        for (int64_t j = 0; j < p.seq_kv; ++j) {
          const float* kj = kv.k + kv.kv.offset(b, hk, j);
          double dot = 0;
          for (int64_t d = 0; d < p.head_dim; ++d) dot += static_cast<double>(qi[d]) * kj[d];
          dot *= p.scale;
          if (qk_row && p.qk_mode == 0) qk_row[j] = static_cast<float>(dot);
          if (p.softcap > 0) dot = p.softcap * std::tanh(dot / p.softcap);
          if (qk_row && p.qk_mode == 1) qk_row[j] = static_cast<float>(dot);
          dot += ops::mask_bias(p, mask, b, h, i, j);
          if (p.causal && j > i + offset) dot = kNegInf;
          if (j >= valid) dot = kNegInf;
          if (qk_row && p.qk_mode == 2) qk_row[j] = static_cast<float>(dot);
          s[static_cast<size_t>(j)] = dot;
          mx = std::max(mx, dot);
        }
        if (p.softmax_round != DType::kUndefined && mx != kNegInf) {
          for (double& e : s) e = ops::round_to(p.softmax_round, static_cast<float>(e));
          mx = ops::round_to(p.softmax_round, static_cast<float>(mx));
        }
        double sum = 0;
        for (double& e : s) {
          e = mx == kNegInf ? 0.0 : std::exp(e - mx);  // a fully masked row gives zeros
          sum += e;
        }
        if (p.softmax_round != DType::kUndefined && sum > 0) {
          for (double& e : s) e = ops::round_to(p.softmax_round, static_cast<float>(e / sum));
          sum = 1;
        }
        if (qk_row && p.qk_mode == 3) {
          for (int64_t j = 0; j < p.seq_kv; ++j) {
            qk_row[j] = static_cast<float>(sum > 0 ? s[static_cast<size_t>(j)] / sum : 0.0);
          }
        }
        float* yi = y + p.y.offset(b, h, i);
        for (int64_t d = 0; d < p.v_head_dim; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < p.seq_kv; ++j) {
            acc += s[static_cast<size_t>(j)] * kv.v[kv.vv.offset(b, hk, j) + d];
          }
          yi[d] = static_cast<float>(sum > 0 ? acc / sum : 0.0);
        }
      }
    }
  }
  return Status::ok();
}

// float16 / bfloat16 tensors: the float32 reference on widened copies, its outputs rounded back.
Status run_reference(const ops::AttentionParams& p, const KernelArgs& a, const ExecContext&) {
  if (p.dtype == DType::kFloat32) return run_reference_f32(p, a);
  std::vector<Tensor> held;
  held.reserve(a.inputs.size() + a.outputs.size());
  KernelArgs wide;
  for (const Tensor* t : a.inputs) {
    if (!t || t->dtype() != p.dtype) {  // absent, a boolean mask, nonpad_kv_seqlen
      wide.inputs.push_back(t);
      continue;
    }
    TERN_ASSIGN_OR_RETURN(Tensor w, Tensor::allocate(DType::kFloat32, t->shape()));
    const std::vector<float> v = ops::to_float32(*t);
    std::copy(v.begin(), v.end(), w.data<float>());
    held.push_back(std::move(w));
    wide.inputs.push_back(&held.back());
  }
  for (const Tensor* t : a.outputs) {
    if (!t) {
      wide.outputs.push_back(nullptr);
      continue;
    }
    TERN_ASSIGN_OR_RETURN(Tensor w, Tensor::allocate(DType::kFloat32, t->shape()));
    held.push_back(std::move(w));
    wide.outputs.push_back(&held.back());
  }
  TERN_RETURN_IF_ERROR(run_reference_f32(p, wide));
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    if (!a.outputs[i]) continue;
    const Tensor& w = *wide.outputs[i];
    ops::from_float32(std::vector<float>(w.data<float>(), w.data<float>() + w.numel()),
                      *a.outputs[i]);
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_reference(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::AttentionParams p, ops::parse_attention(ctx));
  // The portable kernel materialises the scores: it is MATH, and runs only where MATH may.
  if (!ctx.flag(FlagId::kSdpMath)) {
    return invalid_argument(ctx.where,
                            ": no enabled scaled-dot-product attention backend can run it: only "
                            "the portable kernel (MATH) takes this case, and MATH is disabled "
                            "(sdp.math_enabled)");
  }
  return make_kernel("reference", p, run_reference);
}

}  // namespace

TERN_REGISTRATION void register_op_attention(OpRegistry& r) {
  r.add({"Attention",
         3,
         7,
         1,
         4,
         infer_attention,
         make_reference,
         {},
         attrs("is_causal, kv_num_heads, q_num_heads, qk_matmul_output_mode, scale, softcap, "
               "softmax_precision, left_window_size, right_window_size")});
}

}  // namespace tern
