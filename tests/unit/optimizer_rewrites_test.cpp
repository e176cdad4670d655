// Graph rewrites for the layers the model corpus found (suite optimizer): zero Pads into
// convolution and pooling padding, inert Dropouts, SiLU into a convolution's epilogue, channel
// Concats that keep blocked layouts; each checked on the graph and against the ops run one by one.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "backends_util.h"
#include "core/opt/optimizer.h"
#include "core/session.h"
#include "graph_builder.h"
#include "test_util.h"
#include "unit/optimizer_harness.h"

using namespace tern;
using namespace tern_test;
using namespace tern_test::optimizer;

TEST_SUITE("optimizer") {
  TEST_CASE("zero Pads fold into Conv and AveragePool padding; empty Pads and Dropouts vanish") {
    // x -> Pad(0,0,1,1 | 0,0,1,1) -> AveragePool 3x3 -> Pad(1,2 on H/W) -> Conv 3x3 pads 1
    //   -> Pad(nothing) -> Dropout -> y; and the same without the optimizer, node by node.
    GraphMaker m;
    m.g.opset = 13;
    ValueType type{DType::kFloat32, true, {{1, ""}, {4, ""}, {7, ""}, {6, ""}}};
    const int x = m.g.add_value("x", type);
    m.g.inputs.push_back(x);
    Tensor p1 = make_i64({8}, {0, 0, 1, 1, 0, 0, 1, 1}),
           p2 = make_i64({8}, {0, 0, 1, 2, 0, 0, 2, 1});
    Tensor none = make_i64({8}, {0, 0, 0, 0, 0, 0, 0, 0});
    Tensor w = random_f32({3, 4, 3, 3}, 31, -0.5f, 0.5f);
    Attributes pool, conv;
    pool.set("kernel_shape", attr_ints({3, 3}));
    conv.set("pads", attr_ints({1, 1, 1, 1}));
    const int a = m.node("Pad", {x, m.constant("p1", p1)});
    const int b = m.node("AveragePool", {a}, pool);
    const int c = m.node("Pad", {b, m.constant("p2", p2)});
    const int d = m.node("Conv", {c, m.constant("w", w)}, conv);
    const int e = m.node("Pad", {d, m.constant("none", none)});
    const int y = m.node("Dropout", {e});
    m.g.outputs.push_back(y);
    Graph g = m.g;
    OptimizerReport r;
    REQUIRE(optimize_graph(g, &r).is_ok());
    CHECK(r.pads_folded == 4);
    CHECK(count_ops(g, "Pad") == 0);
    CHECK(count_ops(g, "Dropout") == 0);
    Tensor xin = random_f32({1, 4, 7, 6}, 32);
    Tensor want = one("Pad", {xin}, {p1});
    want = one("AveragePool", {want}, {}, pool);
    want = one("Pad", {want}, {p2});
    want = one("Conv", {want}, {w}, conv);
    SessionConfig cfg;
    cfg.backends.push_back(backends::get("cpu").value());
    auto session = Session::create(Model::create(m.g, nullptr, "pads").value(), cfg).value();
    CHECK(session->optimizer_report().pads_folded == 4);
    std::vector<Tensor> out;
    REQUIRE(session->run({"x"}, {&xin}, {session->graph().value_name(y)}, &out).is_ok());
    REQUIRE(out[0].shape() == want.shape());
    Comparison cmp = compare(out[0].data<float>(), want.data<float>(),
                             static_cast<size_t>(want.numel()), 1e-5, 1e-5);
    CHECK_MESSAGE(cmp.mismatches == 0, "max abs diff ", cmp.max_abs);
    // An AveragePool that excludes its own padding cannot take more.
    Graph h = m.g;
    for (Node& n : h.nodes) {
      if (n.op_type == "AveragePool") n.attrs.set("pads", attr_ints({1, 0, 0, 0}));
    }
    OptimizerReport r2;
    REQUIRE(optimize_graph(h, &r2).is_ok());
    CHECK(count_ops(h, "Pad") == 1);
    // Dropout in training mode drops nothing at ratio 0 (Swin's exported attention dropouts), and
    // stays at any other ratio.
    for (float ratio : {0.0f, 0.1f}) {
      GraphMaker t;
      t.g.opset = 13;
      const int tx = t.g.add_value("x", type);
      t.g.inputs.push_back(tx);
      Tensor rt = Tensor::allocate(DType::kFloat32, {}).value();
      *rt.data<float>() = ratio;
      Tensor on = Tensor::allocate(DType::kBool, {}).value();
      *on.data<uint8_t>() = 1;
      t.g.outputs.push_back(t.node("Dropout", {tx, t.constant("ratio", rt), t.constant("on", on)}));
      OptimizerReport tr;
      REQUIRE(optimize_graph(t.g, &tr).is_ok());
      CHECK(count_ops(t.g, "Dropout") == (ratio == 0.0f ? 0 : 1));
    }
  }

  TEST_CASE("Concat of channel-blocked convolutions stays blocked (SqueezeNet's fire modules)") {
    // x -> Conv 1x1 (16) -> a ; x -> Conv 3x3 (32) -> b ; Concat(a, b) -> Conv 1x1 (16) -> y
    GraphMaker mk;
    Graph& g = mk.g;
    g.opset = 13;
    const int x =
        g.add_value("x", ValueType{DType::kFloat32, true, {{1, ""}, {16, ""}, {10, ""}, {9, ""}}});
    g.inputs.push_back(x);
    Tensor w1 = random_f32({16, 16, 1, 1}, 61, -0.3f, 0.3f),
           w2 = random_f32({32, 16, 3, 3}, 62, -0.2f, 0.2f);
    Tensor w3 = random_f32({16, 48, 1, 1}, 63, -0.3f, 0.3f);
    Attributes pad1, cat;
    pad1.set("pads", attr_ints({1, 1, 1, 1}));
    cat.set("axis", attr_int(1));
    const int a = mk.node("Conv", {x, mk.constant("w1", w1)});
    const int b = mk.node("Conv", {x, mk.constant("w2", w2)}, pad1);
    const int c = mk.node("Concat", {a, b}, cat);
    const int y = mk.node("Conv", {c, mk.constant("w3", w3)});
    g.outputs.push_back(y);
    Tensor xin = random_f32({1, 16, 10, 9}, 64);
    Tensor want = one(
        "Conv",
        {one("Concat", {one("Conv", {xin}, {w1}), one("Conv", {xin}, {w2}, pad1)}, {}, cat)}, {w3});
    SessionConfig cfg;
    cfg.backends.push_back(backends::get("cpu").value());
    auto session = Session::create(Model::create(g, nullptr, "fire").value(), cfg).value();
    auto plan = session->plan_for({{1, 16, 10, 9}}).value();
    if (tern_onednn_is_available() && std::string(tern_cpu_get_capability()) != "DEFAULT") {
      CHECK(plan->values[static_cast<size_t>(c)].block > 0);
      CHECK(plan->reorders <= 1);  // y only
    }
    std::vector<Tensor> out;
    REQUIRE(session->run({"x"}, {&xin}, {session->graph().value_name(y)}, &out).is_ok());
    REQUIRE(out[0].shape() == want.shape());
    Comparison cmp = compare(out[0].data<float>(), want.data<float>(),
                             static_cast<size_t>(want.numel()), 1e-4, 1e-5);
    CHECK_MESSAGE(cmp.mismatches == 0, "max abs diff ", cmp.max_abs);
  }

  TEST_CASE("x * Sigmoid(x) after a Conv becomes a Swish epilogue (EfficientNet's SiLU)") {
    // Conv 1x1 -> SiLU -> depthwise Conv 3x3 -> SiLU (Mul with the Sigmoid first) -> y, and a
    // Sigmoid read twice (not fused).
    GraphMaker mk;
    Graph& g = mk.g;
    g.opset = 13;
    ValueType type{DType::kFloat32, true, {{1, ""}, {16, ""}, {9, ""}, {7, ""}}};
    const int x = g.add_value("x", type);
    g.inputs.push_back(x);
    Tensor w1 = random_f32({32, 16, 1, 1}, 41, -0.4f, 0.4f), b1 = random_f32({32}, 42);
    Tensor w2 = random_f32({32, 1, 3, 3}, 43, -0.4f, 0.4f);
    Attributes dw;
    dw.set("group", attr_int(32));
    dw.set("pads", attr_ints({1, 1, 1, 1}));
    const int c1 = mk.node("Conv", {x, mk.constant("w1", w1), mk.constant("b1", b1)});
    const int s1 = mk.node("Sigmoid", {c1});
    const int a1 = mk.node("Mul", {c1, s1});
    const int c2 = mk.node("Conv", {a1, mk.constant("w2", w2)}, dw);
    const int s2 = mk.node("Sigmoid", {c2});
    const int a2 = mk.node("Mul", {s2, c2});
    const int y = mk.node("Add", {a2, s2});  // s2 read twice: its Mul stays
    g.outputs.push_back(y);
    Graph opt = g;
    OptimizerReport r;
    REQUIRE(optimize_graph(opt, &r).is_ok());
    CHECK(r.swish_fused == 1);
    CHECK(count_ops(opt, "Sigmoid") == 1);
    CHECK(count_ops(opt, "Swish") == 0);  // in the first convolution's epilogue
    Tensor xin = random_f32({1, 16, 9, 7}, 44, -2.0f, 2.0f);
    Tensor t = one("Conv", {xin}, {w1, b1});
    Tensor t1 = one("Mul", {t, one("Sigmoid", {t}, {})}, {});
    t = one("Conv", {t1}, {w2}, dw);
    Tensor sg = one("Sigmoid", {t}, {});
    Tensor want = one("Add", {one("Mul", {sg, t}, {}), sg}, {});
    SessionConfig cfg;
    cfg.backends.push_back(backends::get("cpu").value());
    auto session = Session::create(Model::create(g, nullptr, "silu").value(), cfg).value();
    std::vector<Tensor> out;
    REQUIRE(session->run({"x"}, {&xin}, {session->graph().value_name(y)}, &out).is_ok());
    REQUIRE(out[0].shape() == want.shape());
    Comparison cmp = compare(out[0].data<float>(), want.data<float>(),
                             static_cast<size_t>(want.numel()), 1e-4, 1e-4);
    CHECK_MESSAGE(cmp.mismatches == 0, "max abs diff ", cmp.max_abs);
  }
}
