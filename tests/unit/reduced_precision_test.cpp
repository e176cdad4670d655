// Reduced precision through the optimizer and the CPU kernels: float16 / bfloat16 graphs fuse
// as float32 ones and compute what the same float32 graph computes on the rounded values; the
// cpu.conv.allow_bf16 / cpu.matmul.allow_bf16 flags choose bf16 kernels exactly where the CPU
// runs them natively, within bf16's precision of float32.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "backends/cpu/cpu_capability.h"
#include "backends_util.h"
#include "core/opt/optimizer.h"
#include "graph_builder.h"
#include "test_util.h"
#include "unit/optimizer_harness.h"

using namespace tern;
using namespace tern_test;
using namespace tern_test::optimizer;

TEST_SUITE("optimizer") {
  TEST_CASE("bfloat16 and float16 graphs fuse as float32 ones: GELU, MatMul epilogues, Conv") {
    // x [2,16,6,6] -> Conv+Relu -> Conv -> Add(., relu) -> Relu -> Reshape [2,16,36] ->
    // MatMul W1 + b1 -> GELU (erf form, constants of the graph's type) -> MatMul W2 + b2, all in
    // `dt`; against the same graph in float32 on the widened values.
    auto build = [](DType dt) {
      GraphMaker m;
      m.g.opset = 13;
      auto c = [&](const std::string& name, const Tensor& t) {
        return m.constant(name, dt == DType::kFloat32 ? t : to_half_type(t, dt));
      };
      Attributes pads;
      pads.set("pads", attr_ints({1, 1, 1, 1}));
      int x = m.g.add_value("x", ValueType{dt, true, {{2, ""}, {16, ""}, {6, ""}, {6, ""}}});
      m.g.inputs.push_back(x);
      int r1 = m.node("Relu", {m.node("Conv",
                                      {x, c("w1", random_f32({16, 16, 3, 3}, 51, -0.2f, 0.2f)),
                                       c("b1", random_f32({16}, 52))},
                                      pads)});
      int c2 = m.node("Conv", {r1, c("w2", random_f32({16, 16, 3, 3}, 53, -0.2f, 0.2f))}, pads);
      int r2 = m.node("Relu", {m.node("Add", {c2, r1})});
      int flat = m.node("Reshape", {r2, m.constant("shape", make_i64({3}, {2, 16, 36}))});
      int h =
          m.node("Add", {m.node("MatMul", {flat, c("mw1", random_f32({36, 24}, 54, -0.3f, 0.3f))}),
                         c("mb1", random_f32({24}, 55))});
      int e = m.node("Erf", {m.node("Div", {h, c("sqrt2", make_f32({}, {1.4142135f}))})});
      int gelu =
          m.node("Mul", {m.node("Mul", {h, m.node("Add", {e, c("one", make_f32({}, {1.0f}))})}),
                         c("half", make_f32({}, {0.5f}))});
      m.g.outputs.push_back(
          m.node("Add", {m.node("MatMul", {gelu, c("mw2", random_f32({24, 8}, 56, -0.3f, 0.3f))}),
                         c("mb2", random_f32({8}, 57))}));
      return m.g;
    };
    Tensor x32 = random_f32({2, 16, 6, 6}, 58, -1.0f, 1.0f);
    for (DType dt : {DType::kBFloat16, DType::kFloat16}) {
      CAPTURE(dtype_name(dt));
      if (!dtype_built(dt)) continue;  // (the minimal build's default types have no bfloat16)
      Graph g = build(dt);
      Graph opt = g;
      OptimizerReport r;
      REQUIRE(optimize_graph(opt, &r).is_ok());
      CHECK(r.activations_fused == 1);  // Conv + Relu; the second Conv feeds the residual Add
      CHECK(r.gelus_fused == 1);        // sqrt 2 is 1.4140625 in bfloat16
      CHECK(r.matmuls_fused == 2);
      CHECK(count_ops(opt, "FusedMatMul") == 2);

      Tensor xh = to_half_type(x32, dt);
      // The float32 graph on the same (rounded) weights and input.
      Graph g32 = build(DType::kFloat32);
      for (Value& v : g32.values) {
        if (v.constant && v.constant->dtype() == DType::kFloat32) {
          v.constant = widen_half_type(to_half_type(*v.constant, dt));
        }
      }
      Tensor x32r = widen_half_type(xh);
      auto run = [](const Graph& graph, const Tensor& in, const std::string& name) {
        auto model = Model::create(graph, nullptr, name).value();
        SessionConfig cfg;
        cfg.backends.push_back(backends::get("cpu").value());
        auto session = Session::create(model, cfg).value();
        auto plan = session->plan_for({in.shape()}).value();
        CHECK(plan->fused_residuals == 1);  // Conv + Add + Relu in the type too
        std::vector<Tensor> out;
        const Graph& sg = session->graph();
        REQUIRE(session->run({"x"}, {&in}, {sg.value_name(sg.outputs[0])}, &out).is_ok());
        return out[0];
      };
      Tensor want = run(g32, x32r, "f32");
      Tensor got = run(g, xh, "half");
      REQUIRE(got.dtype() == dt);
      Tensor gotf = widen_half_type(got);
      // Each node rounds once to the type: a few units in its last place of the largest output.
      float peak = 0;
      for (int64_t i = 0; i < want.numel(); ++i)
        peak = std::max(peak, std::fabs(want.data<float>()[i]));
      const double ulp = dt == DType::kBFloat16 ? 1.0 / 128 : 1.0 / 1024;
      Comparison cmp = compare(gotf.data<float>(), want.data<float>(),
                               static_cast<size_t>(want.numel()), 4 * ulp, 4 * ulp * peak);
      CHECK_MESSAGE(cmp.mismatches == 0, "max abs diff ", cmp.max_abs, " (peak ", peak, ")");
    }
  }

  TEST_CASE("cpu.conv.allow_bf16 / cpu.matmul.allow_bf16: float32 computed in bf16 where native") {
    // x [1,16,10,10] -> Conv 3x3 + Relu -> Conv 1x1 -> Reshape [16,100] -> MatMul [100,24]
    //   -> Gemm (transB) [24 -> 10] + bias: float32 throughout.
    GraphMaker m;
    m.g.opset = 13;
    int x = m.g.add_value(
        "x", ValueType{DType::kFloat32, true, {{1, ""}, {16, ""}, {10, ""}, {10, ""}}});
    m.g.inputs.push_back(x);
    Attributes pads, trans_b;
    pads.set("pads", attr_ints({1, 1, 1, 1}));
    trans_b.set("transB", attr_int(1));
    int c1 = m.node(
        "Relu",
        {m.node("Conv", {x, m.constant("w1", random_f32({32, 16, 3, 3}, 61, -0.2f, 0.2f))}, pads)});
    int c2 = m.node("Conv", {c1, m.constant("w2", random_f32({16, 32, 1, 1}, 62, -0.3f, 0.3f))});
    int flat = m.node("Reshape", {c2, m.constant("shape", make_i64({2}, {16, 100}))});
    int mm = m.node("MatMul", {flat, m.constant("w3", random_f32({100, 24}, 63, -0.2f, 0.2f))});
    int y = m.node("Gemm",
                   {mm, m.constant("w4", random_f32({10, 24}, 64, -0.3f, 0.3f)),
                    m.constant("b4", random_f32({10}, 65))},
                   trans_b);
    m.g.outputs.push_back(y);
    Tensor in = random_f32({1, 16, 10, 10}, 66);
    auto model = Model::create(m.g, nullptr, "bf16flag").value();
    const bool native = tern_onednn_is_available() && cpu_features().avx512_bf16 &&
                        std::string(tern_cpu_get_capability()) == "AVX512";
    std::vector<Tensor> outs[3];
    for (int mode = 0; mode < 3; ++mode) {  // off; conv only; both
      SessionConfig cfg;
      cfg.backends.push_back(backends::get("cpu").value());
      cfg.overrides.set(FlagId::kCpuConvAllowBf16, mode >= 1);
      cfg.overrides.set(FlagId::kCpuMatmulAllowBf16, mode >= 2);
      auto session = Session::create(model, cfg).value();
      auto plan = session->plan_for({{1, 16, 10, 10}}).value();
      int convs = 0, matmuls = 0;
      for (const PlanStep& st : plan->steps) {
        const std::string k = st.kernel->name(), op = st.op_node ? st.op_node->op_type : "";
        const bool bf16 = k.size() > 5 && k.compare(k.size() - 5, 5, " bf16") == 0;
        CAPTURE(op);
        CAPTURE(k);
        if (op.find("Conv") != std::string::npos) {
          ++convs;
          CHECK(bf16 == (native && mode >= 1));
        } else if (op == "MatMul" || op == "Gemm" || op == "FusedMatMul") {
          ++matmuls;
          CHECK(bf16 == (native && mode >= 2));
        }
      }
      CHECK(convs == 2);
      CHECK(matmuls == 2);
      REQUIRE(session->run({"x"}, {&in}, {m.g.value_name(y)}, &outs[mode]).is_ok());
    }
    // bf16 inputs (8 significant bits), float32 sums: within a few bf16 units of the float32
    // result's scale.
    float peak = 0;
    for (int64_t i = 0; i < outs[0][0].numel(); ++i) {
      peak = std::max(peak, std::fabs(outs[0][0].data<float>()[i]));
    }
    for (int mode = 1; mode < 3; ++mode) {
      Comparison cmp = compare(outs[mode][0].data<float>(), outs[0][0].data<float>(),
                               static_cast<size_t>(outs[0][0].numel()), 0.0, 0.03 * peak);
      CHECK_MESSAGE(cmp.mismatches == 0, "mode ", mode, ": max abs diff ", cmp.max_abs, " of ",
                    peak);
    }
  }
}
