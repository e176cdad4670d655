// LSTM, GRU and RNN: the CPU kernel (backends/cpu/kernels/recurrent.cpp) against the reference in
// ops/recurrent.cpp over random configurations (every attribute: directions, layouts, sequence
// lengths, initial states, peepholes, clip, input_forget, linear_before_reset, activations with
// alpha/beta; constant and run-time weights) at every ISA, with the seed printed; the vectorised
// tanh against std::tanh; and a 2-layer bidirectional LSTM model through a session.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

#include "backends/cpu/vec/vec.h"
#include "backends/registry.h"
#include "backends_util.h"
#include "core/op_registry.h"
#include "ops/recurrent.h"
#include "test_util.h"

using namespace tern;
using namespace tern_test;

namespace {

struct Case {
  std::string op;
  Attributes attrs;
  std::vector<std::optional<Tensor>> inputs;  // by slot; nullopt: omitted
  std::vector<bool> constant;                 // W, R... known while planning
  int outputs = 2;
};

// Runs `kernel` for the case's inputs; fresh outputs of the inferred shapes.
std::vector<Tensor> run_one(const Kernel& kernel, const OpContext& ctx, const Case& c,
                            int threads) {
  KernelArgs args;
  for (const auto& t : c.inputs) args.inputs.push_back(t ? &*t : nullptr);
  std::vector<Tensor> outs;
  for (const TensorInfo& o : ctx.outputs) {
    // NaN-filled: a kernel that leaves an element unwritten fails the comparison.
    Tensor t = Tensor::allocate(o.dtype, o.shape).value();
    std::fill(t.data<float>(), t.data<float>() + t.numel(), std::nanf(""));
    outs.push_back(std::move(t));
  }
  for (Tensor& t : outs) args.outputs.push_back(&t);
  std::shared_ptr<void> ws = aligned_buffer(kernel.workspace_bytes() + 64);  // as the executor's
  args.workspace = ws.get();
  const Status st = kernel.run(args, ExecContext{threads});
  REQUIRE_MESSAGE(st.is_ok(), st.message());
  return outs;
}

// The CPU kernel's and the reference's outputs for the case; the kernel's name in *name.
void compare(const Case& c, int threads, std::string* name) {
  Node node{"k", c.op, "", {}, {}, c.attrs};
  OpContext ctx;
  ctx.node = &node;
  ctx.where = "node 'k' (" + c.op + ")";
  ctx.opset = 22;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const auto& t = c.inputs[i];
    TensorInfo info{t.has_value(), t ? t->dtype() : DType::kUndefined, t ? t->shape() : Shape{},
                    t && c.constant[i] ? &*t : nullptr};
    info.graph_constant = info.value != nullptr;
    ctx.inputs.push_back(info);
    ctx.input_names.push_back("in" + std::to_string(i));
  }
  ctx.outputs.assign(static_cast<size_t>(c.outputs), TensorInfo{true, DType::kUndefined, {}});
  const OpSchema* schema = OpRegistry::global().find(c.op);
  const Status inferred = infer_node(*schema, ctx);
  REQUIRE_MESSAGE(inferred.is_ok(), inferred.message());
  auto fast = backends::get("cpu").value()->prepare(ctx);
  REQUIRE_MESSAGE(fast.has_value(), fast.status().message());
  *name = (*fast)->name();
  auto ref = schema->reference(ctx);
  REQUIRE(ref.has_value());
  const auto got = run_one(**fast, ctx, c, threads);
  const auto want = run_one(**ref, ctx, c, 1);
  for (size_t o = 0; o < got.size(); ++o) {
    CAPTURE(o);
    REQUIRE(got[o].shape() == want[o].shape());
    // float32 against double: 1e-3 relative, and 1e-4 of the output's largest magnitude (the
    // unbounded activations, Relu or Affine, let states grow over the steps, and the rounding
    // of every step with them).
    double scale = 1.0;
    for (int64_t i = 0; i < want[o].numel(); ++i) {
      scale = std::max(scale, std::fabs(static_cast<double>(want[o].data<float>()[i])));
    }
    if (!std::isfinite(scale)) continue;  // a state that overflowed float: nothing to compare
    double worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < got[o].numel(); ++i) {
      const double a = got[o].data<float>()[i], b = want[o].data<float>()[i];
      const double err = std::isnan(a) != std::isnan(b)
                             ? 1e9
                             : std::fabs(a - b) / (1e-4 * scale + 1e-3 * std::fabs(b));
      if (err > worst) worst = err, at = i;
    }
    CHECK_MESSAGE(worst <= 1.0, "element ", at, ": ", got[o].data<float>()[at], " vs ",
                  want[o].data<float>()[at]);
  }
}

Tensor uniform(Shape shape, std::mt19937& rng, float lo, float hi) {
  Tensor t = Tensor::allocate(DType::kFloat32, std::move(shape)).value();
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

Case random_case(std::mt19937& rng) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  Case c;
  const int kind = pick(3);
  c.op = kind == 0 ? "LSTM" : kind == 1 ? "GRU" : "RNN";
  const int64_t G = kind == 0 ? 4 : kind == 1 ? 3 : 1;
  const int64_t seq = 1 + pick(9), batch = 1 + pick(3), in = 1 + pick(20), H = 1 + pick(40);
  const char* dirs_names[] = {"forward", "reverse", "bidirectional"};
  const int di = pick(3);
  const int64_t dirs = di == 2 ? 2 : 1;
  const int64_t layout = pick(2);
  c.attrs.set("direction", attr_string(dirs_names[di]));
  c.attrs.set("hidden_size", attr_int(H));
  if (layout) c.attrs.set("layout", attr_int(1));
  if (pick(4) == 0) c.attrs.set("clip", attr_float(1.5f));
  if (kind == 0 && pick(4) == 0) c.attrs.set("input_forget", attr_int(1));
  if (kind == 1 && pick(2) == 0) c.attrs.set("linear_before_reset", attr_int(1));
  if (pick(4) == 0) {  // other activations, with alpha/beta
    std::vector<std::string> acts;
    const char* choice[] = {"Sigmoid",  "Tanh",       "Relu",   "HardSigmoid", "LeakyRelu",
                            "Softsign", "ScaledTanh", "Affine", "Elu"};
    const int per = kind == 0 ? 3 : kind == 1 ? 2 : 1;
    for (int k = 0; k < per * dirs; ++k) acts.push_back(choice[pick(9)]);
    c.attrs.set("activations", attr_strings(acts));
    c.attrs.set("activation_alpha", attr_floats({0.3f, 0.7f, 1.2f}));
    c.attrs.set("activation_beta", attr_floats({0.4f, 0.1f}));
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(in + H));
  c.inputs.resize(kind == 0 ? 8 : 6);
  c.constant.assign(c.inputs.size(), false);
  c.inputs[0] = uniform(layout ? Shape{batch, seq, in} : Shape{seq, batch, in}, rng, -1, 1);
  c.inputs[1] = uniform({dirs, G * H, in}, rng, -2 * scale, 2 * scale);
  c.inputs[2] = uniform({dirs, G * H, H}, rng, -2 * scale, 2 * scale);
  c.constant[1] = pick(3) != 0;
  c.constant[2] = pick(3) != 0;
  if (pick(3)) c.inputs[3] = uniform({dirs, 2 * G * H}, rng, -0.5f, 0.5f);
  if (pick(3) == 0) {
    Tensor lens = Tensor::allocate(DType::kInt32, {batch}).value();
    for (int64_t b = 0; b < batch; ++b) lens.data<int32_t>()[b] = pick(static_cast<int>(seq) + 1);
    c.inputs[4] = lens;
  }
  const Shape state = layout ? Shape{batch, dirs, H} : Shape{dirs, batch, H};
  if (pick(2)) c.inputs[5] = uniform(state, rng, -1, 1);
  if (kind == 0) {
    if (pick(2)) c.inputs[6] = uniform(state, rng, -1, 1);
    if (pick(2)) c.inputs[7] = uniform({dirs, 3 * H}, rng, -0.5f, 0.5f);
    c.outputs = 3;
  }
  return c;
}

}  // namespace

TEST_SUITE("cpu_kernels") {
  TEST_CASE("recurrent: LSTM, GRU and RNN match the reference over random configurations") {
    FlagRestore restore;
    const char* env_seed = std::getenv("TERN_TEST_SEED");
    const unsigned seed =
        env_seed ? static_cast<unsigned>(std::stoul(env_seed)) : std::random_device{}();
    CAPTURE(seed);
    std::mt19937 rng(seed);
    for (const char* cap : {"AVX512", "AVX2", "DEFAULT"}) {
      CAPTURE(cap);
      REQUIRE(tern_flag_set("cpu.max_capability", cap) == TERN_OK);
      for (int i = 0; i < 60; ++i) {
        CAPTURE(i);
        const Case c = random_case(rng);
        CAPTURE(c.op);
        std::string name;
        compare(c, 1 + i % 2, &name);
        CHECK(name.rfind("recurrent", 0) == 0);
      }
    }
  }

  TEST_CASE("recurrent: the vectorised tanh against std::tanh at every ISA") {
    std::vector<float> x;
    for (float v = -12.0f; v <= 12.0f; v += 0.000731f) x.push_back(v);
    for (float v : {0.0f, -0.0f, 1e-20f, -3e-8f, 1e-4f, 20.0f, -88.0f}) x.push_back(v);
    for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
      std::vector<float> y(x.size());
      vec_ops(isa).tanh(x.data(), y.data(), static_cast<int64_t>(x.size()));
      double worst_abs = 0, worst_rel = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const double want = std::tanh(static_cast<double>(x[i]));
        worst_abs = std::max(worst_abs, std::fabs(y[i] - want));
        if (std::fabs(want) > 1e-30)
          worst_rel = std::max(worst_rel, std::fabs(y[i] - want) / std::fabs(want));
      }
      MESSAGE(std::string(vec_ops(isa).isa), ": tanh max abs error ", worst_abs, ", max rel error ",
              worst_rel);
      CHECK(worst_abs < 4e-7);
      CHECK(worst_rel < 2e-6);
      float nan_in = std::nanf(""), nan_out = 0;
      vec_ops(isa).tanh(&nan_in, &nan_out, 1);
      CHECK(std::isnan(nan_out));
    }
  }
}
