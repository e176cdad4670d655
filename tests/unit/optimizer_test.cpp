// Graph optimizer passes and plan-time fusion/layouts: each rewrite changes the graph (checked
// by counting node kinds) and not the outputs (checked against the same ops run one at a time,
// as one-node graphs that nothing can fuse).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "backends_util.h"
#include "core/graph_optimizer.h"
#include "graph_builder.h"
#include "test_util.h"

using namespace tern;
using namespace tern_test;

namespace {

// x [1,16,8,8] -> Conv -> BatchNormalization -> Relu -> Conv -> Add(., relu) -> Relu
//   -> x * clip(x + 3, 0, 6) / 6 -> GlobalAveragePool -> y ; plus an unused Sigmoid(x).
struct ChainGraph {
  Graph g;
  Tensor w1 = random_f32({16, 16, 3, 3}, 11, -0.3f, 0.3f), b1 = random_f32({16}, 12);
  Tensor w2 = random_f32({16, 16, 3, 3}, 13, -0.3f, 0.3f);
  Tensor scale = random_f32({16}, 14, 0.5f, 1.5f), shift = random_f32({16}, 15);
  Tensor mean = random_f32({16}, 16), var = random_f32({16}, 17, 0.5f, 2.0f);
  Tensor three = make_f32({}, {3.0f}), zero = make_f32({}, {0.0f}), six = make_f32({}, {6.0f});
  Attributes conv_attrs;

  int constant(const std::string& name, const Tensor& t) {
    int id = g.add_value(name);
    g.values[static_cast<size_t>(id)].constant = t;
    return id;
  }
  int node(const std::string& op, std::vector<int> inputs, Attributes attrs = {}) {
    int out = g.add_value(op + std::to_string(g.nodes.size()));
    g.nodes.push_back(Node{"n" + std::to_string(g.nodes.size()), op, "", std::move(inputs), {out},
                           std::move(attrs)});
    return out;
  }
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

Tensor one(const std::string& op, std::vector<Tensor> runtime,
           std::vector<std::optional<Tensor>> constants, Attributes attrs = {}) {
  SingleOp s{op, std::move(attrs), std::move(runtime), std::move(constants)};
  auto r = s.run();
  REQUIRE_MESSAGE(r, r.status().message());
  return (*r)[0];
}

size_t count_ops(const Graph& g, const std::string& op) {
  size_t n = 0;
  for (const Node& node : g.nodes) n += node.op_type == op;
  return n;
}

}  // namespace

TEST_SUITE("optimizer") {
  TEST_CASE("passes rewrite the graph: BN folded, HardSwish found, activations fused, dead removed") {
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
      CHECK(blocked >= 3);
      CHECK(plan->reorders <= 1);
    }
  }
}
