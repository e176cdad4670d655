// The attention-era ops against plain loops written here over random shapes (seed printed):
// LinearAttention (every update rule, GQA/MQA ratios, per-head and per-key decay, past state,
// prefill then decode), CausalConvWithState (bias, past state, SiLU) and Attention with float16
// operands, each run through its CPU kernel and its reference kernel, float32 and float16; and the
// errors bad inputs get (a status naming the problem, never a crash).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>

#include "backends/registry.h"
#include "core/half.h"
#include "core/kernel_registry.h"
#include "core/op_registry.h"
#include "graph_builder.h"
#include "ops/common/op_utils.h"
#include "test_util.h"

using namespace tern;
using namespace tern_test;

namespace {

using Inputs = std::vector<std::optional<Tensor>>;

// A tensor of dtype t holding v (rounded to t).
Tensor make_float(DType t, const Shape& shape, const std::vector<float>& v) {
  Tensor x = Tensor::allocate(t, shape).value();
  ops::from_float32(v, x);
  return x;
}
std::vector<float> uniform(int64_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng);
  return v;
}
// v rounded to t, as the kernel sees it.
std::vector<float> rounded(DType t, std::vector<float> v) {
  for (float& x : v) x = ops::round_to(t, x);
  return v;
}

// Runs one node outside a session: its CPU kernel (the first factory the CPU backend registers for
// the first input's dtype) or the op's reference kernel. Outputs as float32 values.
struct DirectRun {
  std::string kernel;
  std::vector<std::vector<float>> outputs;
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
};
Expected<DirectRun> run_direct(const std::string& op, const Attributes& at, const Inputs& ins,
                               int n_out, bool cpu, int64_t opset = 27,
                               const FlagOverrides* flags = nullptr) {
  TERN_RETURN_IF_ERROR(backends::get("cpu").status());  // registers the CPU kernels
  Node node{"k", op, "", {}, {}, at};
  OpContext ctx;
  ctx.node = &node;
  ctx.where = op;
  ctx.opset = opset;
  const FlagValues values = Flags::global().resolve(flags, nullptr);
  ctx.flags = &values;
  for (const auto& t : ins) {
    ctx.inputs.push_back(t ? TensorInfo{true, t->dtype(), t->shape(), &*t} : TensorInfo{});
    ctx.input_names.push_back("in");
  }
  ctx.outputs.assign(static_cast<size_t>(n_out), TensorInfo{true, DType::kUndefined, {}});
  const OpSchema* schema = OpRegistry::global().find(op);
  REQUIRE(schema);
  TERN_RETURN_IF_ERROR(infer_node(*schema, ctx));
  KernelFactory factory = schema->reference;
  if (cpu) {
    const auto found = KernelRegistry::global().find(op, "cpu", ctx.inputs[0].dtype);
    REQUIRE(!found.empty());
    factory = found[0];
  }
  TERN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> kernel, factory(ctx));
  DirectRun r;
  r.kernel = kernel->name();
  std::vector<Tensor> outs;
  for (const TensorInfo& o : ctx.outputs) {
    TERN_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(o.dtype, o.shape));
    outs.push_back(std::move(t));
  }
  KernelArgs args;
  for (const auto& t : ins) args.inputs.push_back(t ? &*t : nullptr);
  for (Tensor& t : outs) args.outputs.push_back(&t);
  std::vector<float> scratch(kernel->workspace_bytes() / sizeof(float) + 16);
  args.workspace =
      reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(scratch.data()) + 63) / 64 * 64);
  TERN_RETURN_IF_ERROR(kernel->run(args, ExecContext{3}));
  for (const Tensor& t : outs) {
    r.outputs.push_back(ops::to_float32(t));
    r.shapes.push_back(t.shape());
    r.dtypes.push_back(t.dtype());
  }
  return r;
}

// |got - want| <= atol + rtol * |want| everywhere.
void check_close(const std::vector<float>& got, const std::vector<double>& want, double rtol,
                 double atol) {
  REQUIRE(got.size() == want.size());
  size_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(got[i] - want[i]);
    if (!(d <= atol + rtol * std::fabs(want[i]))) ++bad;
    worst = std::max(worst, d);
  }
  CAPTURE(worst);
  CHECK(bad == 0);
}

// ---- LinearAttention ----------------------------------------------------------------------------

struct LinearCase {
  std::string rule;
  int64_t B, T, Hq, Hkv, dk, dv;
  bool past, per_key_decay, shared_beta;
  float scale;  // 0: 1/sqrt(dk)
};

// The recurrence as the ONNX spec states it, in double: state[b][h][d][m].
struct LinearWant {
  std::vector<double> out, state;
};
LinearWant naive_linear(const LinearCase& c, const std::vector<float>& q,
                        const std::vector<float>& k, const std::vector<float>& v,
                        const std::vector<float>& past, const std::vector<float>& g,
                        const std::vector<float>& beta) {
  const bool gated = c.rule == "gated" || c.rule == "gated_delta";
  const bool delta = c.rule == "delta" || c.rule == "gated_delta";
  const double scale = c.scale != 0 ? c.scale : 1 / std::sqrt(double(c.dk));
  LinearWant w;
  w.out.assign(size_t(c.B * c.T * c.Hq * c.dv), 0);
  w.state.assign(size_t(c.B * c.Hkv * c.dk * c.dv), 0);
  if (c.past) std::copy(past.begin(), past.end(), w.state.begin());
  auto S = [&](int64_t b, int64_t h, int64_t d, int64_t m) -> double& {
    return w.state[size_t(((b * c.Hkv + h) * c.dk + d) * c.dv + m)];
  };
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t t = 0; t < c.T; ++t) {
      for (int64_t h = 0; h < c.Hkv; ++h) {
        auto K = [&](int64_t d) {
          return double(k[size_t(((b * c.T + t) * c.Hkv + h) * c.dk + d)]);
        };
        std::vector<double> u(static_cast<size_t>(c.dv));
        for (int64_t m = 0; m < c.dv; ++m) u[m] = v[size_t(((b * c.T + t) * c.Hkv + h) * c.dv + m)];
        if (gated) {
          for (int64_t d = 0; d < c.dk; ++d) {
            const double gd = c.per_key_decay ? g[size_t(((b * c.T + t) * c.Hkv + h) * c.dk + d)]
                                              : g[size_t((b * c.T + t) * c.Hkv + h)];
            for (int64_t m = 0; m < c.dv; ++m) S(b, h, d, m) *= std::exp(gd);
          }
        }
        if (delta) {
          const double bb =
              beta[size_t((b * c.T + t) * (c.shared_beta ? 1 : c.Hkv) + (c.shared_beta ? 0 : h))];
          for (int64_t m = 0; m < c.dv; ++m) {
            double r = 0;
            for (int64_t d = 0; d < c.dk; ++d) r += S(b, h, d, m) * K(d);
            u[m] = bb * (u[m] - r);
          }
        }
        for (int64_t d = 0; d < c.dk; ++d) {
          for (int64_t m = 0; m < c.dv; ++m) S(b, h, d, m) += K(d) * u[m];
        }
      }
      for (int64_t hq = 0; hq < c.Hq; ++hq) {
        const int64_t h = hq / (c.Hq / c.Hkv);
        for (int64_t m = 0; m < c.dv; ++m) {
          double acc = 0;
          for (int64_t d = 0; d < c.dk; ++d) {
            acc += q[size_t(((b * c.T + t) * c.Hq + hq) * c.dk + d)] * S(b, h, d, m);
          }
          w.out[size_t(((b * c.T + t) * c.Hq + hq) * c.dv + m)] = scale * acc;
        }
      }
    }
  }
  return w;
}

struct LinearData {
  std::vector<float> q, k, v, past, g, beta;
};
LinearData random_linear(const LinearCase& c, DType t, std::mt19937& rng) {
  LinearData d;
  d.q = rounded(t, uniform(c.B * c.T * c.Hq * c.dk, -1, 1, rng));
  d.k = uniform(c.B * c.T * c.Hkv * c.dk, -1, 1, rng);
  // Unit keys (the delta rules' assumption) keep the state bounded.
  for (int64_t r = 0; r < c.B * c.T * c.Hkv; ++r) {
    double n = 0;
    for (int64_t i = 0; i < c.dk; ++i) n += double(d.k[r * c.dk + i]) * d.k[r * c.dk + i];
    for (int64_t i = 0; i < c.dk; ++i) d.k[r * c.dk + i] /= float(std::sqrt(n) + 1e-6);
  }
  d.k = rounded(t, d.k);
  d.v = rounded(t, uniform(c.B * c.T * c.Hkv * c.dv, -1, 1, rng));
  if (c.past) d.past = rounded(t, uniform(c.B * c.Hkv * c.dk * c.dv, -0.5f, 0.5f, rng));
  d.g = rounded(t, uniform(c.B * c.T * c.Hkv * (c.per_key_decay ? c.dk : 1), -1, 0, rng));
  d.beta = rounded(t, uniform(c.B * c.T * (c.shared_beta ? 1 : c.Hkv), 0, 1, rng));
  return d;
}

Inputs linear_inputs(const LinearCase& c, DType t, const LinearData& d, int64_t t0, int64_t T,
                     const std::optional<Tensor>& past) {
  const bool gated = c.rule == "gated" || c.rule == "gated_delta";
  const bool delta = c.rule == "delta" || c.rule == "gated_delta";
  // Tokens [t0, t0 + T) of a (B, c.T, w) tensor.
  auto slice = [&](const std::vector<float>& all, int64_t w) {
    std::vector<float> s;
    for (int64_t b = 0; b < c.B; ++b) {
      s.insert(s.end(), all.begin() + (b * c.T + t0) * w, all.begin() + (b * c.T + t0 + T) * w);
    }
    return make_float(t, {c.B, T, w}, s);
  };
  Inputs in = {slice(d.q, c.Hq * c.dk),
               slice(d.k, c.Hkv * c.dk),
               slice(d.v, c.Hkv * c.dv),
               past,
               std::nullopt,
               std::nullopt};
  if (gated) in[4] = slice(d.g, c.Hkv * (c.per_key_decay ? c.dk : 1));
  if (delta) in[5] = slice(d.beta, c.shared_beta ? 1 : c.Hkv);
  return in;
}

Attributes linear_attrs(const LinearCase& c) {
  Attributes at;
  at.set("update_rule", attr_string(c.rule));
  at.set("q_num_heads", attr_int(c.Hq));
  at.set("kv_num_heads", attr_int(c.Hkv));
  if (c.scale != 0) at.set("scale", attr_float(c.scale));
  return at;
}

LinearCase random_linear_case(std::mt19937& rng) {
  static const char* rules[] = {"linear", "gated", "delta", "gated_delta"};
  LinearCase c;
  c.rule = rules[rng() % 4];
  c.B = 1 + rng() % 3;
  c.T = 1 + rng() % 6;
  c.Hkv = 1 + rng() % 3;
  c.Hq = c.Hkv * (1 + rng() % 4);  // MHA, GQA and MQA ratios
  c.dk = 1 + rng() % 20;
  c.dv = 1 + rng() % 80;  // past one 64-column block of the CPU kernel
  c.past = rng() % 2;
  c.per_key_decay = rng() % 2;
  c.shared_beta = rng() % 2;
  c.scale = rng() % 3 == 0 ? 0.3f : 0.0f;
  return c;
}

// ---- CausalConvWithState ------------------------------------------------------------------------

std::vector<double> naive_causal_conv(int64_t B, int64_t C, int64_t L, int64_t K,
                                      const std::vector<float>& x, const std::vector<float>& w,
                                      const std::vector<float>* bias,
                                      const std::vector<float>* past, bool silu,
                                      std::vector<double>* state) {
  std::vector<double> y(size_t(B * C * L));
  state->assign(size_t(B * C * (K - 1)), 0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t c = 0; c < C; ++c) {
      // Position p of the prefixed row: past for p < K - 1, then the input.
      auto at = [&](int64_t p) -> double {
        if (p >= K - 1) return x[size_t((b * C + c) * L + p - (K - 1))];
        return past ? (*past)[size_t((b * C + c) * (K - 1) + p)] : 0.0;
      };
      for (int64_t t = 0; t < L; ++t) {
        double acc = bias ? (*bias)[size_t(c)] : 0.0;
        for (int64_t j = 0; j < K; ++j) acc += w[size_t(c * K + j)] * at(t + j);
        y[size_t((b * C + c) * L + t)] = silu ? acc / (1 + std::exp(-acc)) : acc;
      }
      for (int64_t i = 0; i < K - 1; ++i) (*state)[size_t((b * C + c) * (K - 1) + i)] = at(L + i);
    }
  }
  return y;
}

// ---- Attention ----------------------------------------------------------------------------------

// 4-D attention with GQA, a past, a float mask (1, 1, Sq, Skv) and is_causal, in double.
std::vector<double> naive_attention(int64_t B, int64_t Hq, int64_t Hkv, int64_t Sq, int64_t P,
                                    int64_t Sn, int64_t D, const std::vector<float>& q,
                                    const std::vector<float>& k, const std::vector<float>& v,
                                    const std::vector<float>& pk, const std::vector<float>& pv,
                                    const std::vector<float>& mask, bool causal) {
  const int64_t Skv = P + Sn;
  auto key = [&](const std::vector<float>& past, const std::vector<float>& fresh, int64_t b,
                 int64_t h, int64_t j, int64_t d) -> double {
    return j < P ? past[size_t(((b * Hkv + h) * P + j) * D + d)]
                 : fresh[size_t(((b * Hkv + h) * Sn + j - P) * D + d)];
  };
  std::vector<double> y(size_t(B * Hq * Sq * D));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / (Hq / Hkv);
      for (int64_t i = 0; i < Sq; ++i) {
        std::vector<double> s(static_cast<size_t>(Skv));
        double mx = -INFINITY;
        for (int64_t j = 0; j < Skv; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) {
            dot += q[size_t(((b * Hq + h) * Sq + i) * D + d)] * key(pk, k, b, hk, j, d);
          }
          s[j] = dot / std::sqrt(double(D)) + mask[size_t(i * Skv + j)];
          if (causal && j > i + P) s[j] = -INFINITY;
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < Skv; ++j) acc += s[j] * key(pv, v, b, hk, j, d);
          y[size_t(((b * Hq + h) * Sq + i) * D + d)] = acc / sum;
        }
      }
    }
  }
  return y;
}

}  // namespace

TEST_SUITE("ops") {
  TEST_CASE("LinearAttention: CPU and reference kernels equal the recurrence on random shapes") {
    const unsigned seed = std::random_device{}();
    CAPTURE(seed);
    std::mt19937 rng(seed);
    for (int trial = 0; trial < 60; ++trial) {
      const LinearCase c = random_linear_case(rng);
      const DType t = trial % 3 == 0 ? DType::kFloat16 : DType::kFloat32;
      CAPTURE(trial);
      CAPTURE(c.rule);
      CAPTURE(c.B);
      CAPTURE(c.T);
      CAPTURE(c.Hq);
      CAPTURE(c.Hkv);
      CAPTURE(c.dk);
      CAPTURE(c.dv);
      CAPTURE(c.past);
      CAPTURE(c.per_key_decay);
      CAPTURE(c.shared_beta);
      CAPTURE(dtype_name(t));
      const LinearData d = random_linear(c, t, rng);
      const LinearWant want = naive_linear(c, d.q, d.k, d.v, d.past, d.g, d.beta);
      std::optional<Tensor> past;
      if (c.past) past = make_float(t, {c.B, c.Hkv, c.dk, c.dv}, d.past);
      const Inputs in = linear_inputs(c, t, d, 0, c.T, past);
      // float16 outputs carry 11 bits: half an ulp relative, plus the sums' own rounding.
      const double rtol = t == DType::kFloat16 ? 2e-3 : 2e-5,
                   atol = t == DType::kFloat16 ? 2e-3 : 2e-5;
      for (bool cpu : {true, false}) {
        CAPTURE(cpu);
        auto r = run_direct("LinearAttention", linear_attrs(c), in, 2, cpu);
        REQUIRE_MESSAGE(r.has_value(), r.status().message());
        CHECK(r->kernel == (cpu ? "linear_attention" : "reference"));
        CHECK(r->shapes[0] == Shape{c.B, c.T, c.Hq * c.dv});
        CHECK(r->shapes[1] == Shape{c.B, c.Hkv, c.dk, c.dv});
        CHECK(r->dtypes[0] == t);
        check_close(r->outputs[0], want.out, rtol, atol);
        check_close(r->outputs[1], want.state, rtol, atol);
      }
    }
  }

  TEST_CASE("LinearAttention: a prefill then decode steps through the state equal one prefill") {
    const unsigned seed = std::random_device{}();
    CAPTURE(seed);
    std::mt19937 rng(seed);
    for (int trial = 0; trial < 10; ++trial) {
      LinearCase c = random_linear_case(rng);
      c.T = 2 + rng() % 5;
      c.past = false;
      CAPTURE(trial);
      const LinearData d = random_linear(c, DType::kFloat32, rng);
      const LinearWant want = naive_linear(c, d.q, d.k, d.v, d.past, d.g, d.beta);
      const int64_t split = 1 + rng() % (c.T - 1);
      auto first =
          run_direct("LinearAttention", linear_attrs(c),
                     linear_inputs(c, DType::kFloat32, d, 0, split, std::nullopt), 2, true);
      REQUIRE(first.has_value());
      std::vector<double> out(first->outputs[0].begin(), first->outputs[0].end());
      std::vector<float> state = first->outputs[1];
      std::vector<double> tail_out;
      for (int64_t t0 = split; t0 < c.T; ++t0) {
        const Tensor past = make_f32({c.B, c.Hkv, c.dk, c.dv}, state);
        auto step = run_direct("LinearAttention", linear_attrs(c),
                               linear_inputs(c, DType::kFloat32, d, t0, 1, past), 2, true);
        REQUIRE(step.has_value());
        state = step->outputs[1];
        // Token t0 of every batch.
        const int64_t w = c.Hq * c.dv;
        std::vector<double> merged;
        for (int64_t b = 0; b < c.B; ++b) {
          merged.insert(merged.end(), out.begin() + b * (t0 * w), out.begin() + (b + 1) * (t0 * w));
          merged.insert(merged.end(), step->outputs[0].begin() + b * w,
                        step->outputs[0].begin() + (b + 1) * w);
        }
        out = merged;
      }
      check_close(std::vector<float>(out.begin(), out.end()), want.out, 2e-5, 2e-5);
      check_close(state, want.state, 2e-5, 2e-5);
    }
  }

  TEST_CASE("CausalConvWithState: CPU and reference kernels equal a plain convolution") {
    const unsigned seed = std::random_device{}();
    CAPTURE(seed);
    std::mt19937 rng(seed);
    for (int trial = 0; trial < 40; ++trial) {
      const int64_t B = 1 + rng() % 3, C = 1 + rng() % 9, L = 1 + rng() % 20, K = 1 + rng() % 5;
      const bool has_bias = rng() % 2, has_past = rng() % 2, silu = rng() % 2;
      const DType t = trial % 3 == 0 ? DType::kFloat16 : DType::kFloat32;
      CAPTURE(trial);
      CAPTURE(B);
      CAPTURE(C);
      CAPTURE(L);
      CAPTURE(K);
      CAPTURE(has_bias);
      CAPTURE(has_past);
      CAPTURE(silu);
      CAPTURE(dtype_name(t));
      const auto x = rounded(t, uniform(B * C * L, -1, 1, rng));
      const auto w = rounded(t, uniform(C * K, -1, 1, rng));
      const auto bias = rounded(t, uniform(C, -1, 1, rng));
      const auto past = rounded(t, uniform(B * C * (K - 1), -1, 1, rng));
      std::vector<double> want_state;
      const auto want = naive_causal_conv(B, C, L, K, x, w, has_bias ? &bias : nullptr,
                                          has_past ? &past : nullptr, silu, &want_state);
      Inputs in = {make_float(t, {B, C, L}, x), make_float(t, {C, 1, K}, w), std::nullopt,
                   std::nullopt};
      if (has_bias) in[2] = make_float(t, {C}, bias);
      if (has_past) in[3] = make_float(t, {B, C, K - 1}, past);
      Attributes at;
      if (silu) at.set("activation", attr_string(rng() % 2 ? "silu" : "swish"));
      const double tol = t == DType::kFloat16 ? 4e-3 : 1e-5;
      for (bool cpu : {true, false}) {
        CAPTURE(cpu);
        auto r = run_direct("CausalConvWithState", at, in, 2, cpu);
        REQUIRE_MESSAGE(r.has_value(), r.status().message());
        CHECK(r->shapes[1] == Shape{B, C, K - 1});
        check_close(r->outputs[0], want, tol, tol);
        check_close(r->outputs[1], want_state, 0, 0);  // copied values
      }
    }
  }

  TEST_CASE("Attention with float16 operands: MATH, FLASH and the reference equal float32 math") {
    const unsigned seed = std::random_device{}();
    CAPTURE(seed);
    std::mt19937 rng(seed);
    for (int trial = 0; trial < 12; ++trial) {
      const int64_t B = 1 + rng() % 2, Hkv = 1 + rng() % 2, Hq = Hkv * (1 + rng() % 3);
      const int64_t Sq = 1 + rng() % 5, P = rng() % 2 ? 0 : 1 + rng() % 6, Sn = Sq;
      const int64_t D = 1 + rng() % 24, Skv = P + Sn;
      const bool causal = rng() % 2;
      const DType t = trial % 2 ? DType::kFloat16 : DType::kBFloat16;
      CAPTURE(trial);
      CAPTURE(B);
      CAPTURE(Hq);
      CAPTURE(Hkv);
      CAPTURE(Sq);
      CAPTURE(P);
      CAPTURE(D);
      CAPTURE(causal);
      const auto q = rounded(t, uniform(B * Hq * Sq * D, -1, 1, rng));
      const auto k = rounded(t, uniform(B * Hkv * Sn * D, -1, 1, rng));
      const auto v = rounded(t, uniform(B * Hkv * Sn * D, -1, 1, rng));
      const auto pk = rounded(t, uniform(B * Hkv * P * D, -1, 1, rng));
      const auto pv = rounded(t, uniform(B * Hkv * P * D, -1, 1, rng));
      const auto mask = rounded(t, uniform(Sq * Skv, -2, 0, rng));
      const auto want = naive_attention(B, Hq, Hkv, Sq, P, Sn, D, q, k, v, pk, pv, mask, causal);
      Inputs in = {make_float(t, {B, Hq, Sq, D}, q), make_float(t, {B, Hkv, Sn, D}, k),
                   make_float(t, {B, Hkv, Sn, D}, v), make_float(t, {1, 1, Sq, Skv}, mask)};
      if (P) {
        in.push_back(make_float(t, {B, Hkv, P, D}, pk));
        in.push_back(make_float(t, {B, Hkv, P, D}, pv));
      }
      Attributes at;
      if (causal) at.set("is_causal", attr_int(1));
      // One rounding of the output to the type (bfloat16: 8 bits).
      const double tol = t == DType::kFloat16 ? 2e-3 : 1e-2;
      for (int mode = 0; mode < 3; ++mode) {  // MATH alone, FLASH alone, the reference
        CAPTURE(mode);
        FlagOverrides only;
        if (mode < 2) {
          only.set(FlagId::kSdpFlash, mode == 0 ? 0 : 1);
          only.set(FlagId::kSdpMath, mode == 0 ? 1 : 0);
        }
        auto r = run_direct("Attention", at, in, P ? 3 : 1, mode < 2, 23, &only);
        REQUIRE_MESSAGE(r.has_value(), r.status().message());
        if (mode < 2) CHECK(r->kernel.rfind(mode == 0 ? "math." : "flash.", 0) == 0);
        CHECK(r->dtypes[0] == t);
        check_close(r->outputs[0], want, tol, tol);
        if (P) {  // present_key: the past rows, then the new ones, unchanged
          std::vector<double> present;
          for (int64_t bh = 0; bh < B * Hkv; ++bh) {
            present.insert(present.end(), pk.begin() + bh * P * D, pk.begin() + (bh + 1) * P * D);
            present.insert(present.end(), k.begin() + bh * Sn * D, k.begin() + (bh + 1) * Sn * D);
          }
          check_close(r->outputs[1], present, 0, 0);
        }
      }
    }
  }

  TEST_CASE("Attention float16/bfloat16: sdp.allow_fp16_bf16_reduction_math rounds MATH's steps") {
    // A naive attention that rounds the scaled scores and the probabilities to t (PyTorch's math
    // path in reduced precision) when `reduce`, else stays in double.
    auto naive = [](DType t, bool reduce, int64_t H, int64_t S, int64_t D,
                    const std::vector<float>& q, const std::vector<float>& k,
                    const std::vector<float>& v) {
      std::vector<double> y(static_cast<size_t>(H * S * D));
      const double scale = 1.0 / std::sqrt(static_cast<double>(D));
      auto r = [&](double x) {
        return reduce ? static_cast<double>(ops::round_to(t, static_cast<float>(x))) : x;
      };
      auto at = [](const std::vector<float>& m, int64_t i) {
        return static_cast<double>(m[static_cast<size_t>(i)]);
      };
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t i = 0; i < S; ++i) {
          std::vector<double> p(static_cast<size_t>(S));
          double mx = -1e300, sum = 0;
          for (int64_t j = 0; j < S; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < D; ++d)
              dot += at(q, (h * S + i) * D + d) * at(k, (h * S + j) * D + d);
            p[static_cast<size_t>(j)] = r(dot * scale);
            mx = std::max(mx, p[static_cast<size_t>(j)]);
          }
          for (double& x : p) sum += (x = std::exp(x - mx));
          for (double& x : p) x = r(x / sum);
          for (int64_t d = 0; d < D; ++d) {
            double acc = 0;
            for (int64_t j = 0; j < S; ++j)
              acc += p[static_cast<size_t>(j)] * at(v, (h * S + j) * D + d);
            y[static_cast<size_t>((h * S + i) * D + d)] = acc;
          }
        }
      }
      return y;
    };
    const int64_t H = 2, S = 24, D = 16;
    for (DType t : {DType::kFloat16, DType::kBFloat16}) {
      const std::string dtype = dtype_name(t);  // a std::string: doctest prints char* as a pointer
      CAPTURE(dtype);
      std::mt19937 rng(21);
      const auto q = rounded(t, uniform(H * S * D, -2, 2, rng));
      const auto k = rounded(t, uniform(H * S * D, -2, 2, rng));
      const auto v = rounded(t, uniform(H * S * D, -1, 1, rng));
      Inputs in = {make_float(t, {1, H, S, D}, q), make_float(t, {1, H, S, D}, k),
                   make_float(t, {1, H, S, D}, v)};
      std::vector<float> got[2];
      for (int reduce = 0; reduce < 2; ++reduce) {
        CAPTURE(reduce);
        FlagOverrides math;
        math.set(FlagId::kSdpFlash, 0);
        math.set(FlagId::kSdpFp16Bf16ReductionMath, reduce);
        auto res = run_direct("Attention", Attributes{}, in, 1, true, 23, &math);
        REQUIRE_MESSAGE(res.has_value(), res.status().message());
        CHECK((res->kernel.find(".reduced") != std::string::npos) == (reduce == 1));
        got[reduce] = res->outputs[0];
        // Against the reference of its own mode: one rounding of the output to t, plus (reduced)
        // the float32 accumulation of rounded probabilities.
        const auto want = naive(t, reduce == 1, H, S, D, q, k, v);
        const double ulp = t == DType::kFloat16 ? 1.0 / 1024 : 1.0 / 128;
        for (size_t i = 0; i < want.size(); ++i) {
          REQUIRE(std::abs(got[reduce][i] - want[i]) <= ulp * (std::abs(want[i]) + 0.05));
        }
      }
      // The rounding shows: some outputs differ between the two modes.
      size_t differ = 0;
      for (size_t i = 0; i < got[0].size(); ++i) differ += got[0][i] != got[1][i];
      MESSAGE(dtype, ": ", differ, " of ", got[0].size(), " outputs differ when reduced");
      CHECK(differ > 0);
    }
  }
}

TEST_SUITE("bad_input") {
  TEST_CASE("LinearAttention, CausalConvWithState and Attention reject bad inputs by name") {
    std::mt19937 rng(7);
    auto f32 = [&](Shape s) { return random_f32(std::move(s), rng); };
    Attributes at;
    at.set("update_rule", attr_string("linear"));
    at.set("q_num_heads", attr_int(2));
    at.set("kv_num_heads", attr_int(2));
    auto code = [](const Expected<DirectRun>& r) { return r.status().code(); };
    // Key head size differs from the query's.
    auto r = run_direct("LinearAttention", at, {f32({1, 3, 8}), f32({1, 3, 6}), f32({1, 3, 8})}, 2,
                        true);
    CHECK(code(r) == Code::kInvalidArgument);
    CHECK(r.status().message().find("key") != std::string::npos);
    // Integer query.
    Tensor qi = Tensor::allocate(DType::kInt32, {1, 3, 8}).value();
    CHECK(code(run_direct("LinearAttention", at, {qi, f32({1, 3, 8}), f32({1, 3, 8})}, 2, false)) ==
          Code::kUnsupported);
    // float16 query with float32 key.
    Tensor qh = make_float(DType::kFloat16, {1, 3, 8}, std::vector<float>(24, 0.5f));
    CHECK(code(run_direct("LinearAttention", at, {qh, f32({1, 3, 8}), f32({1, 3, 8})}, 2, true)) ==
          Code::kInvalidModel);
    // gated without decay; linear with beta; q heads not a multiple of kv heads.
    Attributes gated = at;
    gated.set("update_rule", attr_string("gated"));
    CHECK(code(run_direct("LinearAttention", gated,
                          {f32({1, 3, 8}), f32({1, 3, 8}), f32({1, 3, 8})}, 2, true)) ==
          Code::kInvalidModel);
    CHECK(code(run_direct("LinearAttention", at,
                          {f32({1, 3, 8}), f32({1, 3, 8}), f32({1, 3, 8}), std::nullopt,
                           std::nullopt, f32({1, 3, 2})},
                          2, true)) == Code::kInvalidModel);
    Attributes odd = at;
    odd.set("q_num_heads", attr_int(3));
    CHECK(code(run_direct("LinearAttention", odd, {f32({1, 3, 9}), f32({1, 3, 8}), f32({1, 3, 8})},
                          2, true)) == Code::kInvalidModel);
    // past_state of the wrong shape; an unknown rule.
    CHECK(code(run_direct("LinearAttention", at,
                          {f32({1, 3, 8}), f32({1, 3, 8}), f32({1, 3, 8}), f32({1, 2, 4, 3})}, 2,
                          true)) == Code::kInvalidArgument);
    Attributes unknown = at;
    unknown.set("update_rule", attr_string("softmax"));
    CHECK(code(run_direct("LinearAttention", unknown,
                          {f32({1, 3, 8}), f32({1, 3, 8}), f32({1, 3, 8})}, 2, true)) ==
          Code::kInvalidModel);

    // CausalConvWithState: weight not (C, 1, k); past_state of the wrong length; bad activation.
    CHECK(code(run_direct("CausalConvWithState", {}, {f32({1, 4, 8}), f32({4, 2, 3})}, 2, true)) ==
          Code::kInvalidArgument);
    CHECK(code(run_direct("CausalConvWithState", {},
                          {f32({1, 4, 8}), f32({4, 1, 3}), std::nullopt, f32({1, 4, 3})}, 2,
                          true)) == Code::kInvalidArgument);
    Attributes relu;
    relu.set("activation", attr_string("relu"));
    CHECK(code(run_direct("CausalConvWithState", relu, {f32({1, 4, 8}), f32({4, 1, 3})}, 2,
                          true)) == Code::kInvalidModel);
    Tensor xi = Tensor::allocate(DType::kInt64, {1, 4, 8}).value();
    CHECK(code(run_direct("CausalConvWithState", {}, {xi, f32({4, 1, 3})}, 2, false)) ==
          Code::kUnsupported);

    // Attention: float16 Q with float32 K; a float32 mask for float16 Q; a bad softmax_precision.
    Tensor q16 = make_float(DType::kFloat16, {1, 2, 3, 4}, std::vector<float>(24, 0.5f));
    Tensor k16 = q16;
    CHECK(code(run_direct("Attention", {}, {q16, f32({1, 2, 3, 4}), f32({1, 2, 3, 4})}, 1, true,
                          23)) == Code::kInvalidModel);
    CHECK(code(run_direct("Attention", {}, {q16, k16, k16, f32({3, 3})}, 1, true, 23)) ==
          Code::kUnsupported);
    Attributes prec;
    prec.set("softmax_precision", attr_int(7));
    CHECK(code(run_direct("Attention", prec, {q16, k16, k16}, 1, true, 23)) == Code::kInvalidModel);

    // Through a session too: a status, not a crash.
    SingleOp s{"LinearAttention", at, {qi, f32({1, 3, 8}), f32({1, 3, 8})}, {}, 27, 2};
    CHECK(s.run().status().code() == Code::kUnsupported);
  }
}
