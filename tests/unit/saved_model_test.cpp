// Saved optimized models (Session::optimized_graph, `tern convert --optimize`): what they keep of
// the plan (shape arithmetic as constants, packed weights) loads and computes the same bits.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backends_util.h"
#include "core/opt/graph_util.h"
#include "core/session.h"
#include "graph_builder.h"
#include "serialization/model_io.h"
#include "test_util.h"
#include "unit/optimizer_harness.h"

using namespace tern;
using namespace tern_test;
using namespace tern_test::optimizer;

TEST_SUITE("optimizer") {
  TEST_CASE("a saved model of fixed input shapes keeps its shape arithmetic as constants") {
    // y = Reshape(Relu(x), Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])): the shape steps are
    // computed while planning. With x's shape fixed they are saved as the constant they give,
    // and go; with a free batch dim they stay.
    for (const bool fixed : {true, false}) {
      CAPTURE(fixed);
      GraphMaker m;
      m.g.opset = 13;
      const int x =
          m.input("x", {Dim{fixed ? 2 : -1, fixed ? "" : "batch"}, Dim{3, {}}, Dim{4, {}}});
      const int shape = m.node("Shape", {x});
      Attributes axis0;
      axis0.set("axis", attr_int(0));
      const int batch = m.node("Gather", {shape, m.constant("zero", make_i64({}, {0}))}, axis0);
      const int one = m.node("Unsqueeze", {batch, m.constant("axes", make_i64({1}, {0}))});
      Attributes cat0;
      cat0.set("axis", attr_int(0));
      const int dims = m.node("Concat", {one, m.constant("rest", make_i64({1}, {-1}))}, cat0);
      m.g.outputs.push_back(m.node("Reshape", {m.node("Relu", {x}), dims}));
      SessionConfig cfg;
      cfg.backends.push_back(backends::get("cpu").value());
      Tensor in = random_f32({2, 3, 4}, 51);
      auto run = [&](std::shared_ptr<const Model> model) {
        auto s = Session::create(std::move(model), cfg);
        REQUIRE_MESSAGE(s, s.status().message());
        std::vector<Tensor> out;
        const Graph& g = (*s)->graph();
        REQUIRE((*s)->run({"x"}, {&in}, {g.value_name(g.outputs[0])}, &out).is_ok());
        return std::make_pair(std::move(*s), out[0]);
      };
      auto [session, want] = run(Model::create(m.g, nullptr, "shapes").value());
      CHECK(want.shape() == Shape{2, 12});
      Graph optimized;
      session->optimized_graph(&optimized);
      CHECK(count_ops(optimized, "Shape") == (fixed ? 0 : 1));
      CHECK(count_ops(optimized, "Concat") == (fixed ? 0 : 1));
      CHECK(count_ops(optimized, "Reshape") == 1);
      CHECK(count_ops(optimized, "Relu") == 1);
      const Value& target = optimized.values[static_cast<size_t>(dims)];
      CHECK(target.constant.has_value() == fixed);
      if (fixed) CHECK(target.constant->shape() == Shape{2});
      // What only the removed steps read holds no data in the file.
      CHECK_FALSE(optimized.values[static_cast<size_t>(shape)].constant.has_value());
      CHECK_FALSE(optimized.values[static_cast<size_t>(one)].constant.has_value());
      REQUIRE(serialization::save_tern(optimized, "shapes.tern").is_ok());
      auto saved = serialization::load_model_file("shapes.tern");
      std::remove("shapes.tern");
      REQUIRE_MESSAGE(saved, saved.status().message());
      auto [session2, got] = run(*saved);
      REQUIRE(got.shape() == want.shape());
      CHECK(std::memcmp(got.raw(), want.raw(), want.byte_size()) == 0);
    }
  }

  TEST_CASE("saved shape arithmetic: a node keeps its outputs computed unless all can be saved") {
    // p, q = Split(Shape(x)): q is a graph output (never saved as a constant), so the Split stays
    // and p, which the Reshape reads, stays its output; and a random draw over a planned shape
    // (RandomNormalLike(ConstantOfShape(Shape(x)))) is made at every run, never while planning.
    GraphMaker m;
    m.g.opset = 13;
    const int x = m.input("x", {Dim{2, {}}, Dim{3, {}}, Dim{4, {}}, Dim{4, {}}});
    const int shape = m.node("Shape", {x});
    const int p = m.g.add_value("p"), q = m.g.add_value("q");
    Attributes axis0;
    axis0.set("axis", attr_int(0));
    m.g.nodes.push_back(Node{
        "split", "Split", "", {shape, m.constant("sizes", make_i64({2}, {2, 2}))}, {p, q}, axis0});
    const int pooled = m.node("Reshape", {m.node("GlobalAveragePool", {x}), p});
    const int noise = m.node("RandomNormalLike", {m.node("ConstantOfShape", {p})});
    m.g.outputs = {m.node("Add", {pooled, noise}), q};
    SessionConfig cfg;
    cfg.backends.push_back(backends::get("cpu").value());
    Tensor in = random_f32({2, 3, 4, 4}, 61);
    auto run = [&](Session& s) {
      std::vector<Tensor> out;
      const Graph& g = s.graph();
      REQUIRE(s.run({"x"}, {&in}, {g.value_name(g.outputs[0]), g.value_name(g.outputs[1])}, &out)
                  .is_ok());
      return out;
    };
    auto session = Session::create(Model::create(m.g, nullptr, "split").value(), cfg).value();
    const std::vector<Tensor> first = run(*session), second = run(*session);
    REQUIRE(first[0].shape() == Shape{2, 3});
    // Fresh noise at each run (the draws are unseeded).
    CHECK(std::memcmp(first[0].raw(), second[0].raw(), first[0].byte_size()) != 0);
    Graph optimized;
    session->optimized_graph(&optimized);
    CHECK(count_ops(optimized, "Split") == 1);
    CHECK(count_ops(optimized, "RandomNormalLike") == 1);
    CHECK_FALSE(optimized.values[static_cast<size_t>(p)].constant.has_value());
    REQUIRE(serialization::save_tern(optimized, "split.tern").is_ok());
    auto saved = serialization::load_model_file("split.tern");
    std::remove("split.tern");
    REQUIRE_MESSAGE(saved, saved.status().message());
    auto session2 = Session::create(*saved, cfg).value();
    const std::vector<Tensor> again = run(*session2);
    REQUIRE(again[1].shape() == first[1].shape());
    CHECK(std::memcmp(again[1].raw(), first[1].raw(), first[1].byte_size()) == 0);
    CHECK(std::memcmp(again[0].raw(), first[0].raw(), first[0].byte_size()) != 0);
  }

  TEST_CASE(
      "a saved model's packed weights of a cut convolution load without deriving them again") {
    // A 3x3 convolution on a 1x1 map padded by 1 reads only its centre tap: oneDNN's kernel runs
    // it as a 1x1 one, packing weights cut to that tap (a copy: 256 KB here). Loaded from a model
    // that carries them packed, nothing is cut or copied again: a session whose memory limit has
    // no room for the copy is made, and computes the same bits.
    if (!tern_onednn_is_available()) {
      MESSAGE("skipped: built without oneDNN");
      return;
    }
    GraphMaker m;
    const int x = m.input("x", {Dim{1, {}}, Dim{256, {}}, Dim{1, {}}, Dim{1, {}}});
    Attributes pad1;
    pad1.set("pads", attr_ints({1, 1, 1, 1}));
    const int w = m.constant("w", random_f32({256, 256, 3, 3}, 41, -0.1f, 0.1f));
    m.g.outputs.push_back(m.node("Conv", {x, w}, pad1));
    Tensor in = random_f32({1, 256, 1, 1}, 42);
    SessionConfig cfg;
    cfg.backends.push_back(backends::get("cpu").value());
    auto run = [&](std::shared_ptr<const Model> model, uint64_t limit) -> Expected<Tensor> {
      SessionConfig c = cfg;
      c.max_memory_bytes = limit;
      TERN_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, Session::create(std::move(model), c));
      std::vector<Tensor> out;
      const Graph& g = s->graph();
      TERN_RETURN_IF_ERROR(s->run({"x"}, {&in}, {g.value_name(g.outputs[0])}, &out));
      return std::move(out[0]);
    };
    auto session = Session::create(Model::create(m.g, nullptr, "cut").value(), cfg).value();
    std::vector<Tensor> out;
    REQUIRE(session->run({"x"}, {&in}, {m.g.value_name(m.g.outputs[0])}, &out).is_ok());
    const Tensor want = out[0];
    Graph optimized;
    const size_t layouts = session->optimized_graph(&optimized);
    if (layouts == 0) {
      MESSAGE("skipped: oneDNN's kernel did not take this convolution");
      return;
    }
    REQUIRE(serialization::save_tern(optimized, "cut.tern").is_ok());
    auto saved = serialization::load_model_file("cut.tern");
    std::remove("cut.tern");
    REQUIRE_MESSAGE(saved, saved.status().message());
    constexpr uint64_t kLimit = 128 << 10;  // under the cut copy's 256 KB
    auto from_plain = run(Model::create(m.g, nullptr, "cut").value(), kLimit);
    CHECK(from_plain.status().code() == Code::kOutOfMemory);  // the limit does bite there
    auto got = run(*saved, kLimit);
    REQUIRE_MESSAGE(got, got.status().message());
    REQUIRE(got->byte_size() == want.byte_size());
    CHECK(std::memcmp(got->raw(), want.raw(), want.byte_size()) == 0);
  }
}
