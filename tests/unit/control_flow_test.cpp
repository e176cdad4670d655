// If, Loop and Scan: subgraphs that read values of the graphs around them (computed ones and
// constants, two levels up), outputs planned statically where their shapes are known and at run
// time where they are not, the .tern round trip of graphs with subgraphs, subgraphs compiled once
// per session, the body's kernels the optimized ones, and their nodes in the profile.
#include <doctest/doctest.h>

#include <cstdio>
#include <functional>
#include <map>

#include "backends/registry.h"
#include "core/session.h"
#include "graph_builder.h"
#include "serialization/model_io.h"
#include "subgraph_builder.h"
#include "test_util.h"

using namespace tern;
using namespace tern_test;

namespace {

using Builder = SubgraphBuilder;

std::unique_ptr<Session> session_of(Graph g, int threads = 1, const std::string& profile = "") {
  g.opset = g.opset ? g.opset : 17;
  auto model = Model::create(std::move(g), nullptr, "test");
  REQUIRE_MESSAGE(model.has_value(), model.status().message());
  SessionConfig cfg;
  cfg.backends = {backends::get("cpu").value()};
  cfg.overrides.set(FlagId::kNumThreads, threads);
  cfg.profile_path = profile;
  auto s = Session::create(*model, cfg);
  REQUIRE_MESSAGE(s.has_value(), s.status().message());
  return std::move(*s);
}

std::vector<Tensor> run_named(Session& s, const std::vector<std::pair<std::string, Tensor>>& ins,
                              const std::vector<std::string>& outs) {
  std::vector<std::string> names;
  std::vector<const Tensor*> ptrs;
  for (const auto& kv : ins) names.push_back(kv.first), ptrs.push_back(&kv.second);
  std::vector<Tensor> result;
  const Status st = s.run(names, ptrs, outs, &result);
  REQUIRE_MESSAGE(st.is_ok(), st.message());
  return result;
}

Tensor make_bool(bool v) {
  Tensor t = Tensor::allocate(DType::kBool, {}).value();
  *t.data<bool>() = v;
  return t;
}

Tensor scalar_i64(int64_t v) {
  return make_i64({}, {v});
}

// Plans the session for its inputs' shapes and says whether the plan is dynamic.
bool plan_is_dynamic(Session& s, const std::vector<Shape>& shapes) {
  auto plan = s.plan_for(shapes);
  REQUIRE_MESSAGE(plan.has_value(), plan.status().message());
  return (*plan)->dynamic;
}

// Saves the session's model as .tern, loads it back, and returns a session over it.
std::unique_ptr<Session> round_trip(const Session& s, const std::string& file) {
  REQUIRE(serialization::save_tern(s.model().graph(), file).is_ok());
  auto loaded = serialization::load_model_file(file);
  std::remove(file.c_str());
  REQUIRE_MESSAGE(loaded.has_value(), loaded.status().message());
  SessionConfig cfg;
  cfg.backends = {backends::get("cpu").value()};
  auto again = Session::create(*loaded, cfg);
  REQUIRE_MESSAGE(again.has_value(), again.status().message());
  return std::move(*again);
}

// y = If(c) then x + w (w a constant of the main graph) else x * x: both branches read x.
Graph if_model(bool else_changes_shape) {
  Builder m;
  m.g.opset = 17;
  const int x = m.input("x", DType::kFloat32, {2, 3});
  const int c = m.input("c", DType::kBool);
  m.constant("w", make_f32({2, 3}, {1, 2, 3, 4, 5, 6}));
  Builder then_b, else_b;
  then_b.g.outputs = {then_b.node1("Add", {then_b.capture("x"), then_b.capture("w")}, "t")};
  if (else_changes_shape) {
    Attributes keep;
    keep.set("keepdims", attr_int(0));
    const int sq = else_b.node1("Mul", {else_b.capture("x"), else_b.capture("x")}, "sq");
    else_b.g.outputs = {else_b.node1("ReduceSum", {sq}, "e", keep)};  // scalar, not [2, 3]
  } else {
    else_b.g.outputs = {else_b.node1("Mul", {else_b.capture("x"), else_b.capture("x")}, "e")};
  }
  (void)x;
  m.outputs(m.control("If", {c}, {"y"}, {{"then_branch", &then_b}, {"else_branch", &else_b}}));
  return m.g;
}

}  // namespace

TEST_SUITE("control_flow") {
  TEST_CASE("If: branches read outer values; static outputs are planned, a constant branch too") {
    auto s = session_of(if_model(false));
    CHECK_FALSE(plan_is_dynamic(*s, {{2, 3}, {}}));
    const Tensor x = make_f32({2, 3}, {0.5f, -1, 2, 3, -4, 1.5f});
    for (bool c : {true, false}) {
      CAPTURE(c);
      const auto y = run_named(*s, {{"x", x}, {"c", make_bool(c)}}, {"y"});
      REQUIRE(y[0].shape() == Shape{2, 3});
      for (int i = 0; i < 6; ++i) {
        const float xi = x.data<float>()[i];
        CHECK(y[0].data<float>()[i] ==
              doctest::Approx(c ? xi + static_cast<float>(i + 1) : xi * xi));
      }
    }
    CHECK(s->subgraph_count() == 2);  // each branch compiled once, whatever the runs
    // The same through a .tern file: subgraphs, their captures and the outer constant survive.
    auto again = round_trip(*s, "if_model.tern");
    const auto y = run_named(*again, {{"x", x}, {"c", make_bool(true)}}, {"y"});
    CHECK(y[0].data<float>()[5] == doctest::Approx(7.5f));
  }

  TEST_CASE("If: branches of different shapes run node by node, each result right") {
    auto s = session_of(if_model(true));
    CHECK(plan_is_dynamic(*s, {{2, 3}, {}}));
    const Tensor x = make_f32({2, 3}, {1, 2, 3, 4, 5, 6});
    auto y = run_named(*s, {{"x", x}, {"c", make_bool(false)}}, {"y"});
    CHECK(y[0].shape() == Shape{});
    CHECK(y[0].data<float>()[0] == doctest::Approx(91.0f));
    y = run_named(*s, {{"x", x}, {"c", make_bool(true)}}, {"y"});
    CHECK(y[0].shape() == Shape{2, 3});
    CHECK(y[0].data<float>()[0] == doctest::Approx(2.0f));
  }

  TEST_CASE("Loop: a constant trip count, carried values and scan outputs planned statically") {
    // acc' = acc + x; scan = acc' * 2 (2 a constant of the body); M = 5, condition passed on.
    Builder m;
    m.g.opset = 17;
    m.input("x", DType::kFloat32, {3});
    const int a0 = m.input("a0", DType::kFloat32, {3});
    const int trips = m.constant("M", scalar_i64(5));
    Builder body;
    body.input("i", DType::kInt64);
    const int cond = body.input("cond", DType::kBool);
    const int acc = body.input("acc", DType::kFloat32);
    const int two = body.constant("two", make_f32({}, {2}));
    const int cond_out = body.node1("Identity", {cond}, "cond_out");
    const int acc_out = body.node1("Add", {acc, body.capture("x")}, "acc_out");
    body.outputs({cond_out, acc_out, body.node1("Mul", {acc_out, two}, "scan")});
    m.outputs(m.control("Loop", {trips, -1, a0}, {"final", "scans"}, {{"body", &body}}));
    auto s = session_of(m.g);
    CHECK_FALSE(plan_is_dynamic(*s, {{3}, {3}}));
    const Tensor x = make_f32({3}, {1, 2, 3}), a = make_f32({3}, {10, 20, 30});
    const auto out = run_named(*s, {{"x", x}, {"a0", a}}, {"final", "scans"});
    CHECK(values_f32(out[0]) == std::vector<float>{15, 30, 45});
    REQUIRE(out[1].shape() == Shape{5, 3});
    for (int k = 0; k < 5; ++k) {
      for (int j = 0; j < 3; ++j) {
        CHECK(out[1].data<float>()[k * 3 + j] ==
              doctest::Approx(
                  2.0f * (a.data<float>()[j] + static_cast<float>(k + 1) * x.data<float>()[j])));
      }
    }
    auto again = round_trip(*s, "loop_model.tern");
    CHECK(values_f32(run_named(*again, {{"x", x}, {"a0", a}}, {"final"})[0]) ==
          std::vector<float>{15, 30, 45});
  }

  TEST_CASE("Loop: a computed condition ends it; no iteration gives the initial values") {
    // while acc < limit: acc += 1 (limit read from the main graph); scan = acc.
    Builder m;
    m.g.opset = 17;
    m.input("limit", DType::kFloat32);
    const int start = m.input("start", DType::kBool);
    const int a0 = m.input("a0", DType::kFloat32);
    Builder body;
    body.input("i", DType::kInt64);
    body.input("cond", DType::kBool);
    const int acc = body.input("acc", DType::kFloat32);
    const int one = body.constant("one", make_f32({}, {1}));
    const int acc_out = body.node1("Add", {acc, one}, "acc_out");
    const int go = body.node1("Less", {acc_out, body.capture("limit")}, "go");
    body.outputs({go, acc_out, body.node1("Identity", {acc_out}, "scan")});
    m.outputs(m.control("Loop", {-1, start, a0}, {"final", "scans"}, {{"body", &body}}));
    auto s = session_of(m.g);
    CHECK(plan_is_dynamic(*s, {{}, {}, {}}));
    auto out = run_named(
        *s,
        {{"limit", make_f32({}, {4.5f})}, {"start", make_bool(true)}, {"a0", make_f32({}, {0})}},
        {"final", "scans"});
    CHECK(out[0].data<float>()[0] == 5.0f);
    CHECK(values_f32(out[1]) == std::vector<float>{1, 2, 3, 4, 5});
    out = run_named(
        *s,
        {{"limit", make_f32({}, {4.5f})}, {"start", make_bool(false)}, {"a0", make_f32({}, {7})}},
        {"final", "scans"});
    CHECK(out[0].data<float>()[0] == 7.0f);
    CHECK(out[1].shape() == Shape{0});
  }

  TEST_CASE("Loop: a carried value that grows each iteration; a run's outputs are its own") {
    // acc = Concat(acc, row + i) for n iterations (n a run input): the body's shapes change every
    // iteration, so it runs node by node and hands its carried value on without a copy. The main
    // graph also outputs a constant through Identity: each run's outputs are copies no later run
    // or other output shares.
    Builder m;
    m.g.opset = 17;
    const int n = m.input("n", DType::kInt64);
    m.input("row", DType::kFloat32, {1, 3});
    const int x0 = m.input("x0", DType::kFloat32, {0, 3});
    const int k = m.constant("k", make_f32({2}, {5, 6}));
    const int seq = m.input("seq", DType::kSequence);
    const int first = m.node1("SequenceAt", {seq, m.constant("zero", scalar_i64(0))}, "first");
    m.outputs({m.node1("Identity", {k}, "k_out"), first});
    Builder body;
    const int i = body.input("i", DType::kInt64);
    const int cond = body.input("cond", DType::kBool);
    const int acc = body.input("acc", DType::kFloat32, {-1, 3}, false);
    Attributes to_float, axis0;
    to_float.set("to", attr_int(static_cast<int64_t>(DType::kFloat32)));
    axis0.set("axis", attr_int(0));
    const int r =
        body.node1("Add", {body.capture("row"), body.node1("Cast", {i}, "fi", to_float)}, "r");
    body.outputs({body.node1("Identity", {cond}, "cond_out"),
                  body.node1("Concat", {acc, r}, "acc_out", axis0)});
    const int grown = m.control("Loop", {n, -1, x0}, {"grown"}, {{"body", &body}})[0];
    m.g.outputs.push_back(grown);
    auto s = session_of(m.g);
    CHECK(plan_is_dynamic(*s, {{}, {1, 3}, {0, 3}, {}}));
    const Tensor row = make_f32({1, 3}, {1, 2, 3});
    const Tensor x0v = Tensor::allocate(DType::kFloat32, {0, 3}).value();
    const Tensor item = make_f32({2}, {7, 8});
    const Tensor seqv = Tensor::sequence(DType::kFloat32, {item});
    auto run = [&](int64_t trips, const std::vector<std::string>& names) {
      return run_named(*s, {{"n", scalar_i64(trips)}, {"row", row}, {"x0", x0v}, {"seq", seqv}},
                       names);
    };
    for (int64_t trips : {40, 3}) {
      auto out = run(trips, {"grown", "k_out", "grown", "k_out", "first"});
      REQUIRE(out[0].shape() == Shape{trips, 3});
      std::vector<float> want;
      for (int64_t t = 0; t < trips; ++t) {
        for (float v : {1.0f, 2.0f, 3.0f}) want.push_back(v + static_cast<float>(t));
      }
      CHECK(values_f32(out[0]) == want);
      CHECK(values_f32(out[2]) == want);
      CHECK(values_f32(out[4]) == std::vector<float>{7, 8});
      // The caller owns them: writing one changes no other output, input or constant.
      for (size_t o = 0; o < out.size(); ++o)
        out[o].data<float>()[0] = -1.0f - static_cast<float>(o);
      CHECK(out[2].data<float>()[0] == -3.0f);  // not -1: grown's two copies are apart
      CHECK(values_f32(out[3]) == std::vector<float>{-4, 6});
    }
    CHECK(values_f32(item) == std::vector<float>{7, 8});
    const auto last = run(1, {"k_out", "first"});
    CHECK(values_f32(last[0]) == std::vector<float>{5, 6});
    CHECK(values_f32(last[1]) == std::vector<float>{7, 8});
  }

  TEST_CASE("Loop: a value the body appends to grows in place; pieces of any row count") {
    // acc = Concat(acc, row + i, k rows of 10 (row + i)) with k = i % 3 (or 1), for n
    // iterations. The Loop keeps acc and appends the pieces (the body computes only them: with
    // k = 1 its shapes are the same in every iteration, one plan); where the body also reads acc
    // (its condition: rows < 1000) acc is carried as before. Both give the same rows; a piece of
    // the wrong width fails the run by name.
    auto model = [](bool read_elsewhere, int64_t axis, bool varying, bool bad) {
      Builder m;
      m.g.opset = 17;
      const int n = m.input("n", DType::kInt64);
      m.input("row", DType::kFloat32, {1, 3});
      const int x0 = m.input("x0", DType::kFloat32, {-1, 3}, false);
      Builder body;
      const int i = body.input("i", DType::kInt64);
      const int cond = body.input("cond", DType::kBool);
      const int acc = body.input("acc", DType::kFloat32, {-1, 3}, false);
      Attributes to_float, axis_attr, axis0;
      to_float.set("to", attr_int(static_cast<int64_t>(DType::kFloat32)));
      axis_attr.set("axis", attr_int(axis));
      axis0.set("axis", attr_int(0));
      const int one =
          body.node1("Add", {body.capture("row"), body.node1("Cast", {i}, "fi", to_float)}, "one");
      const int k = varying ? body.node1("Mod", {i, body.constant("three", scalar_i64(3))}, "k")
                            : body.constant("k", scalar_i64(1));
      const int k1 = body.node1("Unsqueeze", {k, body.constant("ax0", make_i64({1}, {0}))}, "k1");
      const int shape =
          body.node1("Concat", {k1, body.constant("w", make_i64({1}, {3}))}, "shape", axis0);
      const int tens = body.node1(
          "Expand",
          {body.node1("Mul", {one, body.constant("ten", make_f32({}, {10}))}, "ten_x"), shape},
          "tens");
      int go = body.node1("Identity", {cond}, "cond_out");
      if (read_elsewhere) {
        const int rows = body.node1(
            "Gather", {body.node1("Shape", {acc}, "acc_shape"), body.constant("z", scalar_i64(0))},
            "rows");
        go = body.node1("Less", {rows, body.constant("most", scalar_i64(1000))}, "go");
      }
      Attributes axis1;
      axis1.set("axis", attr_int(1));
      // A bad model's pieces agree with each other, not with acc: [1 + k, 6].
      const int first = bad ? body.node1("Concat", {one, one}, "wide", axis1) : one;
      const int more = bad ? body.node1("Concat", {tens, tens}, "wide_tens", axis1) : tens;
      body.outputs({go, body.node1("Concat", {acc, first, more}, "acc_out", axis_attr)});
      m.outputs(m.control("Loop", {n, -1, x0}, {"grown"}, {{"body", &body}}));
      return session_of(m.g);
    };
    const Tensor row = make_f32({1, 3}, {1, 2, 3});
    const Tensor x0 = make_f32({2, 3}, {-1, -2, -3, -4, -5, -6});
    for (bool read_elsewhere : {false, true}) {
      for (int64_t axis : {0, -2}) {
        CAPTURE(read_elsewhere);
        CAPTURE(axis);
        const bool varying = axis == 0;
        auto s = model(read_elsewhere, axis, varying, false);
        for (int64_t trips : {0, 1, 25}) {
          CAPTURE(trips);
          std::vector<float> want = values_f32(x0);
          for (int64_t t = 0; t < trips; ++t) {
            for (int rep = 0; rep <= (varying ? t % 3 : 1); ++rep) {
              for (float v : {1.0f, 2.0f, 3.0f}) {
                want.push_back((v + static_cast<float>(t)) * (rep ? 10.0f : 1.0f));
              }
            }
          }
          const auto out =
              run_named(*s, {{"n", scalar_i64(trips)}, {"row", row}, {"x0", x0}}, {"grown"});
          REQUIRE(out[0].shape() == Shape{static_cast<int64_t>(want.size() / 3), 3});
          CHECK(values_f32(out[0]) == want);
          CHECK(out[0].raw() != x0.raw());
        }
#if !defined(TERN_MINIMAL)  // (the minimal library carries them: ops/loop.cpp)
        // Appended, the body has a plan or two; carried, one per length of acc (25 and more).
        CHECK((s->memory().plans < 10) == !read_elsewhere);
#endif
      }
      auto bad = model(read_elsewhere, 0, true, true);
      std::vector<Tensor> out;
      const Tensor n = scalar_i64(5);
      const Status st = bad->run({"n", "row", "x0"}, {&n, &row, &x0}, {"grown"}, &out);
      CHECK(st.code() == Code::kInvalidArgument);
      MESSAGE(st.message());
      CHECK(st.message().find("iteration 0") != std::string::npos);
    }
  }

  TEST_CASE("Loop: 34 carried values, the second appended; the 34th a counter carried as usual") {
    // Carried 1 is appended (Concat on axis 0); 0 and 2..32 pass through; 33 counts the
    // iterations. (Value 33 once shared value 1's bit of the appended-values mask.)
    Builder m;
    m.g.opset = 17;
    const int n = m.input("n", DType::kInt64);
    Builder body;
    body.input("i", DType::kInt64);
    const int cond = body.input("cond", DType::kBool);
    std::vector<int> ins{n, -1}, outs{body.node1("Identity", {cond}, "cond_out")};
    std::vector<std::string> names;
    Attributes axis0;
    axis0.set("axis", attr_int(0));
    for (int j = 0; j < 34; ++j) {
      const std::string name = "v" + std::to_string(j);
      const int init = m.constant(
          name + "_0", j == 1 ? make_f32({1, 2}, {7, 8}) : make_f32({}, {static_cast<float>(j)}));
      const int in = body.input(name, DType::kFloat32);
      ins.push_back(init);
      names.push_back(name + "_final");
      if (j == 1) {  // in [k, 2] -> [k + 1, 2]
        const int row = body.constant("row", make_f32({1, 2}, {1, 2}));
        outs.push_back(body.node1("Concat", {in, row}, "grown", axis0));
      } else if (j == 33) {
        outs.push_back(body.node1("Add", {in, body.constant("step", make_f32({}, {1}))}, "count"));
      } else {
        outs.push_back(body.node1("Identity", {in}, name + "_out"));
      }
    }
    body.outputs(outs);
    m.outputs(m.control("Loop", ins, names, {{"body", &body}}));
    auto s = session_of(m.g);
    const auto out = run_named(*s, {{"n", scalar_i64(3)}}, names);
    CHECK(values_f32(out[0]) == std::vector<float>{0});
    CHECK(values_f32(out[1]) == std::vector<float>{7, 8, 1, 2, 1, 2, 1, 2});
    CHECK(values_f32(out[32]) == std::vector<float>{32});
    CHECK(values_f32(out[33]) == std::vector<float>{36});  // 33 + 3 iterations
  }

  TEST_CASE("Nested: an If inside a Loop body reads values of the main graph, two levels up") {
    Builder m;
    m.g.opset = 17;
    m.input("bias", DType::kFloat32, {2});
    m.input("flag", DType::kBool);
    const int a0 = m.input("a0", DType::kFloat32, {2});
    const int trips = m.constant("M", scalar_i64(3));
    Builder body;
    body.input("i", DType::kInt64);
    const int cond = body.input("cond", DType::kBool);
    const int acc = body.input("acc", DType::kFloat32);
    Builder add, sub;
    add.g.outputs = {add.node1("Add", {add.capture("acc"), add.capture("bias")}, "up")};
    sub.g.outputs = {sub.node1("Sub", {sub.capture("acc"), sub.capture("bias")}, "down")};
    const int next = body.control("If", {body.capture("flag")}, {"next"},
                                  {{"then_branch", &add}, {"else_branch", &sub}})[0];
    (void)acc;
    body.outputs({body.node1("Identity", {cond}, "cond_out"), next});
    m.outputs(m.control("Loop", {trips, -1, a0}, {"final"}, {{"body", &body}}));
    auto s = session_of(m.g);
    const Tensor bias = make_f32({2}, {1, -2}), a = make_f32({2}, {0, 0});
    CHECK(values_f32(run_named(*s, {{"bias", bias}, {"flag", make_bool(true)}, {"a0", a}},
                               {"final"})[0]) == std::vector<float>{3, -6});
    CHECK(values_f32(run_named(*s, {{"bias", bias}, {"flag", make_bool(false)}, {"a0", a}},
                               {"final"})[0]) == std::vector<float>{-3, 6});
    auto again = round_trip(*s, "nested_model.tern");
    CHECK(values_f32(run_named(*again, {{"bias", bias}, {"flag", make_bool(true)}, {"a0", a}},
                               {"final"})[0]) == std::vector<float>{3, -6});
  }

  TEST_CASE("Scan (opset 11): a reversed scan input, two states, a scan output on axis 1") {
    // s' = s + x_t, p' = p * 2; y_t = s'; x scanned last to first; y stacked on axis 1.
    Builder m;
    m.g.opset = 11;
    const int s0 = m.input("s0", DType::kFloat32, {2});
    const int p0 = m.input("p0", DType::kFloat32, {});
    const int xs = m.input("xs", DType::kFloat32, {4, 2});
    Builder body;
    const int s = body.input("s", DType::kFloat32);
    const int p = body.input("p", DType::kFloat32);
    const int x = body.input("x", DType::kFloat32);
    const int two = body.constant("two", make_f32({}, {2}));
    const int s_out = body.node1("Add", {s, x}, "s_out");
    body.outputs(
        {s_out, body.node1("Mul", {p, two}, "p_out"), body.node1("Identity", {s_out}, "y")});
    Attributes at;
    at.set("num_scan_inputs", attr_int(1));
    at.set("scan_input_directions", attr_ints({1}));
    at.set("scan_output_axes", attr_ints({1}));
    m.outputs(m.control("Scan", {s0, p0, xs}, {"s_final", "p_final", "ys"}, {{"body", &body}}, at));
    auto sess = session_of(m.g);
    CHECK_FALSE(plan_is_dynamic(*sess, {{2}, {}, {4, 2}}));
    const Tensor xv = make_f32({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
    const auto out =
        run_named(*sess, {{"s0", make_f32({2}, {0, 0})}, {"p0", make_f32({}, {1})}, {"xs", xv}},
                  {"s_final", "p_final", "ys"});
    CHECK(values_f32(out[0]) == std::vector<float>{16, 20});
    CHECK(out[1].data<float>()[0] == 16.0f);
    REQUIRE(out[2].shape() == Shape{2, 4});
    // Steps take rows 3, 2, 1, 0: running sums 7, 12, 15, 16 and 8, 14, 18, 20.
    CHECK(values_f32(out[2]) == std::vector<float>{7, 12, 15, 16, 8, 14, 18, 20});
  }

  TEST_CASE("A Loop body runs optimized kernels, is compiled once, and shows in the profile") {
    // h' = Relu(h W + b) for 20 steps, W [64, 64] and b constants of the body.
    Builder m;
    m.g.opset = 17;
    const int h0 = m.input("h0", DType::kFloat32, {1, 64});
    const int trips = m.constant("M", scalar_i64(20));
    Builder body;
    body.input("i", DType::kInt64);
    const int cond = body.input("cond", DType::kBool);
    const int h = body.input("h", DType::kFloat32);
    std::mt19937 rng(3);
    const int w = body.constant("W", random_f32({64, 64}, rng));
    const int b = body.constant("b", random_f32({64}, rng));
    const int hw = body.node1("MatMul", {h, w}, "hw");
    const int next = body.node1("Relu", {body.node1("Add", {hw, b}, "hwb")}, "next");
    body.outputs({body.node1("Identity", {cond}, "cond_out"), next});
    m.outputs(m.control("Loop", {trips, -1, h0}, {"h_final"}, {{"body", &body}}));
    auto s = session_of(m.g, 1, "loop_profile.json");
    const Tensor hin = random_f32({1, 64}, rng);
    std::vector<float> want = values_f32(hin);
    for (int step = 0; step < 20; ++step) {
      const Tensor& W = body.g.values[static_cast<size_t>(w)].constant.value();
      const Tensor& B = body.g.values[static_cast<size_t>(b)].constant.value();
      std::vector<float> next_h(64);
      for (int j = 0; j < 64; ++j) {
        double acc = B.data<float>()[j];
        for (int k = 0; k < 64; ++k) acc += double(want[k]) * W.data<float>()[k * 64 + j];
        next_h[j] = std::max(0.0f, static_cast<float>(acc));
      }
      want = next_h;
    }
    for (int r = 0; r < 3; ++r) {
      const auto got = values_f32(run_named(*s, {{"h0", hin}}, {"h_final"})[0]);
      for (int j = 0; j < 64; ++j) CHECK(got[j] == doctest::Approx(want[j]).epsilon(1e-4));
    }
    CHECK(s->subgraph_count() == 1);
    // The body's nodes ran as events inside the Loop step, on the fused MatMul kernel.
    const std::vector<ProfileEvent> events = s->profiler()->events();
    const ProfileEvent* loop = nullptr;
    int body_events = 0;
    std::string matmul_kernel;
    for (const ProfileEvent& e : events) {
      std::string op;
      for (const auto& [k, v] : e.args) {
        if (k == "op") op = v;
        if (k == "kernel" && (op == "FusedMatMul" || op == "MatMul")) matmul_kernel = v;
      }
      if (op == "Loop") loop = &e;
    }
    REQUIRE(loop != nullptr);
    for (const ProfileEvent& e : events) {
      if (e.cat == "node" && e.ts_us >= loop->ts_us &&
          e.ts_us + e.dur_us <= loop->ts_us + loop->dur_us + 1 && &e != loop) {
        ++body_events;
      }
    }
    MESSAGE("body MatMul kernel: ", matmul_kernel,
            "; events inside the last Loop step: ", body_events);
    CHECK(body_events >= 20);
    CHECK(matmul_kernel != "reference");
    std::remove("loop_profile.json");
  }

  TEST_CASE("Sequences: a Loop carries one, an Optional wraps it; both through a .tern file") {
    // seq = []; for i in 0..3: seq.insert(x * i); y = ConcatFromSequence(seq, new_axis);
    // opt = Optional(seq); n = OptionalHasElement(opt).
    Builder m;
    m.g.opset = 18;
    m.input("x", DType::kFloat32, {2});
    const int trips = m.constant("M", scalar_i64(4));
    Attributes empty_attrs;
    empty_attrs.set("dtype", attr_int(1));
    const int empty = m.node1("SequenceEmpty", {}, "empty", empty_attrs);
    Builder body;
    const int i = body.input("i", DType::kInt64);
    const int cond = body.input("cond", DType::kBool);
    const int seq = body.input("seq", DType::kSequence);
    Attributes to_float;
    to_float.set("to", attr_int(1));
    const int fi = body.node1("Cast", {i}, "fi", to_float);
    const int item = body.node1("Mul", {body.capture("x"), fi}, "item");
    body.outputs({body.node1("Identity", {cond}, "cond_out"),
                  body.node1("SequenceInsert", {seq, item}, "seq_out")});
    const int all = m.control("Loop", {trips, -1, empty}, {"all"}, {{"body", &body}})[0];
    Attributes stack;
    stack.set("axis", attr_int(0));
    stack.set("new_axis", attr_int(1));
    const int y = m.node1("ConcatFromSequence", {all}, "y", stack);
    const int opt = m.node1("Optional", {all}, "opt");
    const int has = m.node1("OptionalHasElement", {opt}, "has");
    m.outputs({y, all, has});
    auto s = session_of(m.g);
    const Tensor x = make_f32({2}, {1.5f, -2});
    for (int pass = 0; pass < 2; ++pass) {
      CAPTURE(pass);
      auto again = pass ? round_trip(*s, "sequence_model.tern") : nullptr;
      Session& sess = pass ? *again : *s;
      const auto out = run_named(sess, {{"x", x}}, {"y", "all", "has"});
      REQUIRE(out[0].shape() == Shape{4, 2});
      CHECK(values_f32(out[0]) == std::vector<float>{0, 0, 1.5f, -2, 3, -4, 4.5f, -6});
      REQUIRE(out[1].as_sequence() != nullptr);
      CHECK(out[1].as_sequence()->items.size() == 4);
      CHECK(out[2].int_at(0) == 1);
    }
  }

  TEST_CASE("Bad control flow is refused by name: unknown body op, wrong counts, bad condition") {
    Builder m;
    m.g.opset = 17;
    const int a0 = m.input("a0", DType::kFloat32, {2});
    const int trips = m.constant("M", scalar_i64(2));
    Builder body;
    body.input("i", DType::kInt64);
    const int cond = body.input("cond", DType::kBool);
    const int acc = body.input("acc", DType::kFloat32);
    body.outputs({cond, body.node1("NoSuchOp", {acc}, "x")});
    m.outputs(m.control("Loop", {trips, -1, a0}, {"final"}, {{"body", &body}}));
    Graph g = m.g;
    auto model = Model::create(std::move(g), nullptr, "test");
    REQUIRE(model.has_value());
    SessionConfig cfg;
    cfg.backends = {backends::get("cpu").value()};
    auto bad = Session::create(*model, cfg);
    REQUIRE_FALSE(bad.has_value());
    CHECK(bad.status().code() == Code::kUnsupported);
    CHECK(bad.status().message().find("NoSuchOp") != std::string::npos);

    // A body that takes 2 inputs for 1 carried value (needs 3).
    Builder m2;
    m2.g.opset = 17;
    const int b0 = m2.input("b0", DType::kFloat32, {2});
    const int t2 = m2.constant("M", scalar_i64(2));
    Builder body2;
    body2.input("i", DType::kInt64);
    const int c2 = body2.input("cond", DType::kBool);
    body2.outputs({c2, body2.capture("b0")});
    m2.outputs(m2.control("Loop", {t2, -1, b0}, {"final"}, {{"body", &body2}}));
    auto model2 = Model::create(m2.g, nullptr, "test");
    REQUIRE(model2.has_value());
    auto bad2 = Session::create(*model2, cfg);
    REQUIRE_FALSE(bad2.has_value());
    CHECK(bad2.status().code() == Code::kInvalidModel);
    CHECK(bad2.status().message().find("body must take 3") != std::string::npos);

    // An If whose condition is float.
    Builder m3;
    m3.g.opset = 17;
    const int f = m3.input("f", DType::kFloat32);
    Builder t3, e3;
    t3.g.outputs = {t3.node1("Identity", {t3.capture("f")}, "t")};
    e3.g.outputs = {e3.node1("Identity", {e3.capture("f")}, "e")};
    m3.outputs(m3.control("If", {f}, {"y"}, {{"then_branch", &t3}, {"else_branch", &e3}}));
    auto model3 = Model::create(m3.g, nullptr, "test");
    REQUIRE(model3.has_value());
    auto bad3 = Session::create(*model3, cfg);  // planned at creation: its shapes are static
    REQUIRE_FALSE(bad3.has_value());
    CHECK(bad3.status().message().find("supported: bool") != std::string::npos);
  }
}
