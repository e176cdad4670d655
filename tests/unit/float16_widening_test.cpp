// cpu.float16_in_float32: a float16 model on a CPU-only session computes in float32 between
// Casts at its float16 edges (core/opt/float16_widening.cpp).
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backends_util.h"
#include "core/opt/optimizer.h"
#include "graph_builder.h"
#include "test_util.h"
#include "unit/optimizer_harness.h"

using namespace tern;
using namespace tern_test;
using namespace tern_test::optimizer;

namespace {

ValueType typed(DType dt, std::vector<int64_t> dims) {
  ValueType t{dt, true, {}};
  for (int64_t d : dims) t.dims.push_back(Dim{d, ""});
  return t;
}

// x (float32) -> Cast(float16) -> Conv 3x3 + bias -> Relu -> Add x2 (a float16 input)
//   -> Add ConstantOfShape(Shape(.), 0.5) -> GlobalAveragePool -> Flatten -> Gemm -> y16
// (a float16 output), and y32 = Cast(float32)(y16). In `dt` float16, or float32 on the same
// float16-rounded weights (the Casts then to float32).
struct ConvNet {
  Graph g;
  int y16 = -1, y32 = -1;
};
ConvNet conv_net(DType dt) {
  GraphMaker m;
  m.g.opset = 13;
  auto c = [&](const std::string& name, const Tensor& t) {
    Tensor h = to_half_type(t, DType::kFloat16);
    return m.constant(name, dt == DType::kFloat16 ? h : widen_half_type(h));
  };
  const int x = m.g.add_value("x", typed(DType::kFloat32, {1, 8, 12, 12}));
  const int x2 = m.g.add_value("x2", typed(dt, {1, 8, 12, 12}));
  m.g.inputs = {x, x2};
  Attributes to, pads, half_value, trans_b;
  to.set("to", attr_int(static_cast<int64_t>(dt)));
  pads.set("pads", attr_ints({1, 1, 1, 1}));
  Attribute value;
  value.kind = Attribute::Kind::kTensor;
  value.t = to_half_type(make_f32({1}, {0.5f}), DType::kFloat16);
  if (dt != DType::kFloat16) value.t = widen_half_type(value.t);
  half_value.set("value", value);
  trans_b.set("transB", attr_int(1));
  const int xh = m.node("Cast", {x}, to);
  const int conv = m.node("Conv",
                          {xh, c("w", random_f32({8, 8, 3, 3}, 71, -0.3f, 0.3f)),
                           c("b", random_f32({8}, 72, -0.2f, 0.2f))},
                          pads);
  const int sum = m.node("Add", {m.node("Relu", {conv}), x2});
  const int half = m.node("ConstantOfShape", {m.node("Shape", {sum})}, half_value);
  const int pooled = m.node("Flatten", {m.node("GlobalAveragePool", {m.node("Add", {sum, half})})});
  ConvNet net;
  net.y16 = m.node("Gemm",
                   {pooled, c("fw", random_f32({5, 8}, 73, -0.5f, 0.5f)),
                    c("fb", random_f32({5}, 74, -0.1f, 0.1f))},
                   trans_b);
  Attributes to_f32;
  to_f32.set("to", attr_int(static_cast<int64_t>(DType::kFloat32)));
  net.y32 = m.node("Cast", {net.y16}, to_f32);
  m.g.values[static_cast<size_t>(net.y16)].name = "y16";
  m.g.values[static_cast<size_t>(net.y16)].type = typed(dt, {1, 5});
  m.g.values[static_cast<size_t>(net.y32)].name = "y32";
  m.g.values[static_cast<size_t>(net.y32)].type = typed(DType::kFloat32, {1, 5});
  m.g.outputs = {net.y16, net.y32};
  net.g = std::move(m.g);
  return net;
}

std::unique_ptr<Session> session_of(const Graph& g, bool widen) {
  SessionConfig cfg;
  cfg.backends.push_back(backends::get("cpu").value());
  cfg.overrides.set(FlagId::kCpuFloat16InFloat32, widen ? 1 : 0);
  return Session::create(Model::create(g, nullptr, "f16").value(), cfg).value();
}

}  // namespace

TEST_SUITE("optimizer") {
  TEST_CASE("widen_float16: float32 inside, Casts at the float16 edges, the interface kept") {
    ConvNet net = conv_net(DType::kFloat16);
    Graph g = net.g;
    OptimizerReport r;
    REQUIRE(widen_float16(g, &r).is_ok());
    REQUIRE(g.validate().is_ok());
    // x2 and the Cast's output are read through float32 twins, y16 is rounded from one (the last
    // Cast reads y16 itself).
    CHECK(r.float16_casts_added == 3);
    CHECK(r.float16_values_widened >= 4);  // w, b, fw, fb (undeclared intermediates not counted)
    CHECK(g.values[static_cast<size_t>(g.inputs[1])].type.dtype == DType::kFloat16);
    CHECK(g.values[static_cast<size_t>(g.outputs[0])].type.dtype == DType::kFloat16);
    CHECK(g.value_name(g.outputs[0]) == "y16");
    for (const Value& v : g.values) {
      if (v.constant) CHECK(v.constant->dtype() != DType::kFloat16);
    }
    for (const Node& n : g.nodes) {
      if (n.op_type == "ConstantOfShape") {
        CHECK(n.attrs.find("value")->t.dtype() == DType::kFloat32);
      }
    }
    // A second pass (a saved optimized model loaded again) finds nothing more to do.
    OptimizerReport again;
    const size_t nodes = g.nodes.size();
    REQUIRE(widen_float16(g, &again).is_ok());
    CHECK(again.float16_values_widened == 0);
    CHECK(again.float16_casts_added == 0);
    CHECK(g.nodes.size() == nodes);
  }

  TEST_CASE("cpu.float16_in_float32: float32 kernels throughout, results as float32 rounded once") {
    ConvNet half = conv_net(DType::kFloat16), single = conv_net(DType::kFloat32);
    Tensor x = random_f32({1, 8, 12, 12}, 75, -1.0f, 1.0f);
    Tensor x2h = to_half_type(random_f32({1, 8, 12, 12}, 76, -1.0f, 1.0f), DType::kFloat16);
    Tensor x2 = widen_half_type(x2h);
    // The float32 graph on the float16-rounded input.
    Tensor xr = widen_half_type(to_half_type(x, DType::kFloat16));
    std::vector<Tensor> want;
    REQUIRE(
        session_of(single.g, true)->run({"x", "x2"}, {&xr, &x2}, {"y16", "y32"}, &want).is_ok());
    for (bool widen : {true, false}) {
      CAPTURE(widen);
      auto s = session_of(half.g, widen);
      CHECK((s->optimizer_report().float16_values_widened > 0) == widen);
      auto plan = s->plan_for({x.shape(), x2h.shape()}).value();
      int via = 0;
      for (const PlanStep& st : plan->steps) {
        via += std::string(st.kernel->name()).find("via float32") != std::string::npos;
      }
      CHECK((via == 0) == widen);
      std::vector<Tensor> got;
      REQUIRE(s->run({"x", "x2"}, {&x, &x2h}, {"y16", "y32"}, &got).is_ok());
      REQUIRE(got[0].dtype() == DType::kFloat16);
      REQUIRE(got[1].dtype() == DType::kFloat32);
      Tensor g16 = widen_half_type(got[0]);
      for (int64_t i = 0; i < 5; ++i) {
        const float w = want[1].data<float>()[i];
        CAPTURE(i);
        CHECK(g16.data<float>()[i] == got[1].data<float>()[i]);  // y32 = Cast(y16)
        if (widen) {
          // Rounded once, at y16: within half a float16 unit (and float32 sums' order).
          CHECK(std::fabs(g16.data<float>()[i] - w) <= std::fabs(w) / 2048 + 1e-5f);
        } else {
          CHECK(std::fabs(g16.data<float>()[i] - w) <= std::fabs(w) / 128 + 1e-2f);
        }
      }
    }
  }

  TEST_CASE("cpu.float16_in_float32: the model's Casts to float16 still round, nodes do not") {
    // y = Cast(float32)(Cast(float16)(x) * c * c), c = 1 + 2^-10: per node, 1 * c * c rounds to
    // 1 + 2^-9 in float16; in float32 it is 1 + 2^-9 + 2^-20. x = 1 + 2^-12 rounds to 1 at the
    // model's Cast either way.
    GraphMaker m;
    m.g.opset = 13;
    const int x = m.g.add_value("x", typed(DType::kFloat32, {1}));
    m.g.inputs = {x};
    Attributes to16, to32;
    to16.set("to", attr_int(static_cast<int64_t>(DType::kFloat16)));
    to32.set("to", attr_int(static_cast<int64_t>(DType::kFloat32)));
    const int cv =
        m.constant("c", to_half_type(make_f32({1}, {1.0f + 1.0f / 1024}), DType::kFloat16));
    const int prod = m.node("Mul", {m.node("Mul", {m.node("Cast", {x}, to16), cv}), cv});
    const int y = m.node("Cast", {prod}, to32);
    m.g.values[static_cast<size_t>(y)].name = "y";
    m.g.values[static_cast<size_t>(y)].type = typed(DType::kFloat32, {1});
    m.g.outputs = {y};
    Tensor in = make_f32({1}, {1.0f + 1.0f / 4096});
    for (bool widen : {true, false}) {
      CAPTURE(widen);
      std::vector<Tensor> out;
      REQUIRE(session_of(m.g, widen)->run({"x"}, {&in}, {"y"}, &out).is_ok());
      const float c = 1.0f + 1.0f / 1024;
      CHECK(out[0].data<float>()[0] == (widen ? c * c : 1.0f + 1.0f / 512));
    }
  }

  TEST_CASE("widen_float16 leaves graphs it cannot keep the meaning of as they are") {
    auto unchanged = [](Graph g, const char* what) {
      CAPTURE(what);
      const size_t nodes = g.nodes.size();
      OptimizerReport r;
      REQUIRE(widen_float16(g, &r).is_ok());
      CHECK(r.float16_values_widened == 0);
      CHECK(g.nodes.size() == nodes);
    };
    {  // A float16 input with an initializer (IR < 4 lists weights as inputs).
      ConvNet net = conv_net(DType::kFloat16);
      Value& x2 = net.g.values[static_cast<size_t>(net.g.inputs[1])];
      x2.constant = to_half_type(random_f32({1, 8, 12, 12}, 81), DType::kFloat16);
      unchanged(net.g, "initializer input");
    }
    {  // A sequence of float16 tensors as an output.
      ConvNet net = conv_net(DType::kFloat16);
      const int seq =
          net.g.add_value("seq", ValueType{DType::kSequence, false, {}, DType::kFloat16});
      net.g.nodes.push_back(Node{"s", "SequenceConstruct", "", {net.y16}, {seq}, {}});
      net.g.outputs.push_back(seq);
      unchanged(net.g, "float16 sequence output");
    }
    {  // BitCast, whose width is its type's.
      ConvNet net = conv_net(DType::kFloat16);
      Attributes to;
      to.set("to", attr_int(static_cast<int64_t>(DType::kInt16)));
      const int bits = net.g.add_value("bits", ValueType{DType::kInt16, false, {}});
      net.g.nodes.push_back(Node{"b", "BitCast", "", {net.y16}, {bits}, to});
      net.g.outputs.push_back(bits);
      unchanged(net.g, "BitCast");
    }
  }

  TEST_CASE("widen_float16 leaves graphs with subgraphs, and graphs of no float16, as they are") {
    ConvNet net = conv_net(DType::kFloat16);
    Graph with_if = net.g;
    Attribute branch;
    branch.kind = Attribute::Kind::kGraph;
    branch.g = std::make_shared<Graph>();
    with_if.nodes.back().attrs.set("else_branch", branch);
    OptimizerReport r;
    REQUIRE(widen_float16(with_if, &r).is_ok());
    CHECK(r.float16_values_widened == 0);
    CHECK(with_if.nodes.size() == net.g.nodes.size());
    Graph single = conv_net(DType::kFloat32).g;
    const size_t nodes = single.nodes.size();
    REQUIRE(widen_float16(single, &r).is_ok());
    CHECK(r.float16_casts_added == 0);
    CHECK(single.nodes.size() == nodes);
  }
}
