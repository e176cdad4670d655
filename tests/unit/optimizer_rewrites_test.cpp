// Graph rewrites for the layers the model corpus found (suite optimizer): zero Pads into
// convolution and pooling padding, inert Dropouts, SiLU into a convolution's epilogue, channel
// Concats and the normalisations after them that keep blocked layouts, GroupNorm's opset-17
// export; each checked on the graph and against the ops run one by one.
#include <doctest/doctest.h>

#include <algorithm>
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
    auto session = cpu_session(m.g, "pads");
    CHECK(session->optimizer_report().pads_folded == 4);
    check_run(*session, xin, y, want, 1e-5, 1e-5);
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

  TEST_CASE(
      "Identities are bypassed in any node order; Conv -> Dropout -> BatchNormalization folds") {
    // x -> Conv -> Dropout -> Identity -> BatchNormalization -> Identity (a graph output): the two
    // inner ones go (the BatchNormalization then folds into the Conv), the output's stays.
    GraphMaker m;
    m.g.opset = 13;
    ValueType type{DType::kFloat32, true, {{1, ""}, {3, ""}, {5, ""}, {5, ""}}};
    const int x = m.g.add_value("x", type);
    m.g.inputs.push_back(x);
    Tensor w = random_f32({4, 3, 1, 1}, 41, -0.5f, 0.5f);
    Tensor scale = random_f32({4}, 42, 0.5f, 1.5f), bias = random_f32({4}, 43, -1, 1);
    Tensor mean = random_f32({4}, 44, -1, 1), var = random_f32({4}, 45, 0.5f, 2);
    const int c = m.node("Conv", {x, m.constant("w", w)});
    const int d = m.node("Identity", {m.node("Dropout", {c})});
    const int bn =
        m.node("BatchNormalization", {d, m.constant("scale", scale), m.constant("bias", bias),
                                      m.constant("mean", mean), m.constant("var", var)});
    const int y = m.node("Identity", {bn});
    m.g.outputs.push_back(y);
    Tensor xin = random_f32({1, 3, 5, 5}, 46);
    Tensor want = one("Conv", {xin}, {w});
    want = one("BatchNormalization", {want}, {scale, bias, mean, var});
    for (bool reversed : {false, true}) {
      CAPTURE(reversed);
      Graph g = m.g;
      // Nodes may come in any order (core/graph.h): readers before the Identities they read.
      if (reversed) std::reverse(g.nodes.begin(), g.nodes.end());
      OptimizerReport r;
      REQUIRE(optimize_graph(g, &r).is_ok());
      CHECK(r.identities_bypassed == 2);
      CHECK(r.batch_norms_folded == 1);
      CHECK(count_ops(g, "Identity") == 1);
      CHECK(count_ops(g, "BatchNormalization") == 0);
    }
    auto session = cpu_session(m.g, "identities");
    check_run(*session, xin, y, want, 1e-5, 1e-5);
  }

  TEST_CASE("Concat of channel-blocked convolutions stays blocked (SqueezeNet's fire modules)") {
    // x -> Conv 1x1 (16) -> a ; x -> Conv 3x3 (32) -> b ; Concat(a, b) -> Conv 1x1 (16) -> y
    GraphMaker mk;
    Graph& g = mk.g;
    g.opset = 13;
    const int x = image_input(g, {1, 16, 10, 9});
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
    auto session = cpu_session(g, "fire");
    auto plan = session->plan_for({{1, 16, 10, 9}}).value();
    if (plans_blocked_layouts()) {
      CHECK(plan->values[static_cast<size_t>(c)].block > 0);
      CHECK(plan->reorders <= 1);  // y only
    }
    check_run(*session, xin, y, want, 1e-4, 1e-5);
  }

  TEST_CASE("BatchNormalization and Relu after a channel Concat: one node, blocked (DenseNet)") {
    // x -> Conv 1x1 (32) -> p -> Conv 3x3 (16) -> a ; Concat(p, a) -> BatchNormalization -> Relu
    //   -> Conv 1x1 (16) -> y:
    // the BN has no convolution to fold into; it reads and writes the Concat's layout, and the
    // Relu joins it.
    GraphMaker mk;
    Graph& g = mk.g;
    g.opset = 13;
    const int x = image_input(g, {1, 32, 8, 9});
    Tensor w0 = random_f32({32, 32, 1, 1}, 70, -0.3f, 0.3f);
    Tensor w1 = random_f32({16, 32, 3, 3}, 71, -0.2f, 0.2f),
           w2 = random_f32({16, 48, 1, 1}, 72, -0.3f, 0.3f);
    Tensor scale = random_f32({48}, 73, 0.5f, 1.5f), bias = random_f32({48}, 74, -1.0f, 1.0f),
           mean = random_f32({48}, 75, -0.5f, 0.5f), var = random_f32({48}, 76, 0.2f, 2.0f);
    Attributes pad1, cat;
    pad1.set("pads", attr_ints({1, 1, 1, 1}));
    cat.set("axis", attr_int(1));
    const int p = mk.node("Conv", {x, mk.constant("w0", w0)});
    const int a = mk.node("Conv", {p, mk.constant("w1", w1)}, pad1);
    const int c = mk.node("Concat", {p, a}, cat);
    const int bn =
        mk.node("BatchNormalization", {c, mk.constant("scale", scale), mk.constant("bias", bias),
                                       mk.constant("mean", mean), mk.constant("var", var)});
    const int r = mk.node("Relu", {bn});
    const int y = mk.node("Conv", {r, mk.constant("w2", w2)});
    g.outputs.push_back(y);
    Tensor xin = random_f32({1, 32, 8, 9}, 77);
    Tensor pin = one("Conv", {xin}, {w0});
    Tensor joined = one("Concat", {pin, one("Conv", {pin}, {w1}, pad1)}, {}, cat);
    Tensor want = one(
        "Conv", {one("Relu", {one("BatchNormalization", {joined}, {scale, bias, mean, var})}, {})},
        {w2});
    auto session = cpu_session(g, "dense");
    CHECK(session->optimizer_report().activations_fused == 1);
    size_t relus = 0, fused = 0;
    for (const Node& n : session->graph().nodes) {
      relus += n.op_type == "Relu";
      fused += n.op_type == "FusedBatchNormalization";
    }
    CHECK(relus == 0);
    CHECK(fused == 1);
    auto plan = session->plan_for({{1, 32, 8, 9}}).value();
    if (plans_blocked_layouts()) {
      CHECK(plan->values[static_cast<size_t>(r)].block > 0);  // the fused node's output
      CHECK(plan->reorders <= 2);                             // x and y only
    }
    check_run(*session, xin, y, want, 1e-4, 1e-5);
  }

  TEST_CASE(
      "a BatchNormalization's Relu joins it in either layout; a Clip or a second reader not") {
    // x -> BatchNormalization -> Relu -> y, plain (a NaN kept) and after a channel-blocked Conv and
    // a 1x1 MaxPool (which keep the BN from folding into the Conv);
    // then Clip instead of Relu, and the BN's output also read by an Add: nothing fuses.
    const Shape xs = {2, 16, 5, 7};
    Tensor scale = random_f32({16}, 80, 0.5f, 1.5f), bias = random_f32({16}, 81, -1.0f, 1.0f),
           mean = random_f32({16}, 82, -0.5f, 0.5f), var = random_f32({16}, 83, 0.2f, 2.0f);
    Tensor w = random_f32({16, 16, 1, 1}, 84, -0.3f, 0.3f);
    const Tensor lo = make_f32({}, {-0.5f}), hi = make_f32({}, {0.75f});
    Tensor nan_in = random_f32(xs, 85, -3.0f, 3.0f);
    nan_in.data<float>()[7] = std::numeric_limits<float>::quiet_NaN();
    for (int variant = 0; variant < 4; ++variant) {
      CAPTURE(variant);
      GraphMaker mk;
      Graph& g = mk.g;
      g.opset = 13;
      const int x = image_input(g, xs);
      Attributes pool;
      pool.set("kernel_shape", attr_ints({1, 1}));
      const int in =
          variant == 1 ? mk.node("MaxPool", {mk.node("Conv", {x, mk.constant("w", w)})}, pool) : x;
      const int bn =
          mk.node("BatchNormalization", {in, mk.constant("scale", scale), mk.constant("bias", bias),
                                         mk.constant("mean", mean), mk.constant("var", var)});
      int y = variant == 2 ? mk.node("Clip", {bn, mk.constant("lo", lo), mk.constant("hi", hi)})
                           : mk.node("Relu", {bn});
      if (variant == 3) y = mk.node("Add", {y, bn});
      g.outputs.push_back(y);
      const Tensor xv = variant == 1 ? random_f32(xs, 86) : nan_in;
      const Tensor t = variant == 1 ? one("MaxPool", {one("Conv", {xv}, {w})}, {}, pool) : xv;
      const Tensor b = one("BatchNormalization", {t}, {scale, bias, mean, var});
      Tensor want = variant == 2 ? one("Clip", {b}, {lo, hi}) : one("Relu", {b}, {});
      if (variant == 3) want = one("Add", {want, b}, {});
      auto session = cpu_session(g, "bn_relu");
      CHECK(session->optimizer_report().activations_fused == (variant >= 2 ? 0u : 1u));
      CHECK(count_ops(session->graph(), "FusedBatchNormalization") == (variant >= 2 ? 0u : 1u));
      check_run(*session, xv, y, want, 1e-4, 1e-5);
    }
  }

  TEST_CASE("GroupNorm's opset-17 export becomes GroupNormalization, blocked after a Conv") {
    // x -> Conv 3x3 (32) -> c -> Reshape(c, [0, G, -1]) -> InstanceNormalization (G ones and
    // zeros, or other values) -> Reshape(., Shape(c)) -> Mul gamma [32, 1, 1] -> Add beta -> y,
    // for G = 8 and 32 (instance-like). A Reshape to a literal batch is left alone.
    for (int64_t groups : {8, 32, -8}) {
      const int64_t gn = groups < 0 ? -groups : groups;
      INFO("groups ", groups);
      GraphMaker mk;
      Graph& g = mk.g;
      g.opset = 17;
      const int x = image_input(g, {1, 16, 10, 7});
      Tensor w = random_f32({32, 16, 3, 3}, 81, -0.2f, 0.2f);
      Tensor split = make_i64({3}, {groups < 0 ? 1 : 0, gn, -1});
      Tensor s = random_f32({gn}, 82, 0.5f, 1.5f), b = random_f32({gn}, 83, -0.5f, 0.5f);
      Tensor gamma = random_f32({32, 1, 1}, 84, 0.5f, 1.5f),
             beta = random_f32({32, 1, 1}, 85, -1.0f, 1.0f);
      Attributes pad1, eps;
      pad1.set("pads", attr_ints({1, 1, 1, 1}));
      eps.set("epsilon", attr_float(1e-4f));
      const int c = mk.node("Conv", {x, mk.constant("w", w)}, pad1);
      const int r1 = mk.node("Reshape", {c, mk.constant("split", split)});
      const int in =
          mk.node("InstanceNormalization", {r1, mk.constant("s", s), mk.constant("b", b)}, eps);
      const int r2 = mk.node("Reshape", {in, mk.node("Shape", {c})});
      const int y = mk.node(
          "Add", {mk.node("Mul", {r2, mk.constant("gamma", gamma)}), mk.constant("beta", beta)});
      g.outputs.push_back(y);
      Graph h = g;
      OptimizerReport r;
      REQUIRE(optimize_graph(h, &r).is_ok());
      CHECK(r.group_norms_fused == (groups > 0 ? 1 : 0));
      CHECK(count_ops(h, "GroupNormalization") == (groups > 0 ? 1 : 0));
      CHECK(count_ops(h, "Reshape") == (groups > 0 ? 0 : 2));
      CHECK(count_ops(h, "Shape") == (groups > 0 ? 0 : 1));
      Tensor xin = random_f32({1, 16, 10, 7}, 86);
      Tensor conv = one("Conv", {xin}, {w}, pad1);
      Tensor normed = one("InstanceNormalization", {one("Reshape", {conv}, {split})}, {s, b}, eps);
      Tensor want = one(
          "Add", {one("Mul", {one("Reshape", {normed, one("Shape", {conv}, {})}, {})}, {gamma})},
          {beta});
      auto session = cpu_session(g, "gn");
      auto plan = session->plan_for({{1, 16, 10, 7}}).value();
      if (groups > 0 && plans_blocked_layouts()) {
        CHECK(plan->values[static_cast<size_t>(r2)].block > 0);
      }
      check_run(*session, xin, y, want, 1e-4, 1e-4);
    }
  }

  TEST_CASE("ConvNeXt's block: NCHW <-> NHWC Transposes read and write the blocked layout") {
    // x -> Conv 1x1 (32) -> c -> depthwise Conv 3x3 -> d -> Transpose [0,2,3,1] -> LayerNorm
    //   -> Transpose [0,3,1,2] -> t ; Add(c, t) -> Conv 1x1 (16) -> y: no reorder but x's and y's.
    GraphMaker mk;
    Graph& g = mk.g;
    g.opset = 17;
    const int x = image_input(g, {1, 16, 7, 6});
    Tensor w0 = random_f32({32, 16, 1, 1}, 91, -0.3f, 0.3f),
           wd = random_f32({32, 1, 3, 3}, 92, -0.3f, 0.3f),
           w2 = random_f32({16, 32, 1, 1}, 93, -0.3f, 0.3f);
    Tensor ln_s = random_f32({32}, 94, 0.5f, 1.5f), ln_b = random_f32({32}, 95, -0.5f, 0.5f);
    Attributes dw, to_nhwc, to_nchw, ln;
    dw.set("group", attr_int(32));
    dw.set("pads", attr_ints({1, 1, 1, 1}));
    to_nhwc.set("perm", attr_ints({0, 2, 3, 1}));
    to_nchw.set("perm", attr_ints({0, 3, 1, 2}));
    ln.set("axis", attr_int(-1));
    const int c = mk.node("Conv", {x, mk.constant("w0", w0)});
    const int d = mk.node("Conv", {c, mk.constant("wd", wd)}, dw);
    const int n = mk.node(
        "LayerNormalization",
        {mk.node("Transpose", {d}, to_nhwc), mk.constant("ln_s", ln_s), mk.constant("ln_b", ln_b)},
        ln);
    const int t = mk.node("Transpose", {n}, to_nchw);
    const int y = mk.node("Conv", {mk.node("Add", {c, t}), mk.constant("w2", w2)});
    g.outputs.push_back(y);
    Tensor xin = random_f32({1, 16, 7, 6}, 96);
    Tensor cin = one("Conv", {xin}, {w0});
    Tensor tin = one(
        "Transpose",
        {one("LayerNormalization", {one("Transpose", {one("Conv", {cin}, {wd}, dw)}, {}, to_nhwc)},
             {ln_s, ln_b}, ln)},
        {}, to_nchw);
    Tensor want = one("Conv", {one("Add", {cin, tin}, {})}, {w2});
    auto session = cpu_session(g, "convnext");
    auto plan = session->plan_for({{1, 16, 7, 6}}).value();
    if (plans_blocked_layouts()) {
      CHECK(plan->values[static_cast<size_t>(t)].block > 0);
      CHECK(plan->reorders <= 2);  // x and y only
    }
    check_run(*session, xin, y, want, 1e-4, 1e-4);
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
    auto session = cpu_session(g, "silu");
    check_run(*session, xin, y, want, 1e-4, 1e-4);
  }
}
