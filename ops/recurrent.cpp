// LSTM, GRU and RNN: attributes, shape inference, and the reference kernel (every step of every
// gate summed in double). The CPU backend's kernel (backends/cpu/kernels/recurrent.cpp) is tested
// against it.
#include "ops/recurrent.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "ops/common/op_utils.h"

namespace tern::ops {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The activations of one direction and their alpha/beta, taken from the attribute lists in
// order by the functions that use them (ONNX Runtime's convention), with its defaults.
Status parse_activations(const OpContext& ctx, RnnParams* p) {
  const size_t per_dir = p->kind == RnnKind::kLstm ? 3 : p->kind == RnnKind::kGru ? 2 : 1;
  TERN_ASSIGN_OR_RETURN(std::vector<std::string> names, ctx.attrs().get_strings("activations"));
  TERN_ASSIGN_OR_RETURN(std::vector<float> alphas, ctx.attrs().get_floats("activation_alpha"));
  TERN_ASSIGN_OR_RETURN(std::vector<float> betas, ctx.attrs().get_floats("activation_beta"));
  if (names.empty()) {
    if (p->kind == RnnKind::kLstm) names = {"Sigmoid", "Tanh", "Tanh"};
    if (p->kind == RnnKind::kGru) names = {"Sigmoid", "Tanh"};
    if (p->kind == RnnKind::kRnn) names = {"Tanh"};
  }
  const auto dirs = static_cast<size_t>(p->dirs);
  if (names.size() == per_dir && dirs == 2) {
    const std::vector<std::string> one = names;
    names.insert(names.end(), one.begin(), one.end());
  }
  if (names.size() != per_dir * dirs) {
    return invalid_model("attribute 'activations' has ", names.size(), " entries; ", per_dir,
                         " per direction are needed for ", dirs, " direction(s)");
  }
  size_t ai = 0, bi = 0;
  auto next = [](const std::vector<float>& v, size_t& i, float fallback) {
    return i < v.size() ? v[i++] : fallback;
  };
  using Fn = RnnActivation::Fn;
  p->acts.assign(dirs, {});
  for (size_t k = 0; k < names.size(); ++k) {
    const std::string n = lower(names[k]);
    RnnActivation a;
    if (n == "sigmoid") {
      a.fn = Fn::kSigmoid;
    } else if (n == "tanh") {
      a.fn = Fn::kTanh;
    } else if (n == "relu") {
      a.fn = Fn::kRelu;
    } else if (n == "affine") {
      a.fn = Fn::kAffine, a.alpha = next(alphas, ai, 1.0f), a.beta = next(betas, bi, 0.0f);
    } else if (n == "leakyrelu") {
      a.fn = Fn::kLeakyRelu, a.alpha = next(alphas, ai, 0.01f);
    } else if (n == "thresholdedrelu") {
      a.fn = Fn::kThresholdedRelu, a.alpha = next(alphas, ai, 1.0f);
    } else if (n == "scaledtanh") {
      a.fn = Fn::kScaledTanh, a.alpha = next(alphas, ai, 1.0f), a.beta = next(betas, bi, 1.0f);
    } else if (n == "hardsigmoid") {
      a.fn = Fn::kHardSigmoid, a.alpha = next(alphas, ai, 0.2f), a.beta = next(betas, bi, 0.5f);
    } else if (n == "elu") {
      a.fn = Fn::kElu, a.alpha = next(alphas, ai, 1.0f);
    } else if (n == "softsign") {
      a.fn = Fn::kSoftsign;
    } else if (n == "softplus") {
      a.fn = Fn::kSoftplus;
    } else {
      return unsupported("activation '", names[k], "' is not one ONNX defines for ",
                         ctx.node->op_type);
    }
    p->acts[k / per_dir].push_back(a);
  }
  return Status::ok();
}

}  // namespace

double rnn_activate(const RnnActivation& a, double x) {
  using Fn = RnnActivation::Fn;
  switch (a.fn) {
    case Fn::kSigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case Fn::kTanh:
      return std::tanh(x);
    case Fn::kRelu:
      return std::max(0.0, x);
    case Fn::kAffine:
      return a.alpha * x + a.beta;
    case Fn::kLeakyRelu:
      return x >= 0 ? x : a.alpha * x;
    case Fn::kThresholdedRelu:
      return x > a.alpha ? x : 0.0;
    case Fn::kScaledTanh:
      return a.alpha * std::tanh(a.beta * x);
    case Fn::kHardSigmoid:
      return std::clamp(a.alpha * x + a.beta, 0.0, 1.0);
    case Fn::kElu:
      return x >= 0 ? x : a.alpha * (std::exp(x) - 1.0);
    case Fn::kSoftsign:
      return x / (1.0 + std::fabs(x));
    case Fn::kSoftplus:
      return std::log1p(std::exp(x));
  }
  return x;
}

Expected<RnnParams> parse_rnn(const OpContext& ctx, RnnKind kind) {
  RnnParams p;
  p.kind = kind;
  const Attributes& at = ctx.attrs();
  TERN_ASSIGN_OR_RETURN(std::string direction, at.get_string("direction", "forward"));
  if (direction == "forward" || direction == "reverse") {
    p.dirs = 1;
    p.reverse_only = direction == "reverse";
  } else if (direction == "bidirectional") {
    p.dirs = 2;
  } else {
    return invalid_model("attribute 'direction' is '", direction,
                         "', not forward, reverse or bidirectional");
  }
  TERN_ASSIGN_OR_RETURN(p.layout, at.get_int("layout", 0));
  if (p.layout != 0 && p.layout != 1) return invalid_model("attribute 'layout' must be 0 or 1");
  TERN_ASSIGN_OR_RETURN(p.clip, at.get_float("clip", 0.0f));
  if (p.clip < 0 || std::isnan(p.clip)) return invalid_model("attribute 'clip' must be positive");
  TERN_ASSIGN_OR_RETURN(int64_t input_forget, at.get_int("input_forget", 0));
  TERN_ASSIGN_OR_RETURN(int64_t lbr, at.get_int("linear_before_reset", 0));
  p.input_forget = input_forget != 0;
  p.linear_before_reset = lbr != 0;
  TERN_RETURN_IF_ERROR(parse_activations(ctx, &p));

  const TensorInfo& x = ctx.inputs[kRnnX];
  const TensorInfo& w = ctx.inputs[kRnnW];
  const TensorInfo& r = ctx.inputs[kRnnR];
  if (x.dtype != DType::kFloat32 && x.dtype != DType::kFloat64) {
    return dtype_error(ctx, kRnnX, "float32, float64");
  }
  for (size_t i : {kRnnW, kRnnR, kRnnB, kRnnInitH, kRnnInitC, kRnnP}) {
    if (ctx.has_input(i)) TERN_RETURN_IF_ERROR(require_same_dtype(ctx, kRnnX, i));
  }
  if (x.shape.size() != 3 || w.shape.size() != 3 || r.shape.size() != 3) {
    return invalid_argument("X, W and R must have rank 3, they have ", shape_str(x.shape), ", ",
                            shape_str(w.shape), ", ", shape_str(r.shape));
  }
  p.seq = x.shape[p.layout == 0 ? 0 : 1];
  p.batch = x.shape[p.layout == 0 ? 1 : 0];
  p.input = x.shape[2];
  TERN_ASSIGN_OR_RETURN(p.hidden, at.get_int("hidden_size", r.shape[2]));
  const int64_t G = p.gates(), H = p.hidden;
  auto expect = [&](size_t i, const Shape& want, const char* name) -> Status {
    if (!ctx.has_input(i)) return Status::ok();
    if (ctx.inputs[i].shape != want) {
      return invalid_argument(name, " '", ctx.input_names[i], "' has shape ",
                              shape_str(ctx.inputs[i].shape), ", expected ", shape_str(want));
    }
    return Status::ok();
  };
  const Shape state = p.layout == 0 ? Shape{p.dirs, p.batch, H} : Shape{p.batch, p.dirs, H};
  TERN_RETURN_IF_ERROR(expect(kRnnW, {p.dirs, G * H, p.input}, "W"));
  TERN_RETURN_IF_ERROR(expect(kRnnR, {p.dirs, G * H, H}, "R"));
  TERN_RETURN_IF_ERROR(expect(kRnnB, {p.dirs, 2 * G * H}, "B"));
  TERN_RETURN_IF_ERROR(expect(kRnnSeqLens, {p.batch}, "sequence_lens"));
  TERN_RETURN_IF_ERROR(expect(kRnnInitH, state, "initial_h"));
  if (kind == RnnKind::kLstm) {
    TERN_RETURN_IF_ERROR(expect(kRnnInitC, state, "initial_c"));
    TERN_RETURN_IF_ERROR(expect(kRnnP, {p.dirs, 3 * H}, "P"));
  }
  if (ctx.has_input(kRnnSeqLens) && ctx.inputs[kRnnSeqLens].dtype != DType::kInt32 &&
      ctx.inputs[kRnnSeqLens].dtype != DType::kInt64) {
    return dtype_error(ctx, kRnnSeqLens, "int32");
  }
  return p;
}

Expected<int64_t> rnn_steps(const RnnParams& p, const Tensor* seq_lens, int64_t b) {
  if (!seq_lens) return p.seq;
  const int64_t n = seq_lens->int_at(b);
  if (n < 0 || n > p.seq) {
    return invalid_argument("sequence_lens[", b, "] is ", n, ", outside 0..", p.seq);
  }
  return n;
}

namespace {

Status infer_recurrent(OpContext& ctx, RnnKind kind) {
  TERN_ASSIGN_OR_RETURN(RnnParams p, parse_rnn(ctx, kind));
  const DType dt = ctx.inputs[kRnnX].dtype;
  const Shape state =
      p.layout == 0 ? Shape{p.dirs, p.batch, p.hidden} : Shape{p.batch, p.dirs, p.hidden};
  if (ctx.outputs.size() > 0) {
    ctx.set_output(0, dt,
                   p.layout == 0 ? Shape{p.seq, p.dirs, p.batch, p.hidden}
                                 : Shape{p.batch, p.seq, p.dirs, p.hidden});
  }
  for (size_t o = 1; o < ctx.outputs.size(); ++o) ctx.set_output(o, dt, state);
  return Status::ok();
}

template <RnnKind K>
Status infer_kind(OpContext& ctx) {
  return infer_recurrent(ctx, K);
}

// The reference: one batch entry and direction at a time, every sum in double.
template <class T>
Status run_reference(const RnnParams& p, const KernelArgs& a) {
  const int64_t H = p.hidden, G = p.gates(), I = p.input;
  const T* X = a.inputs[kRnnX]->data<T>();
  auto in = [&](size_t i) -> const T* {
    return i < a.inputs.size() && a.inputs[i] ? a.inputs[i]->data<T>() : nullptr;
  };
  const T *W = in(kRnnW), *R = in(kRnnR), *B = in(kRnnB), *H0 = in(kRnnInitH);
  const T* C0 = p.kind == RnnKind::kLstm ? in(kRnnInitC) : nullptr;
  const T* P = p.kind == RnnKind::kLstm ? in(kRnnP) : nullptr;
  const Tensor* lens = kRnnSeqLens < a.inputs.size() ? a.inputs[kRnnSeqLens] : nullptr;
  T* Y = !a.outputs.empty() && a.outputs[0] ? a.outputs[0]->data<T>() : nullptr;
  T* YH = a.outputs.size() > 1 && a.outputs[1] ? a.outputs[1]->data<T>() : nullptr;
  T* YC = p.kind == RnnKind::kLstm && a.outputs.size() > 2 && a.outputs[2] ? a.outputs[2]->data<T>()
                                                                           : nullptr;
  if (Y) std::fill(Y, Y + a.outputs[0]->numel(), T(0));
  std::vector<double> h(static_cast<size_t>(H)), c(static_cast<size_t>(H)),
      pre(static_cast<size_t>(G * H)), rh(static_cast<size_t>(G * H));
  auto clip = [&](double v) {
    return p.clip > 0 ? std::clamp(v, -static_cast<double>(p.clip), static_cast<double>(p.clip))
                      : v;
  };
  for (int64_t d = 0; d < p.dirs; ++d) {
    const T* Wd = W + d * G * H * I;
    const T* Rd = R + d * G * H * H;
    const auto& act = p.acts[static_cast<size_t>(d)];
    for (int64_t b = 0; b < p.batch; ++b) {
      TERN_ASSIGN_OR_RETURN(const int64_t steps, rnn_steps(p, lens, b));
      for (int64_t j = 0; j < H; ++j) {
        h[j] = H0 ? static_cast<double>(H0[p.state_row(d, b) + j]) : 0.0;
        c[j] = C0 ? static_cast<double>(C0[p.state_row(d, b) + j]) : 0.0;
      }
      for (int64_t s = 0; s < steps; ++s) {
        const int64_t t = p.reversed(d) ? steps - 1 - s : s;
        const T* x = X + p.x_row(t, b);
        for (int64_t g = 0; g < G * H; ++g) {
          double xw = B ? static_cast<double>(B[d * 2 * G * H + g]) : 0.0;
          for (int64_t k = 0; k < I; ++k) xw += static_cast<double>(x[k]) * Wd[g * I + k];
          double hr = B ? static_cast<double>(B[d * 2 * G * H + G * H + g]) : 0.0;
          for (int64_t k = 0; k < H; ++k) hr += h[k] * static_cast<double>(Rd[g * H + k]);
          pre[g] = xw;
          rh[g] = hr;
        }
        if (p.kind == RnnKind::kRnn) {
          for (int64_t j = 0; j < H; ++j) h[j] = rnn_activate(act[0], clip(pre[j] + rh[j]));
        } else if (p.kind == RnnKind::kGru) {
          std::vector<double> z(H), r(H);
          for (int64_t j = 0; j < H; ++j) {
            z[j] = rnn_activate(act[0], clip(pre[j] + rh[j]));
            r[j] = rnn_activate(act[0], clip(pre[H + j] + rh[H + j]));
          }
          std::vector<double> hh(H);
          const double* rbh = nullptr;
          std::vector<double> rbh_v(H, 0.0);
          if (B) {
            for (int64_t j = 0; j < H; ++j) rbh_v[j] = B[d * 2 * G * H + G * H + 2 * H + j];
          }
          rbh = rbh_v.data();
          for (int64_t j = 0; j < H; ++j) {
            double v;
            if (p.linear_before_reset) {
              v = pre[2 * H + j] + r[j] * rh[2 * H + j];  // rh includes Rbh
            } else {
              double acc = rbh[j];
              for (int64_t k = 0; k < H; ++k) acc += r[k] * h[k] * Rd[(2 * H + j) * H + k];
              v = pre[2 * H + j] + acc;
            }
            hh[j] = rnn_activate(act[1], clip(v));
          }
          for (int64_t j = 0; j < H; ++j) h[j] = (1.0 - z[j]) * hh[j] + z[j] * h[j];
        } else {  // LSTM, gates i o f c
          const T* Pd = P ? P + d * 3 * H : nullptr;
          for (int64_t j = 0; j < H; ++j) {
            const double pi = Pd ? static_cast<double>(Pd[j]) : 0.0;
            const double po = Pd ? static_cast<double>(Pd[H + j]) : 0.0;
            const double pf = Pd ? static_cast<double>(Pd[2 * H + j]) : 0.0;
            const double i = rnn_activate(act[0], clip(pre[j] + rh[j] + pi * c[j]));
            double f = rnn_activate(act[0], clip(pre[2 * H + j] + rh[2 * H + j] + pf * c[j]));
            if (p.input_forget) f = 1.0 - i;
            const double cc = rnn_activate(act[1], clip(pre[3 * H + j] + rh[3 * H + j]));
            c[j] = f * c[j] + i * cc;
            const double o = rnn_activate(act[0], clip(pre[H + j] + rh[H + j] + po * c[j]));
            h[j] = o * rnn_activate(act[2], c[j]);
          }
        }
        if (Y) {
          for (int64_t j = 0; j < H; ++j) Y[p.y_row(t, d, b) + j] = static_cast<T>(h[j]);
        }
      }
      for (int64_t j = 0; j < H; ++j) {
        if (YH) YH[p.state_row(d, b) + j] = static_cast<T>(h[j]);
        if (YC) YC[p.state_row(d, b) + j] = static_cast<T>(c[j]);
      }
    }
  }
  return Status::ok();
}

Status run_recurrent(const RnnParams& p, const KernelArgs& a, const ExecContext&) {
  // (dtype_built: the float64 loops are dropped where the build left float64 out.)
  return dtype_built(DType::kFloat64) && a.inputs[kRnnX]->dtype() == DType::kFloat64
             ? run_reference<double>(p, a)
             : run_reference<float>(p, a);
}

template <RnnKind K>
Expected<std::unique_ptr<Kernel>> make_kind(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(require_plain_layout(ctx));
  TERN_ASSIGN_OR_RETURN(RnnParams p, parse_rnn(ctx, K));
  return make_kernel("reference", std::move(p), run_recurrent);
}

}  // namespace
}  // namespace tern::ops

namespace tern {

TERN_REGISTRATION void register_op_recurrent(OpRegistry& r) {
  using ops::RnnKind;
  r.add({"LSTM",
         3,
         8,
         0,
         3,
         ops::infer_kind<RnnKind::kLstm>,
         ops::make_kind<RnnKind::kLstm>,
         {},
         attrs("activation_alpha, activation_beta, activations, clip, direction, hidden_size, "
               "input_forget, layout")});
  r.add({"GRU",
         3,
         6,
         0,
         2,
         ops::infer_kind<RnnKind::kGru>,
         ops::make_kind<RnnKind::kGru>,
         {},
         attrs("activation_alpha, activation_beta, activations, clip, direction, hidden_size, "
               "layout, linear_before_reset")});
  r.add({"RNN",
         3,
         6,
         0,
         2,
         ops::infer_kind<RnnKind::kRnn>,
         ops::make_kind<RnnKind::kRnn>,
         {},
         attrs("activation_alpha, activation_beta, activations, clip, direction, hidden_size, "
               "layout")});
}

}  // namespace tern
