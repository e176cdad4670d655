// Graph optimizer passes and plan-time fusion/layouts: each rewrite changes the graph (checked
// by counting node kinds) and not the outputs (checked against the same ops run one at a time,
// as one-node graphs that nothing can fuse).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backends_util.h"
#include "core/opt/fused_activation.h"
#include "core/opt/graph_util.h"
#include "core/opt/optimizer.h"
#include "graph_builder.h"
#include "serialization/model_io.h"
#include "test_util.h"
#include "unit/optimizer_harness.h"

using namespace tern;
using namespace tern_test;
using namespace tern_test::optimizer;

namespace {

// x [1,16,8,8] -> Conv -> BatchNormalization -> Relu -> Conv -> Add(., relu) -> Relu
//   -> x * clip(x + 3, 0, 6) / 6 -> GlobalAveragePool -> y ; plus an unused Sigmoid(x).
// Builds a graph node by node: constants, and nodes with one fresh output each.
struct ChainGraph : GraphMaker {
  Tensor w1 = random_f32({16, 16, 3, 3}, 11, -0.3f, 0.3f), b1 = random_f32({16}, 12);
  Tensor w2 = random_f32({16, 16, 3, 3}, 13, -0.3f, 0.3f);
  Tensor scale = random_f32({16}, 14, 0.5f, 1.5f), shift = random_f32({16}, 15);
  Tensor mean = random_f32({16}, 16), var = random_f32({16}, 17, 0.5f, 2.0f);
  Tensor three = make_f32({}, {3.0f}), zero = make_f32({}, {0.0f}), six = make_f32({}, {6.0f});
  Attributes conv_attrs;

  ChainGraph() {
    g.opset = 13;
    conv_attrs.set("pads", attr_ints({1, 1, 1, 1}));
    ValueType type{DType::kFloat32, true, {{1, ""}, {16, ""}, {8, ""}, {8, ""}}};
    int x = g.add_value("x", type);
    g.inputs.push_back(x);
    int c1 = node("Conv", {x, constant("w1", w1), constant("b1", b1)}, conv_attrs);
    int bn = node("BatchNormalization", {c1, constant("s", scale), constant("sh", shift),
                                         constant("m", mean), constant("v", var)});
    int r1 = node("Relu", {bn});
    int c2 = node("Conv", {r1, constant("w2", w2)}, conv_attrs);
    int add = node("Add", {c2, r1});
    int r2 = node("Relu", {add});
    int a3 = node("Add", {r2, constant("three", three)});
    int clip = node("Clip", {a3, constant("zero", zero), constant("six", six)});
    int mul = node("Mul", {r2, clip});
    int hs = node("Div", {mul, constant("six2", six)});
    int y = node("GlobalAveragePool", {hs});
    node("Sigmoid", {x});  // dead
    g.outputs.push_back(y);
  }
};

}  // namespace

TEST_SUITE("optimizer") {
  TEST_CASE(
      "passes rewrite the graph: BN folded, HardSwish found, activations fused, dead removed") {
    ChainGraph c;
    Graph g = c.g;
    OptimizerReport r;
    REQUIRE(optimize_graph(g, &r).is_ok());
    CHECK(r.batch_norms_folded == 1);
    CHECK(r.hardswish_fused == 1);
    CHECK(r.activations_fused == 1);  // Conv+Relu; the second Conv feeds the residual Add
    CHECK(r.dead_nodes_removed == 1);
    CHECK(count_ops(g, "BatchNormalization") == 0);
    CHECK(count_ops(g, "Sigmoid") == 0);
    CHECK(count_ops(g, "FusedConv") == 1);
    CHECK(count_ops(g, "HardSwish") == 1);
    CHECK(count_ops(g, "Clip") == 0);
    CHECK(g.nodes.size() == 6);  // FusedConv, Conv, Add, Relu, HardSwish, GlobalAveragePool
    // A conv output read twice is not fused with its activation.
    ChainGraph d;
    d.g.nodes.push_back(Node{"extra", "Identity", "", {d.g.nodes[0].outputs[0]}, {}, {}});
    int extra = d.g.add_value("extra_out");
    d.g.nodes.back().outputs = {extra};
    d.g.outputs.push_back(extra);
    OptimizerReport r2;
    REQUIRE(optimize_graph(d.g, &r2).is_ok());
    CHECK(r2.batch_norms_folded == 0);
  }

  TEST_CASE("the optimized session computes what the ops compute one by one") {
    ChainGraph c;
    Tensor x = random_f32({1, 16, 8, 8}, 3);
    // One op at a time: nothing to fuse.
    Attributes bn_attrs;
    Tensor t = one("Conv", {x}, {c.w1, c.b1}, c.conv_attrs);
    t = one("BatchNormalization", {t}, {c.scale, c.shift, c.mean, c.var}, bn_attrs);
    Tensor r1 = one("Relu", {t}, {});
    t = one("Conv", {r1}, {c.w2}, c.conv_attrs);
    t = one("Add", {t, r1}, {});
    Tensor r2 = one("Relu", {t}, {});
    t = one("Add", {r2}, {c.three});
    t = one("Clip", {t}, {c.zero, c.six});
    t = one("Mul", {r2, t}, {});
    t = one("Div", {t}, {c.six});
    Tensor want = one("GlobalAveragePool", {t}, {});

    auto model = Model::create(c.g, nullptr, "chain").value();
    SessionConfig cfg;
    cfg.backends.push_back(backends::get("cpu").value());
    auto session = Session::create(model, cfg).value();
    const OptimizerReport& r = session->optimizer_report();
    CHECK(r.batch_norms_folded == 1);
    auto plan = session->plan_for({{1, 16, 8, 8}}).value();
    CHECK(plan->fused_residuals == 1);  // Conv + Add + Relu as one step
    std::vector<Tensor> out;
    REQUIRE(session->run({"x"}, {&x}, {session->graph().value_name(c.g.outputs[0])}, &out).is_ok());
    REQUIRE(out[0].shape() == want.shape());
    Comparison cmp = compare(out[0].data<float>(), want.data<float>(),
                             static_cast<size_t>(want.numel()), 1e-4, 1e-5);
    CHECK_MESSAGE(cmp.mismatches == 0, "max abs diff ", cmp.max_abs);
    // With oneDNN and AVX2 or better the chain runs channel-blocked, reordered once at its end.
    if (tern_onednn_is_available() && std::string(tern_cpu_get_capability()) != "DEFAULT") {
      int blocked = 0;
      for (const PlannedValue& v : plan->values) blocked += v.block > 0;
      CHECK(blocked >= 2);  // conv 1's output and the fused Conv+Add+Relu+HardSwish output
      CHECK(plan->reorders <= 1);
    }
  }

  TEST_CASE("a scalar affine / activation chain after a Conv becomes one FusedConv epilogue") {
    // Conv -> Mul(s1, .) -> Add(., b1) -> HardSwish -> Mul(., s2) -> Add(b2, .) -> Relu ->
    // Mul(., s1) -> Add(., b2) -> y: the learnable affine blocks of PP-LCNet around activations.
    // The first affine folds into the weights; the others join the epilogue (two affines there:
    // oneDNN declines, the portable kernel runs).
    for (int64_t group : {1, 16}) {  // a dense and a depthwise convolution
      CAPTURE(group);
      GraphMaker mk;
      Graph& g = mk.g;
      auto constant = [&](const std::string& name, const Tensor& t) {
        return mk.constant(name, t);
      };
      auto node = [&](const std::string& op, std::vector<int> inputs, Attributes attrs = {}) {
        return mk.node(op, std::move(inputs), std::move(attrs));
      };
      g.opset = 13;
      const int64_t cin = group == 1 ? 8 : 16;
      Tensor w = random_f32({16, cin / group, 3, 3}, 21, -0.3f, 0.3f), b = random_f32({16}, 22);
      Tensor s1 = make_f32({1}, {1.25f}), b1 = make_f32({1}, {-0.5f});
      Tensor s2 = make_f32({1}, {0.75f}), b2 = make_f32({1}, {0.25f});
      Attributes conv_attrs;
      conv_attrs.set("pads", attr_ints({1, 1, 1, 1}));
      Attribute ga;
      ga.kind = Attribute::Kind::kInt;
      ga.i = group;
      conv_attrs.set("group", ga);
      int x = g.add_value("x",
                          ValueType{DType::kFloat32, true, {{1, ""}, {cin, ""}, {9, ""}, {7, ""}}});
      g.inputs.push_back(x);
      int c = node("Conv", {x, constant("w", w), constant("b", b)}, conv_attrs);
      int m1 = node("Mul", {constant("s1", s1), c});
      int a1 = node("Add", {m1, constant("b1", b1)});
      int hs = node("HardSwish", {a1});
      int m2 = node("Mul", {hs, constant("s2", s2)});
      int a2 = node("Add", {constant("b2", b2), m2});
      int rl = node("Relu", {a2});
      int m3 = node("Mul", {rl, constant("s1b", s1)});
      int y = node("Add", {m3, constant("b2b", b2)});
      g.outputs.push_back(y);

      Graph opt = g;
      OptimizerReport r;
      REQUIRE(optimize_graph(opt, &r).is_ok());
      CHECK(r.activations_fused == 8);
      REQUIRE(opt.nodes.size() == 1);
      CHECK(opt.nodes[0].op_type == "FusedConv");
      CHECK(opt.nodes[0].inputs[1] != g.nodes[0].inputs[1]);  // scaled weights
      // A Mul and an Add after an activation merge into one Affine.
      CHECK(opt.nodes[0].attrs.get_strings("activations").value() ==
            std::vector<std::string>{"HardSwish", "Affine", "Relu", "Affine"});

      Tensor in = random_f32({1, cin, 9, 7}, 23);
      Tensor t = one("Conv", {in}, {w, b}, conv_attrs);
      t = one("Mul", {t}, {s1});
      t = one("Add", {t}, {b1});
      t = one("HardSwish", {t}, {});
      t = one("Mul", {t}, {s2});
      t = one("Add", {t}, {b2});
      t = one("Relu", {t}, {});
      t = one("Mul", {t}, {s1});
      Tensor want = one("Add", {t}, {b2});
      for (const char* backend : {"reference", "cpu"}) {
        SessionConfig cfg;
        cfg.backends.push_back(backends::get("cpu").value());
        auto model = Model::create(g, nullptr, "affine").value();
        FlagOverrides f;
        if (std::string(backend) == "reference") f.set(FlagId::kDeterministicAlgorithms, 1);
        cfg.overrides = f;
        auto session = Session::create(model, cfg).value();
        std::vector<Tensor> out;
        REQUIRE(session->run({"x"}, {&in}, {g.value_name(y)}, &out).is_ok());
        REQUIRE(out[0].shape() == want.shape());
        Comparison cmp = compare(out[0].data<float>(), want.data<float>(),
                                 static_cast<size_t>(want.numel()), 1e-4, 1e-5);
        CHECK_MESSAGE(cmp.mismatches == 0, backend, ": max abs diff ", cmp.max_abs);
      }
    }
  }

  TEST_CASE("a per-channel Mul (squeeze-excitation) keeps the blocked layout: no reorders") {
    // y = Conv(x) * Sigmoid(Conv1x1(GlobalAveragePool(Conv(x)))) -> Conv
    GraphMaker mk;
    Graph& g = mk.g;
    auto constant = [&](const std::string& name, const Tensor& t) { return mk.constant(name, t); };
    auto node = [&](const std::string& op, std::vector<int> inputs, Attributes attrs = {}) {
      return mk.node(op, std::move(inputs), std::move(attrs));
    };
    g.opset = 13;
    Tensor w1 = random_f32({32, 8, 3, 3}, 31, -0.3f, 0.3f), w2 = random_f32({32, 32, 1, 1}, 32);
    Tensor w3 = random_f32({32, 32, 3, 3}, 33, -0.2f, 0.2f);
    Attributes pads;
    pads.set("pads", attr_ints({1, 1, 1, 1}));
    int x =
        g.add_value("x", ValueType{DType::kFloat32, true, {{1, ""}, {8, ""}, {12, ""}, {10, ""}}});
    g.inputs.push_back(x);
    int c1 = node("Conv", {x, constant("w1", w1)}, pads);
    int se = node("Sigmoid", {node("Conv", {node("GlobalAveragePool", {c1}), constant("w2", w2)})});
    int m = node("Mul", {c1, se});
    int y = node("Conv", {m, constant("w3", w3)}, pads);
    g.outputs.push_back(y);
    Tensor in = random_f32({1, 8, 12, 10}, 34);
    std::vector<Tensor> outs[2];
    for (int det = 0; det < 2; ++det) {  // blocked oneDNN path, then the plain portable one
      SessionConfig cfg;
      cfg.backends.push_back(backends::get("cpu").value());
      if (det) cfg.overrides.set(FlagId::kDeterministicAlgorithms, 1);
      auto session = Session::create(Model::create(g, nullptr, "se").value(), cfg).value();
      auto plan = session->plan_for({{1, 8, 12, 10}}).value();
      if (!det && tern_onednn_is_available() &&
          std::string(tern_cpu_get_capability()) != "DEFAULT") {
        bool channel_kernel = false;
        for (const PlanStep& st : plan->steps) {
          channel_kernel |= std::string(st.kernel->name()) == "blocked_channel";
        }
        CHECK(channel_kernel);
        CHECK(plan->reorders == 0);  // the output conv writes plain itself
      }
      REQUIRE(session->run({"x"}, {&in}, {g.value_name(y)}, &outs[det]).is_ok());
    }
    Comparison cmp = compare(outs[0][0].data<float>(), outs[1][0].data<float>(),
                             static_cast<size_t>(outs[1][0].numel()), 1e-4, 1e-5);
    CHECK_MESSAGE(cmp.mismatches == 0, "max abs diff ", cmp.max_abs);
  }

  TEST_CASE("the decomposed LayerNormalization becomes one node and computes the same") {
    // y = (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * scale + bias over the last axis
    GraphMaker m;
    m.g.opset = 13;
    Attributes last;
    last.set("axes", attr_ints({-1}));
    int x = m.g.add_value("x", ValueType{DType::kFloat32, true, {{2, ""}, {3, ""}, {40, ""}}});
    m.g.inputs.push_back(x);
    Tensor scale = random_f32({40}, 31, 0.5f, 1.5f), bias = random_f32({40}, 32);
    int mean = m.node("ReduceMean", {x}, last);
    int d = m.node("Sub", {x, mean});
    int sq = m.node("Pow", {d, m.constant("two", make_f32({}, {2.0f}))});
    int var = m.node("ReduceMean", {sq}, last);
    int ve = m.node("Add", {var, m.constant("eps", make_f32({}, {1e-5f}))});
    int sd = m.node("Sqrt", {ve});
    int n = m.node("Div", {d, sd});
    int sc = m.node("Mul", {n, m.constant("scale", scale)});
    m.g.outputs.push_back(m.node("Add", {sc, m.constant("bias", bias)}));
    Graph g = m.g;
    OptimizerReport r;
    REQUIRE(optimize_graph(g, &r).is_ok());
    CHECK(r.layer_norms_fused == 1);
    CHECK(g.nodes.size() == 1);
    CHECK(count_ops(g, "LayerNormalization") == 1);
    // The pattern with the centred value read elsewhere too is left alone.
    GraphMaker other = m;
    other.g.outputs.push_back(d);
    OptimizerReport r2;
    REQUIRE(optimize_graph(other.g, &r2).is_ok());
    CHECK(r2.layer_norms_fused == 0);

    Tensor in = random_f32({2, 3, 40}, 33, -3.0f, 3.0f);
    Tensor t = one("ReduceMean", {in}, {}, last);
    Tensor c = one("Sub", {in, t}, {});
    t = one("Pow", {c}, {make_f32({}, {2.0f})});
    t = one("ReduceMean", {t}, {}, last);
    t = one("Add", {t}, {make_f32({}, {1e-5f})});
    t = one("Sqrt", {t}, {});
    t = one("Div", {c, t}, {});
    t = one("Mul", {t}, {scale});
    Tensor want = one("Add", {t}, {bias});
    auto model = Model::create(m.g, nullptr, "ln").value();
    SessionConfig cfg;
    cfg.backends.push_back(backends::get("cpu").value());
    auto session = Session::create(model, cfg).value();
    std::vector<Tensor> out;
    const std::string y = session->graph().value_name(m.g.outputs[0]);
    REQUIRE(session->run({"x"}, {&in}, {y}, &out).is_ok());
    CHECK(session->optimizer_report().layer_norms_fused == 1);
    Comparison cmp = compare(out[0].data<float>(), want.data<float>(),
                             static_cast<size_t>(want.numel()), 1e-4, 1e-5);
    CHECK_MESSAGE(cmp.mismatches == 0, "max abs diff ", cmp.max_abs);
  }

  TEST_CASE("MatMul + bias + GELU (erf form) and + bias + Relu become FusedMatMuls") {
    // x [2,5,8] -> MatMul W1 -> Add b1 -> x*(erf(x/sqrt2)+1)*0.5 -> MatMul W2 -> Add b2 -> Relu
    GraphMaker m;
    m.g.opset = 13;
    int x = m.g.add_value("x", ValueType{DType::kFloat32, true, {{2, ""}, {5, ""}, {8, ""}}});
    m.g.inputs.push_back(x);
    Tensor w1 = random_f32({8, 6}, 41), b1 = random_f32({6}, 42);
    Tensor w2 = random_f32({6, 4}, 43), b2 = random_f32({1, 4}, 44);
    Tensor sqrt2 = make_f32({}, {1.4142135f}), one_ = make_f32({}, {1.0f}),
           half = make_f32({}, {0.5f});
    int h = m.node("Add", {m.constant("b1", b1), m.node("MatMul", {x, m.constant("w1", w1)})});
    int e = m.node("Erf", {m.node("Div", {h, m.constant("sqrt2", sqrt2)})});
    int gelu = m.node("Mul", {m.node("Mul", {h, m.node("Add", {e, m.constant("one", one_)})}),
                              m.constant("half", half)});
    int y2 = m.node("Add", {m.node("MatMul", {gelu, m.constant("w2", w2)}), m.constant("b2", b2)});
    m.g.outputs.push_back(m.node("Relu", {y2}));
    Graph g = m.g;
    OptimizerReport r;
    REQUIRE(optimize_graph(g, &r).is_ok());
    CHECK(r.gelus_fused == 1);
    CHECK(r.matmuls_fused == 2);
    CHECK(g.nodes.size() == 2);
    CHECK(count_ops(g, "FusedMatMul") == 2);

    Tensor in = random_f32({2, 5, 8}, 45, -2.0f, 2.0f);
    Tensor t = one("MatMul", {in}, {w1});
    t = one("Add", {t}, {b1});
    Tensor d = one("Div", {t}, {sqrt2});
    d = one("Erf", {d}, {});
    d = one("Add", {d}, {one_});
    t = one("Mul", {t, d}, {});
    t = one("Mul", {t}, {half});
    t = one("MatMul", {t}, {w2});
    t = one("Add", {t}, {b2});
    Tensor want = one("Relu", {t}, {});
    auto model = Model::create(m.g, nullptr, "mlp").value();
    for (int det = 0; det < 2; ++det) {  // oneDNN with post-ops; OpenBLAS + our epilogue
      SessionConfig cfg;
      cfg.backends.push_back(backends::get("cpu").value());
      if (det) cfg.overrides.set(FlagId::kDeterministicAlgorithms, 1);
      auto session = Session::create(model, cfg).value();
      std::vector<Tensor> out;
      const Graph& sg = session->graph();
      REQUIRE(session->run({"x"}, {&in}, {sg.value_name(sg.outputs[0])}, &out).is_ok());
      Comparison cmp = compare(out[0].data<float>(), want.data<float>(),
                               static_cast<size_t>(want.numel()), 1e-4, 1e-5);
      CHECK_MESSAGE(cmp.mismatches == 0, "deterministic ", det, ": max abs diff ", cmp.max_abs);
    }
  }

  TEST_CASE("element-wise steps write over an input only they read; results unchanged") {
    // x -> Neg -> a ; a -> Tanh -> b ; Mul(b, a) -> c ; Add(c, 1) -> y.
    // a is read by Tanh and Mul: neither may overwrite it. Mul may overwrite b (only it reads
    // b). y is a graph output, never in the arena.
    GraphMaker m;
    m.g.opset = 13;
    int x = m.g.add_value("x", ValueType{DType::kFloat32, true, {{3, ""}, {70, ""}}});
    m.g.inputs.push_back(x);
    int a = m.node("Neg", {x});
    int b = m.node("Tanh", {a});
    int c = m.node("Mul", {b, a});
    m.g.outputs.push_back(m.node("Add", {c, m.constant("one", make_f32({}, {1.0f}))}));
    Tensor in = random_f32({3, 70}, 51, -3.0f, 3.0f);
    std::vector<float> want;
    for (int64_t i = 0; i < in.numel(); ++i) {
      const double av = -static_cast<double>(in.data<float>()[i]);
      want.push_back(static_cast<float>(av * std::tanh(av) + 1.0));
    }
    auto model = Model::create(m.g, nullptr, "chain").value();
    SessionConfig cfg;
    cfg.backends.push_back(backends::get("cpu").value());
    auto session = Session::create(model, cfg).value();
    auto plan = session->plan_for({{3, 70}}).value();
    CHECK(plan->in_place == 1);
    const ArenaLayout& l = plan->layouts[0];
    CHECK(l.value_offset[static_cast<size_t>(c)] == l.value_offset[static_cast<size_t>(b)]);
    CHECK(l.value_offset[static_cast<size_t>(b)] != l.value_offset[static_cast<size_t>(a)]);
    for (int run = 0; run < 2; ++run) {  // the arena is reused: the second run must agree too
      std::vector<Tensor> out;
      REQUIRE(
          session->run({"x"}, {&in}, {session->graph().value_name(m.g.outputs[0])}, &out).is_ok());
      Comparison cmp = compare(out[0].data<float>(), want.data(), want.size(), 1e-5, 1e-6);
      CHECK_MESSAGE(cmp.mismatches == 0, "max abs diff ", cmp.max_abs);
    }
  }

  TEST_CASE("channels-last and blocked convolution layouts compute the same as plain") {
    // x [1,24,10,10] -> Conv 3x3 (32) -> Relu -> Conv 3x3 (48) -> MaxPool 2x2 -> Conv 1x1 (40)
    //   -> GlobalAveragePool: channel counts that are not one vector block.
    GraphMaker m;
    m.g.opset = 13;
    Attributes pad1;
    pad1.set("pads", attr_ints({1, 1, 1, 1}));
    Attributes pool;
    pool.set("kernel_shape", attr_ints({2, 2}));
    pool.set("strides", attr_ints({2, 2}));
    int x = m.g.add_value(
        "x", ValueType{DType::kFloat32, true, {{1, ""}, {24, ""}, {10, ""}, {10, ""}}});
    m.g.inputs.push_back(x);
    int c1 = m.node("Conv",
                    {x, m.constant("w1", random_f32({32, 24, 3, 3}, 21, -0.2f, 0.2f)),
                     m.constant("b1", random_f32({32}, 22))},
                    pad1);
    int r1 = m.node("Relu", {c1});
    int c2 =
        m.node("Conv", {r1, m.constant("w2", random_f32({48, 32, 3, 3}, 23, -0.2f, 0.2f))}, pad1);
    int p1 = m.node("MaxPool", {c2}, pool);
    int c3 = m.node("Conv", {p1, m.constant("w3", random_f32({40, 48, 1, 1}, 24, -0.2f, 0.2f))});
    m.g.outputs.push_back(m.node("GlobalAveragePool", {c3}));
    auto model = Model::create(m.g, nullptr, "layouts").value();
    Tensor in = random_f32({1, 24, 10, 10}, 25);
    auto run = [&](const char* flag, const char* value, std::shared_ptr<const Plan>* plan) {
      SessionConfig cfg;
      cfg.backends.push_back(backends::get("cpu").value());
      REQUIRE(cfg.overrides.set(flag, value, FlagScope::kSession).is_ok());
      auto session = Session::create(model, cfg).value();
      std::vector<Tensor> out;
      const Graph& g = session->graph();
      REQUIRE(session->run({"x"}, {&in}, {g.value_name(g.outputs[0])}, &out).is_ok());
      if (plan) *plan = session->plan_for({{1, 24, 10, 10}}).value();
      return out[0];
    };
    const Tensor want = run("deterministic_algorithms", "1", nullptr);  // plain, portable kernels
    std::shared_ptr<const Plan> blocked_plan, last_plan;
    for (const char* format : {"blocked", "channels_last"}) {
      Tensor got = run("cpu.conv_memory_format", format,
                       std::string(format) == "blocked" ? &blocked_plan : &last_plan);
      Comparison cmp = compare(got.data<float>(), want.data<float>(),
                               static_cast<size_t>(want.numel()), 1e-4, 1e-5);
      CHECK_MESSAGE(cmp.mismatches == 0, format, ": max abs diff ", cmp.max_abs);
    }
    if (tern_onednn_is_available() && std::string(tern_cpu_get_capability()) != "DEFAULT") {
      auto blocks = [](const Plan& p, int id) { return p.values[static_cast<size_t>(id)].block; };
      CHECK(blocks(*last_plan, r1) == 32);  // Conv+Relu; one block of all channels: NHWC
      CHECK(blocks(*last_plan, c2) == 48);
      CHECK(blocks(*last_plan, p1) == 48);
      CHECK(blocks(*last_plan, c3) == 40);
      CHECK((blocks(*blocked_plan, r1) == 16 || blocks(*blocked_plan, r1) == 8));
      CHECK((blocks(*blocked_plan, c3) == 8));
    }
  }

  TEST_CASE("every op with a blocked-layout kernel, followed by every op without one, runs") {
    // Producers whose output a layout choice may block, each followed by a consumer that reads
    // plain data only (or whose blocked kernel declines the case); every pair must plan and
    // compute what the plain layout computes, for each memory format and both opsets.
    auto ints = [](std::vector<int64_t> v) { return attr_ints(std::move(v)); };
    auto pool_attrs = [&](std::vector<int64_t> k, std::vector<int64_t> st) {
      Attributes a;
      a.set("kernel_shape", ints(std::move(k)));
      a.set("strides", ints(std::move(st)));
      return a;
    };
    const char* producers[] = {"Conv",         "Conv+Relu",
                               "Conv+MaxPool", "Conv+AveragePool",
                               "Conv+Add",     "Conv+GlobalAveragePool"};
    const char* consumers[] = {"MaxPool ceil",
                               "MaxPool dilated",
                               "MaxPool 7x7 pad 3",
                               "MaxPool asymmetric pads",
                               "MaxPool end pads 2",
                               "AveragePool asymmetric pads",
                               "Softmax",
                               "Flatten",
                               "Transpose",
                               "ReduceMean",
                               "Exp",
                               "Pad",
                               "Concat",
                               "Slice",
                               "Conv grouped",
                               "GlobalMaxPool",
                               "LRN"};
    size_t pairs = 0;
    for (int64_t opset : {9, 13}) {
      for (const char* producer : producers) {
        for (const char* consumer : consumers) {
          CAPTURE(opset);
          const std::string prod = producer, cons = consumer;
          CAPTURE(prod);
          CAPTURE(cons);
          // A 1x1 map has no room for a pooling window.
          if (prod == "Conv+GlobalAveragePool" && cons.find("Pool ") != std::string::npos) continue;
          GraphMaker m;
          m.g.opset = opset;
          int x = m.g.add_value(
              "x", ValueType{DType::kFloat32, true, {{1, ""}, {16, ""}, {12, ""}, {12, ""}}});
          m.g.inputs.push_back(x);
          Attributes pad1;
          pad1.set("pads", ints({1, 1, 1, 1}));
          int h = m.node("Conv", {x, m.constant("w", random_f32({32, 16, 3, 3}, 41, -0.2f, 0.2f))},
                         pad1);
          if (prod == "Conv+Relu") h = m.node("Relu", {h});
          if (prod == "Conv+MaxPool") h = m.node("MaxPool", {h}, pool_attrs({2, 2}, {2, 2}));
          if (prod == "Conv+AveragePool")
            h = m.node("AveragePool", {h}, pool_attrs({2, 2}, {1, 1}));
          if (prod == "Conv+Add")
            h = m.node("Add", {h, m.constant("b", random_f32({1, 32, 1, 1}, 42))});
          if (prod == "Conv+GlobalAveragePool") h = m.node("GlobalAveragePool", {h});
          int y = -1;
          if (cons == "MaxPool ceil") {
            Attributes a = pool_attrs({3, 3}, {2, 2});
            a.set("ceil_mode", attr_int(1));
            if (opset < 10) a = pool_attrs({3, 3}, {2, 2});  // ceil_mode is opset 10's
            y = m.node("MaxPool", {h}, a);
          } else if (cons == "MaxPool dilated") {
            Attributes a = pool_attrs({2, 2}, {1, 1});
            if (opset >= 10) a.set("dilations", ints({2, 2}));
            y = m.node("MaxPool", {h}, a);
          } else if (cons == "MaxPool 7x7 pad 3") {
            Attributes a = pool_attrs({7, 7}, {1, 1});
            a.set("pads", ints({3, 3, 3, 3}));
            y = m.node("MaxPool", {h}, a);
          } else if (cons == "MaxPool asymmetric pads" || cons == "AveragePool asymmetric pads") {
            // What an exporter writes for ceil_mode before opset 10 (GoogLeNet's pools).
            Attributes a = pool_attrs({3, 3}, {2, 2});
            a.set("pads", ints({0, 0, 1, 1}));
            y = m.node(cons.substr(0, cons.find(' ')), {h}, a);
          } else if (cons == "MaxPool end pads 2") {
            // torchvision's GoogLeNet at opset 9: ceil_mode as end pads.
            Attributes a = pool_attrs({3, 3}, {2, 2});
            a.set("pads", ints({0, 0, 2, 2}));
            y = m.node("MaxPool", {h}, a);
          } else if (cons == "Softmax") {
            Attributes a;
            a.set("axis", attr_int(1));
            y = m.node("Softmax", {h}, a);
          } else if (cons == "Flatten") {
            y = m.node("Flatten", {h});
          } else if (cons == "Transpose") {
            Attributes a;
            a.set("perm", ints({0, 2, 3, 1}));
            y = m.node("Transpose", {h}, a);
          } else if (cons == "ReduceMean") {
            Attributes a;
            a.set("axes", ints({1}));
            y = m.node("ReduceMean", {h}, a);
          } else if (cons == "Exp") {
            y = m.node("Exp", {h});
          } else if (cons == "Pad") {
            if (opset < 11) {
              Attributes a;
              a.set("pads", ints({0, 0, 1, 1, 0, 0, 1, 1}));
              y = m.node("Pad", {h}, a);
            } else {
              Tensor pads = Tensor::allocate(DType::kInt64, {8}).value();
              const int64_t pv[8] = {0, 0, 1, 1, 0, 0, 1, 1};
              for (int i = 0; i < 8; ++i) pads.data<int64_t>()[i] = pv[i];
              y = m.node("Pad", {h, m.constant("pads", pads)});
            }
          } else if (cons == "Concat") {
            Attributes a;
            a.set("axis", attr_int(1));
            y = m.node("Concat", {h, h}, a);
          } else if (cons == "Slice") {
            Attributes a;
            a.set("starts", ints({0, 0}));
            a.set("ends", ints({1, 20}));
            a.set("axes", ints({0, 1}));
            if (opset < 10) {
              y = m.node("Slice", {h}, a);
            } else {
              auto i64 = [](std::vector<int64_t> v) {
                Tensor t =
                    Tensor::allocate(DType::kInt64, {static_cast<int64_t>(v.size())}).value();
                for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
                return t;
              };
              y = m.node("Slice", {h, m.constant("st", i64({0, 0})), m.constant("en", i64({1, 20})),
                                   m.constant("ax", i64({0, 1}))});
            }
          } else if (cons == "Conv grouped") {
            Attributes a;
            a.set("group", attr_int(32));
            y = m.node("Conv", {h, m.constant("wg", random_f32({32, 1, 1, 1}, 43))}, a);
          } else if (cons == "GlobalMaxPool") {
            y = m.node("GlobalMaxPool", {h});
          } else if (cons == "LRN") {
            Attributes a;
            a.set("size", attr_int(3));
            y = m.node("LRN", {h}, a);
          }
          REQUIRE(y >= 0);
          m.g.outputs.push_back(y);
          auto model = Model::create(m.g, nullptr, "pairs");
          REQUIRE_MESSAGE(model.has_value(), model.status().message());
          Tensor in = random_f32({1, 16, 12, 12}, 44);
          auto run = [&](const char* flag, const char* value) {
            SessionConfig cfg;
            cfg.backends.push_back(backends::get("cpu").value());
            REQUIRE(cfg.overrides.set(flag, value, FlagScope::kSession).is_ok());
            auto session = Session::create(*model, cfg);
            REQUIRE_MESSAGE(session.has_value(), session.status().message());
            std::vector<Tensor> out;
            const Graph& g = (*session)->graph();
            const Status st = (*session)->run({"x"}, {&in}, {g.value_name(g.outputs[0])}, &out);
            REQUIRE_MESSAGE(st.is_ok(), value, ": ", st.message());
            return out[0];
          };
          const Tensor want = run("deterministic_algorithms", "1");  // plain layouts only
          for (const char* format : {"auto", "blocked", "channels_last"}) {
            const Tensor got = run("cpu.conv_memory_format", format);
            REQUIRE(got.shape() == want.shape());
            Comparison cmp = compare(got.data<float>(), want.data<float>(),
                                     static_cast<size_t>(want.numel()), 1e-4, 1e-5);
            CHECK_MESSAGE(cmp.mismatches == 0, format, ": max abs diff ", cmp.max_abs);
          }
          ++pairs;
        }
      }
    }
    CHECK(pairs == 2 * (std::size(producers) * std::size(consumers) - 6));
  }

  TEST_CASE(
      "a kernel that declines a blocked layout gets plain data: PP-OCR cls at batch 0 and "
      "2000x2000") {
    if (!have_shared_models()) {
      MESSAGE((std::string("skipped: ") + models_unavailable()));
      return;
    }
    auto model = serialization::load_model_file(model_dir("ppocr_cls") + "/model.onnx");
    REQUIRE(model.has_value());
    SessionConfig cfg;
    cfg.backends.push_back(backends::get("cpu").value());
    auto session = Session::create(*model, cfg).value();
    const Graph& g = session->graph();
    for (const Shape& shape :
         {Shape{0, 3, 48, 192}, Shape{1, 3, 2000, 2000}, Shape{2, 3, 48, 192}}) {
      CAPTURE(shape_str(shape));
      Tensor in = Tensor::allocate(DType::kFloat32, shape).value();
      if (in.numel()) std::fill(in.data<float>(), in.data<float>() + in.numel(), 0.25f);
      std::vector<Tensor> out;
      const Status st =
          session->run({g.value_name(g.inputs[0])}, {&in}, {g.value_name(g.outputs[0])}, &out);
      REQUIRE_MESSAGE(st.is_ok(), st.message());
      CHECK(out[0].shape()[0] == shape[0]);
    }
  }

  TEST_CASE("tern_flag_set of cpu.conv_memory_format changes the next run's plan (the plan key)") {
    if (!tern_onednn_is_available() || std::string(tern_cpu_get_capability()) == "DEFAULT") {
      MESSAGE("skipped: blocked layouts need oneDNN and a vector ISA");
      return;
    }
    GraphMaker m;
    m.g.opset = 13;
    Attributes pad1;
    pad1.set("pads", attr_ints({1, 1, 1, 1}));
    int x = m.g.add_value(
        "x", ValueType{DType::kFloat32, true, {{1, ""}, {24, ""}, {10, ""}, {10, ""}}});
    m.g.inputs.push_back(x);
    int c1 =
        m.node("Conv", {x, m.constant("w1", random_f32({32, 24, 3, 3}, 31, -0.2f, 0.2f))}, pad1);
    int c2 =
        m.node("Conv", {c1, m.constant("w2", random_f32({48, 32, 3, 3}, 32, -0.2f, 0.2f))}, pad1);
    m.g.outputs.push_back(m.node("GlobalAveragePool", {c2}));
    SessionConfig cfg;
    cfg.backends.push_back(backends::get("cpu").value());
    auto session = Session::create(Model::create(m.g, nullptr, "key").value(), cfg).value();
    Tensor in = random_f32({1, 24, 10, 10}, 33);
    const Graph& g = session->graph();
    auto block_after_run = [&](const char* format) {
      REQUIRE(tern_flag_set("cpu.conv_memory_format", format) == TERN_OK);
      std::vector<Tensor> out;
      REQUIRE(session->run({"x"}, {&in}, {g.value_name(g.outputs[0])}, &out).is_ok());
      return session->last_plan()->values[static_cast<size_t>(c2)].block;
    };
    const int64_t blocked = block_after_run("blocked");
    const int64_t nhwc = block_after_run("channels_last");
    const int64_t again = block_after_run("blocked");
    REQUIRE(tern_flag_set("cpu.conv_memory_format", "auto") == TERN_OK);
    CHECK((blocked == 16 || blocked == 8));
    CHECK(nhwc == 48);  // one block of all channels: NHWC
    CHECK(again == blocked);
  }

  TEST_CASE("a saved optimized model uses its packed weights in place and computes the same bits") {
    ChainGraph c;
    Tensor x = random_f32({1, 16, 8, 8}, 5);
    SessionConfig cfg;
    cfg.backends.push_back(backends::get("cpu").value());
    auto run = [&](std::shared_ptr<const Model> m, size_t* packed_bytes) {
      auto session = Session::create(std::move(m), cfg);
      REQUIRE_MESSAGE(session, session.status().message());
      std::vector<Tensor> out;
      const Graph& g = (*session)->graph();
      REQUIRE((*session)->run({"x"}, {&x}, {g.value_name(g.outputs[0])}, &out).is_ok());
      *packed_bytes = (*session)->plan_for({{1, 16, 8, 8}}).value()->packed_weight_bytes;
      return std::make_pair(std::move(*session), out[0]);
    };
    size_t packed_first = 0;
    auto [session, want] = run(Model::create(c.g, nullptr, "chain").value(), &packed_first);
    Graph optimized;
    const size_t layouts = session->optimized_graph(&optimized);
    CHECK(count_ops(optimized, "BatchNormalization") == 0);  // the optimizer's graph is saved
    const bool onednn = tern_onednn_is_available() && packed_first > 0;
    if (onednn) CHECK(layouts == 2);  // the two convolutions' weights
    REQUIRE(serialization::save_tern(optimized, "opt.tern").is_ok());
    auto saved = serialization::load_model_file("opt.tern");
    std::remove("opt.tern");
    REQUIRE_MESSAGE(saved, saved.status().message());
    size_t packed_again = 0;
    auto [session2, got] = run(*saved, &packed_again);
    CHECK(packed_again == 0);  // every packed weight came from the file
    REQUIRE(got.byte_size() == want.byte_size());
    CHECK(std::memcmp(got.raw(), want.raw(), want.byte_size()) == 0);
    if (!onednn) return;
    // A packed copy whose key or stored layout does not match is ignored: packed again, same bits.
    for (int variant = 0; variant < 2; ++variant) {
      Graph edited = (*saved)->graph();
      for (Value& v : edited.values) {
        for (PackedData& p : v.packed) {
          if (variant == 0) {
            p.key = "onednn 0.0.0 md0";
          } else {
            Tensor copy = p.data.clone().value();
            static_cast<int32_t*>(copy.raw())[0] += 1;  // the stored layout's rank
            p.data = copy;
          }
        }
      }
      size_t repacked = 0;
      auto [session3, again] = run(Model::create(edited, nullptr, "edited").value(), &repacked);
      CHECK(repacked == packed_first);
      CHECK(std::memcmp(again.raw(), want.raw(), want.byte_size()) == 0);
    }
  }

  TEST_CASE("value_consumers lists each value's readers in node order, a double read twice") {
    GraphMaker m;
    const int x = m.input("x", {Dim{2, {}}});
    const int unread = m.input("unread", {Dim{2, {}}});
    const int a = m.node("Relu", {x});
    const int b = m.node("Add", {a, a});
    const int c = m.node("Mul", {x, -1});  // an absent optional input reads nothing
    const int d = m.node("Add", {b, x});
    m.g.outputs = {c, d};
    const ValueConsumers readers = value_consumers(m.g);
    auto list = [&](int v) {
      auto r = readers[static_cast<size_t>(v)];
      return std::vector<size_t>(r.begin(), r.end());
    };
    CHECK(list(x) == std::vector<size_t>{0, 2, 3});
    CHECK(list(a) == std::vector<size_t>{1, 1});
    CHECK(list(b) == std::vector<size_t>{3});
    CHECK(readers[static_cast<size_t>(unread)].empty());
    CHECK(readers[static_cast<size_t>(c)].empty());
    CHECK(readers[static_cast<size_t>(d)].empty());
    const std::vector<bool> is_output = graph_output_mask(m.g);
    CHECK(only_read_by(readers, is_output, b, 3));
    CHECK_FALSE(only_read_by(readers, is_output, a, 1));  // read twice by node 1
    CHECK_FALSE(only_read_by(readers, is_output, d, 3));  // a graph output, read by none
  }
}
