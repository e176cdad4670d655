// The planner across shapes (core/plan): plans for new input shapes of one class come from a
// template (only shape inference, the changed kernels and the memory plan re-run), weights are
// packed once per session whatever the shapes, fusions are checked again per shape and a full plan
// is made where they no longer hold, and the plan cache keeps a bounded number of bytes. Every
// plan's outputs are checked against a session that planned those shapes from scratch.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <utility>

#include "api/api_internal.h"
#include "c_api.h"
#include "core/kernel_registry.h"
#include "core/threading.h"
#include "core/weight_store.h"
#include "graph_builder.h"
#include "test_util.h"

using namespace tern;
using namespace tern_test;

namespace {

// y = Gelu(x W1 + b1) W2 + x: an encoder's MLP block over x [batch, seq, 16] with dynamic dims.
std::shared_ptr<const Model> mlp_model(std::mt19937& rng) {
  GraphMaker m;
  m.g.opset = 13;
  ValueType t{DType::kFloat32, true, {Dim{-1, "batch"}, Dim{-1, "seq"}, Dim{16, ""}}};
  const int x = m.g.add_value("x", t);
  m.g.inputs = {x};
  const int w1 = m.constant("w1", random_f32({16, 40}, rng));
  const int b1 = m.constant("b1", random_f32({40}, rng));
  const int w2 = m.constant("w2", random_f32({40, 16}, rng));
  const int h = m.node("Add", {m.node("MatMul", {x, w1}), b1});
  // GELU written out as exported models have it: 0.5 * h * (1 + erf(h / sqrt 2)).
  const int half = m.constant("half", make_f32({}, {0.5f}));
  const int one = m.constant("one", make_f32({}, {1.0f}));
  const int sqrt2 = m.constant("sqrt2", make_f32({}, {std::sqrt(2.0f)}));
  const int erf = m.node("Erf", {m.node("Div", {h, sqrt2})});
  const int gelu = m.node("Mul", {m.node("Mul", {h, m.node("Add", {erf, one})}), half});
  const int y = m.node("Add", {m.node("MatMul", {gelu, w2}), x});
  m.g.outputs = {y};
  return Model::create(std::move(m.g), nullptr, "mlp").value();
}

std::unique_ptr<Session> cpu_session(std::shared_ptr<const Model> model,
                                     uint64_t plan_cache = SessionConfig::kDefaultPlanCacheBytes,
                                     bool winograd = true) {
  SessionConfig cfg;
  cfg.backends = {backends::get("cpu").value()};
  cfg.overrides.set(FlagId::kNumThreads, 2);
  cfg.overrides.set(FlagId::kCpuConvWinograd, winograd);
  cfg.plan_cache_bytes = plan_cache;
  return Session::create(std::move(model), cfg).value();
}

// A CPU session with the mha fastpath off.
std::unique_ptr<Session> unfused_session(std::shared_ptr<const Model> model) {
  SessionConfig cfg;
  cfg.backends = {backends::get("cpu").value()};
  cfg.overrides.set(FlagId::kMhaFastpath, 0);
  return Session::create(std::move(model), cfg).value();
}

// Runs `fused` (the mha fastpath on) and `plain` (off) on the same inputs and checks that they
// agree and that `fused` ran one Attention step where no Transpose, Div or Mul is left and
// `reshapes` Reshapes; returns how many Transposes `plain` ran.
size_t check_fused_attention(Session& fused, Session& plain, const std::vector<std::string>& names,
                             const std::vector<const Tensor*>& inputs, const std::string& yn,
                             size_t reshapes) {
  std::vector<Tensor> got, want;
  REQUIRE(fused.run(names, inputs, {yn}, &got).is_ok());
  REQUIRE(plain.run(names, inputs, {yn}, &want).is_ok());
  REQUIRE(got[0].shape() == want[0].shape());
  const Comparison c = compare(got[0].data<float>(), want[0].data<float>(),
                               static_cast<size_t>(want[0].numel()), 1e-5, 1e-5);
  CHECK(c.mismatches == 0);
  const auto plan = fused.last_plan();
  CHECK(plan->fused_attention == 1);
  std::map<std::string, size_t> ops;
  for (const PlanStep& st : plan->steps) ++ops[st.op_node->op_type];
  CHECK(ops["Transpose"] == 0);
  CHECK(ops["Reshape"] == reshapes);
  CHECK(ops["Div"] + ops["Mul"] == 0);
  CHECK(ops["Attention"] == 1);
  size_t plain_transposes = 0;
  for (const PlanStep& st : plain.last_plan()->steps) {
    plain_transposes += st.op_node->op_type == "Transpose";
  }
  return plain_transposes;
}

std::vector<float> run_one(Session& s, const std::string& in, const Tensor& x,
                           const std::string& out) {
  std::vector<Tensor> outs;
  const Status st = s.run({in}, {&x}, {out}, &outs);
  REQUIRE_MESSAGE(st.is_ok(), st.message());
  return values_f32(outs[0]);
}

}  // namespace

TEST_SUITE("core") {
  TEST_CASE("planner: new shapes reuse the template; weights are packed once per session") {
    std::mt19937 rng(5);
    auto model = mlp_model(rng);
    auto s = cpu_session(model);
    const std::string y = model->graph().value_name(model->graph().outputs[0]);
    size_t packed = 0;
    const std::vector<Shape> shapes = {{1, 3, 16}, {2, 7, 16}, {1, 1, 16}, {4, 33, 16}, {1, 3, 16}};
    for (size_t i = 0; i < shapes.size(); ++i) {
      const Tensor x = random_f32(shapes[i], rng);
      const std::vector<float> got = run_one(*s, "x", x, y);
      // The same shapes planned from scratch by a session of their own.
      auto fresh = cpu_session(model);
      CHECK(run_one(*fresh, "x", x, y) == got);
      const SessionMemory m = s->memory();
      if (i == 0) packed = m.packed_weight_bytes;
      CAPTURE(i);
      CHECK(m.packed_weight_bytes == packed);  // packed once, whatever the shapes
      CHECK(m.full_plans == 1);                // the first plan's decisions serve every shape
      CHECK(m.template_plans == std::min<size_t>(i, 3));  // the last shape is a cache hit
    }
    CHECK(packed > 0);
    CHECK(s->optimizer_report().matmuls_fused == 1);  // (the second MatMul adds x, not a bias)
  }

  TEST_CASE("planner: the plan cache keeps its byte limit, least recently used first out") {
    std::mt19937 rng(6);
    auto model = mlp_model(rng);
    const std::string y = model->graph().value_name(model->graph().outputs[0]);
    auto none = cpu_session(model, 0);
    auto big = cpu_session(model, uint64_t{64} << 20);
    for (int64_t seq = 1; seq <= 6; ++seq) {
      const Tensor x = random_f32({1, seq, 16}, rng);
      CHECK(run_one(*none, "x", x, y) == run_one(*big, "x", x, y));
    }
    CHECK(none->memory().plans == 1);  // the most recent plan is always kept
    CHECK(big->memory().plans == 6);
    CHECK(big->memory().plan_bytes > none->memory().plan_bytes);
    // A limit of two plans' worth: the oldest go first, a reused plan moves to the front.
    const size_t each = big->memory().plan_bytes / 6;
    auto two = cpu_session(model, 2 * each + each / 2);
    for (int64_t seq : {1, 2, 1, 3}) run_one(*two, "x", random_f32({1, seq, 16}, rng), y);
    CHECK(two->memory().plans == 2);
    const size_t built = two->memory().full_plans + two->memory().template_plans;
    run_one(*two, "x", random_f32({1, 1, 16}, rng), y);  // seq 1 was used after seq 2: kept
    CHECK(two->memory().full_plans + two->memory().template_plans == built);
    run_one(*two, "x", random_f32({1, 2, 16}, rng), y);  // seq 2 was evicted: planned again
    CHECK(two->memory().full_plans + two->memory().template_plans == built + 1);
  }

  TEST_CASE("planner: fused attention is checked per shape; a shape it does not fit plans anew") {
    // softmax(q kᵀ / 8 + mask) v over q, k, v [1, 2, seq, 8] and a mask broadcast from [1, 1, 1,
    // seq_kv].
    GraphMaker m;
    m.g.opset = 13;
    const int q = m.input("q", {Dim{1, ""}, Dim{2, ""}, Dim{-1, "sq"}, Dim{8, ""}});
    const int k = m.input("k", {Dim{-1, "b"}, Dim{2, ""}, Dim{-1, "skv"}, Dim{8, ""}});
    const int v = m.input("v", {Dim{1, ""}, Dim{2, ""}, Dim{-1, "skv"}, Dim{8, ""}});
    const int mask = m.input("mask", {Dim{1, ""}, Dim{1, ""}, Dim{1, ""}, Dim{-1, "skv"}});
    Attributes perm;
    perm.set("perm", attr_ints({0, 1, 3, 2}));
    const int kt = m.node("Transpose", {k}, perm);
    const int scale = m.constant("scale", make_f32({}, {8.0f}));
    const int s = m.node("Div", {m.node("MatMul", {q, kt}), scale});
    Attributes axis;
    axis.set("axis", attr_int(-1));
    const int p = m.node("Softmax", {m.node("Add", {s, mask})}, axis);
    const int y = m.node("MatMul", {p, v});
    m.g.outputs = {y};
    auto model = Model::create(std::move(m.g), nullptr, "attn").value();
    auto session = cpu_session(model);
    std::mt19937 rng(7);
    const std::string yn = model->graph().value_name(y);
    auto run = [&](Session& ses, int64_t kb, int64_t sq, int64_t skv, std::vector<Tensor>* outs) {
      Tensor tq = random_f32({1, 2, sq, 8}, rng), tk = random_f32({kb, 2, skv, 8}, rng);
      Tensor tv = random_f32({1, 2, skv, 8}, rng), tm = random_f32({1, 1, 1, skv}, rng);
      REQUIRE(ses.run({"q", "k", "v", "mask"}, {&tq, &tk, &tv, &tm}, {yn}, outs).is_ok());
      std::vector<Tensor> want;
      auto fresh = cpu_session(model);
      REQUIRE(fresh->run({"q", "k", "v", "mask"}, {&tq, &tk, &tv, &tm}, {yn}, &want).is_ok());
      const Comparison c = compare((*outs)[0].data<float>(), want[0].data<float>(),
                                   static_cast<size_t>(want[0].numel()), 1e-5, 1e-6);
      CHECK(c.mismatches == 0);
    };
    std::vector<Tensor> out;
    run(*session, 1, 4, 6, &out);
    CHECK(session->last_plan()->fused_attention == 1);
    run(*session, 1, 9, 13, &out);  // other lengths: the fusion holds, from the template
    CHECK(session->last_plan()->fused_attention == 1);
    CHECK(session->memory().full_plans == 1);
    CHECK(session->memory().template_plans == 1);
    // K with a batch of 3: MatMul broadcasts Q over it, Attention cannot, so the template's fusion
    // does not hold; the shape gets a full plan of its own, without the fusion.
    run(*session, 3, 4, 6, &out);
    CHECK(out[0].shape() == Shape{3, 2, 4, 8});
    CHECK(session->last_plan()->fused_attention == 0);
    CHECK(session->memory().full_plans == 2);
  }

  TEST_CASE("planner: attention over projections split into heads fuses in the 3-D form") {
    // An encoder's self-attention as exporters write it: x [1, seq, 16] projected, each
    // projection split into 2 heads of 8 (Reshape, Transpose [0, 2, 1, 3]), K transposed again,
    // softmax(q kᵀ / sqrt 8 + mask) v, the heads merged back (Transpose, Reshape) and projected.
    std::mt19937 rng(9);
    GraphMaker m;
    m.g.opset = 13;
    const int x = m.input("x", {Dim{1, ""}, Dim{-1, "seq"}, Dim{16, ""}});
    const int mask = m.input("mask", {Dim{1, ""}, Dim{1, ""}, Dim{1, ""}, Dim{-1, "seq"}});
    const int split = m.constant("split", make_i64({4}, {1, -1, 2, 8}));
    const int merge = m.constant("merge", make_i64({3}, {1, -1, 16}));
    Attributes p0213, p0132, axis;
    p0213.set("perm", attr_ints({0, 2, 1, 3}));
    p0132.set("perm", attr_ints({0, 1, 3, 2}));
    axis.set("axis", attr_int(-1));
    auto heads = [&](const char* w) {
      const int proj = m.node("MatMul", {x, m.constant(w, random_f32({16, 16}, rng))});
      return m.node("Transpose", {m.node("Reshape", {proj, split})}, p0213);
    };
    const int q = heads("wq"), k = heads("wk"), v = heads("wv");
    const int scale = m.constant("scale", make_f32({}, {std::sqrt(8.0f)}));
    const int s = m.node("Div", {m.node("MatMul", {q, m.node("Transpose", {k}, p0132)}), scale});
    const int p = m.node("Softmax", {m.node("Add", {s, mask})}, axis);
    const int y4 = m.node("MatMul", {p, v});
    const int y3 = m.node("Reshape", {m.node("Transpose", {y4}, p0213), merge});
    const int y = m.node("MatMul", {y3, m.constant("wo", random_f32({16, 16}, rng))});
    m.g.outputs = {y};
    auto model = Model::create(std::move(m.g), nullptr, "attn3d").value();
    const std::string yn = model->graph().value_name(y);
    auto session = cpu_session(model);
    auto plain = unfused_session(model);
    int64_t n = 0;
    for (int64_t seq : {5, 9, 1, 33}) {
      CAPTURE(seq);
      const Tensor tx = random_f32({1, seq, 16}, rng), tm = random_f32({1, 1, 1, seq}, rng);
      // The Attention step reads the projections and writes the merged value: no Transpose or
      // Reshape runs, and the unfused session has all five Transposes.
      CHECK(check_fused_attention(*session, *plain, {"x", "mask"}, {&tx, &tm}, yn, 0) == 5);
      ++n;
    }
    CHECK(n == 4);
    CHECK(session->memory().full_plans == 1);  // the other lengths refit the 3-D form
  }

  TEST_CASE("planner: sequence-first attention (torch's MultiheadAttention) fuses, Q's scale too") {
    // torch's export of nn.MultiheadAttention: x [seq, batch, 16] projected, each projection
    // reshaped to [seq, batch * 2 heads, 8] and transposed [1, 0, 2] (K [1, 2, 0]), Q scaled by
    // 1 / sqrt 8 (torch divides; here the constant multiplies from the left), softmax(q kᵀ +
    // mask) v, transposed back [1, 0, 2], reshaped to [seq * batch, 16] and projected.
    std::mt19937 rng(13);
    GraphMaker m;
    m.g.opset = 13;
    const int x = m.input("x", {Dim{-1, "seq"}, Dim{-1, "batch"}, Dim{16, ""}});
    const int mask = m.input("mask", {Dim{-1, "seq"}, Dim{-1, "seq"}});
    const int split = m.constant("split", make_i64({3}, {0, -1, 8}));
    const int merge = m.constant("merge", make_i64({2}, {-1, 16}));
    Attributes p102, p120, axis;
    p102.set("perm", attr_ints({1, 0, 2}));
    p120.set("perm", attr_ints({1, 2, 0}));
    axis.set("axis", attr_int(-1));
    auto heads = [&](const char* w, const Attributes& perm) {
      const int proj = m.node("MatMul", {x, m.constant(w, random_f32({16, 16}, rng))});
      return m.node("Transpose", {m.node("Reshape", {proj, split})}, perm);
    };
    const int scale = m.constant("scale", make_f32({}, {1.0f / std::sqrt(8.0f)}));
    const int q = m.node("Mul", {scale, heads("wq", p102)});
    const int kt = heads("wk", p120), v = heads("wv", p102);
    const int p = m.node("Softmax", {m.node("Add", {m.node("MatMul", {q, kt}), mask})}, axis);
    const int y3 = m.node("Transpose", {m.node("MatMul", {p, v})}, p102);
    const int y = m.node(
        "MatMul", {m.node("Reshape", {y3, merge}), m.constant("wo", random_f32({16, 16}, rng))});
    m.g.outputs = {y};
    auto model = Model::create(std::move(m.g), nullptr, "attn_seq_first").value();
    const std::string yn = model->graph().value_name(y);
    auto session = cpu_session(model);
    auto plain = unfused_session(model);
    for (const auto& sb : {std::pair<int64_t, int64_t>{5, 1}, {9, 2}, {1, 3}, {33, 1}}) {
      // (Plain variables: clang's lambdas, CAPTURE's, cannot capture structured bindings.)
      const int64_t seq = sb.first, batch = sb.second;
      CAPTURE(seq);
      CAPTURE(batch);
      const Tensor tx = random_f32({seq, batch, 16}, rng), tm = random_f32({seq, seq}, rng);
      // The Attention step reads the [seq, batch * heads, 8] values and writes the transposed-back
      // one: no Transpose or Mul runs (the unfused session has five Transposes, K's split in two;
      // the four Reshapes to and from heads stay, copies of nothing).
      CHECK(check_fused_attention(*session, *plain, {"x", "mask"}, {&tx, &tm}, yn, 4) == 5);
    }
  }

  // Positional embeddings: Gather(table [128, 256], Range(0, seq)) has only known inputs, but its
  // output grows with the length.
  std::shared_ptr<const Model> positional_model(std::mt19937 & rng, int* table, std::string* yn) {
    GraphMaker m;
    m.g.opset = 13;
    const int x =
        m.g.add_value("x", ValueType{DType::kFloat32, true, {Dim{-1, "seq"}, Dim{256, ""}}});
    m.g.inputs = {x};
    *table = m.constant("table", random_f32({128, 256}, rng));
    const int zero = m.constant("zero", make_i64({}, {0}));
    const int one = m.constant("one", make_i64({}, {1}));
    const int idx0 = m.constant("idx0", make_i64({1}, {0}));
    Attributes axis0;
    axis0.set("axis", attr_int(0));
    const int seq_len =
        m.node("Squeeze", {m.node("Gather", {m.node("Shape", {x}), idx0}, axis0), idx0});
    const int pos = m.node("Gather", {*table, m.node("Range", {zero, seq_len, one})}, axis0);
    const int y = m.node("Add", {x, pos});
    m.g.outputs = {y};
    auto model = Model::create(std::move(m.g), nullptr, "pos").value();
    *yn = model->graph().value_name(y);
    return model;
  }

  TEST_CASE("planner: a large value computable while planning runs as a step instead") {
    // Past 64 KiB the embeddings run in the arena, and plans hold no copy of them; Range's few
    // indices are still computed while planning. Once a plan runs them as a step, its template
    // keeps doing so for short lengths too: one template serves every length.
    std::mt19937 rng(10);
    int table = 0;
    std::string yn;
    auto model = positional_model(rng, &table, &yn);
    auto session = cpu_session(model);
    const float* tab = model->graph().values[static_cast<size_t>(table)].constant->data<float>();
    for (int64_t seq : {3, 100, 128, 40}) {
      CAPTURE(seq);
      const Tensor tx = random_f32({seq, 256}, rng);
      const std::vector<float> got = run_one(*session, "x", tx, yn);
      for (int64_t i = 0; i < seq * 256; ++i) {
        REQUIRE(got[static_cast<size_t>(i)] == tx.data<float>()[i] + tab[i]);
      }
      const auto plan = session->last_plan();
      size_t known = 0;
      for (const auto& t : plan->known) known += t->byte_size();
      bool gather_step = false;
      for (const PlanStep& st : plan->steps) gather_step |= st.op_node->op_type == "Gather";
      // 3: computed while planning (small, the first plan); 100: too large for that, a plan of
      // its own; 128 and 40: that plan's template.
      CHECK(gather_step == (seq != 3));
      // Range's indices and the shape math; the embeddings only while they are small.
      CHECK(known <= static_cast<size_t>(seq) * 8 + 64 + (gather_step ? 0 : seq * 256 * 4));
    }
    CHECK(session->memory().full_plans == 2);
    CHECK(session->memory().template_plans == 2);
  }

  TEST_CASE("planner: each plan made for new shapes is a profile event, refitted or full") {
    std::mt19937 rng(11);
    int table = 0;
    std::string yn;
    auto model = positional_model(rng, &table, &yn);
    SessionConfig cfg;
    cfg.backends = {backends::get("cpu").value()};
    cfg.profile_path = "planner_profile.json";
    auto session = Session::create(model, cfg).value();
    for (int64_t seq : {100, 3, 40, 3}) {  // the last one is cached: no plan is made
      const Tensor tx = random_f32({seq, 256}, rng);
      run_one(*session, "x", tx, yn);
    }
    std::vector<ProfileEvent> plans;
    for (const ProfileEvent& e : session->profiler()->events()) {
      if (e.name == "plan") plans.push_back(e);
    }
    REQUIRE(plans.size() == 3);
    const char* want_shapes[] = {"[100,256]", "[3,256]", "[40,256]"};
    for (size_t i = 0; i < plans.size(); ++i) {
      CAPTURE(i);
      CHECK(plans[i].cat == "session");
      CHECK(plans[i].dur_us > 0);
      std::map<std::string, std::string> args(plans[i].args.begin(), plans[i].args.end());
      CHECK(args["input_shapes"] == want_shapes[i]);
      CHECK(args["from"] == (i == 0 ? "full plan" : "template"));
    }
    CHECK(session->memory().full_plans == 1);  // the short lengths ran the embeddings as a step
    session.reset();
    std::remove("planner_profile.json");
  }

  TEST_CASE("planner: a convolution's residual fusion and blocked layouts across image sizes") {
    std::mt19937 rng(8);
    GraphMaker m;
    m.g.opset = 13;
    const int x = m.g.add_value(
        "x",
        ValueType{DType::kFloat32, true, {Dim{1, ""}, Dim{16, ""}, Dim{-1, "h"}, Dim{-1, "w"}}});
    m.g.inputs = {x};
    Attributes pads;
    pads.set("pads", attr_ints({1, 1, 1, 1}));
    const int c1 = m.node("Conv",
                          {x, m.constant("w1", random_f32({16, 16, 3, 3}, rng)),
                           m.constant("b1", random_f32({16}, rng))},
                          pads);
    const int c2 = m.node(
        "Conv", {m.node("Relu", {c1}), m.constant("w2", random_f32({16, 16, 3, 3}, rng))}, pads);
    const int y = m.node("Relu", {m.node("Add", {c2, x})});
    m.g.outputs = {y};
    auto model = Model::create(std::move(m.g), nullptr, "res").value();
    const std::string yn = model->graph().value_name(y);
    using Size = std::pair<int64_t, int64_t>;
    const std::vector<Size> sizes = {{8, 8}, {5, 11}, {17, 3}, {40, 40}};
    // Direct convolutions: one packed copy of the weights serves every size. Winograd (AVX-512)
    // packs its own transformed layouts, one per kernel variant it picks (F(2x2,3x3) or
    // F(4x4,3x3)); the 17x3 map is below its sizes, so the direct layout comes too.
    for (bool winograd : {false, true}) {
      CAPTURE(winograd);
      auto s = cpu_session(model, SessionConfig::kDefaultPlanCacheBytes, winograd);
      size_t packed = 0;
      for (int pass = 0; pass < 2; ++pass) {
        for (const Size& hw : sizes) {
          const Tensor in = random_f32({1, 16, hw.first, hw.second}, rng);
          const std::vector<float> got = run_one(*s, "x", in, yn);
          auto fresh = cpu_session(model, SessionConfig::kDefaultPlanCacheBytes, winograd);
          const std::vector<float> want = run_one(*fresh, "x", in, yn);
          const Comparison c = compare(got.data(), want.data(), want.size(), 1e-5, 1e-5);
          CHECK(c.mismatches == 0);
          CHECK(s->last_plan()->fused_residuals == 1);
          // The convolutions' weights: packed by the session (once per layout), none by the
          // plans themselves.
          if (!winograd && packed == 0) packed = s->memory().packed_weight_bytes;
          if (!winograd) CHECK(s->memory().packed_weight_bytes == packed);
          CHECK(s->last_plan()->packed_weight_bytes == 0);
        }
        // The second pass over the same sizes packs nothing more.
        if (pass == 0) packed = s->memory().packed_weight_bytes;
        CHECK(s->memory().packed_weight_bytes == packed);
      }
      if (tern_onednn_is_available()) CHECK(packed > 0);
      CHECK(s->memory().full_plans == 1);
      CHECK(s->memory().template_plans == 3);
    }
  }

  TEST_CASE("C API: the plan cache option and the memory stats") {
    std::mt19937 rng(9);
    tern_model cm{mlp_model(rng)};
    tern_session_options* o = nullptr;
    REQUIRE(tern_session_options_create(&o) == TERN_OK);
    CHECK(tern_session_options_set_plan_cache_bytes(nullptr, 1) == TERN_ERR_INVALID_ARGUMENT);
    REQUIRE(tern_session_options_set_plan_cache_bytes(o, 0) == TERN_OK);
    tern_session* s = nullptr;
    REQUIRE(tern_session_create(&cm, o, &s) == TERN_OK);
    tern_session_options_destroy(o);
    const std::string yn = cm.m->graph().value_name(cm.m->graph().outputs[0]);
    for (int64_t seq : {2, 5}) {
      const int64_t shape[3] = {1, seq, 16};
      tern_tensor* x = nullptr;
      REQUIRE(tern_tensor_create(TERN_FLOAT32, shape, 3, &x) == TERN_OK);
      const char* in = "x";
      const char* out = yn.c_str();
      tern_tensor* y = nullptr;
      REQUIRE(tern_session_run(s, nullptr, &in, &x, 1, &out, 1, &y) == TERN_OK);
      tern_tensor_destroy(x);
      tern_tensor_destroy(y);
    }
    uint64_t v = 0;
    CHECK(tern_session_memory_stat(s, "plans", &v) == TERN_OK);
    CHECK(v == 1);
    CHECK(tern_session_memory_stat(s, "full_plans", &v) == TERN_OK);
    CHECK(v == 1);
    CHECK(tern_session_memory_stat(s, "template_plans", &v) == TERN_OK);
    CHECK(v == 1);
    CHECK(tern_session_memory_stat(s, "packed_weight_bytes", &v) == TERN_OK);
    CHECK(v > 0);
    CHECK(tern_session_memory_stat(s, "arena_bytes", &v) == TERN_OK);
    CHECK(v > 0);
    CHECK(tern_session_memory_stat(s, "plan_bytes", &v) == TERN_OK);
    CHECK(tern_session_memory_stat(s, "nope", &v) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(std::string(tern_last_error()).find("known: plans") != std::string::npos);
    CHECK(tern_session_memory_stat(s, nullptr, &v) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_session_memory_stat(s, "plans", nullptr) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_session_memory_stat(nullptr, "plans", &v) == TERN_ERR_INVALID_ARGUMENT);
    tern_session_destroy(s);
  }
}

TEST_SUITE("core") {
  TEST_CASE("an optimized .tern carries the packed weights: a session on it packs none") {
    std::mt19937 rng(10);
    // Gemm(x, Wᵀ) + b (a classifier head, transB = 1) and MatMul(x, V): both packed_gemm layouts.
    GraphMaker m;
    m.g.opset = 13;
    const int x =
        m.g.add_value("x", ValueType{DType::kFloat32, true, {Dim{-1, "batch"}, Dim{24, ""}}});
    m.g.inputs = {x};
    Attributes trans;
    trans.set("transB", attr_int(1));
    const int h = m.node(
        "Gemm",
        {x, m.constant("w", random_f32({40, 24}, rng)), m.constant("b", random_f32({40}, rng))},
        trans);
    const int y = m.node("MatMul", {h, m.constant("v", random_f32({40, 7}, rng))});
    m.g.outputs = {y};
    tern_model cm{Model::create(std::move(m.g), nullptr, "head").value()};
    tern_session* s = nullptr;
    REQUIRE(tern_session_create(&cm, nullptr, &s) == TERN_OK);
    const std::string yn = cm.m->graph().value_name(y);
    auto run = [&](tern_session* ses, std::vector<float>* out) {
      const int64_t shape[2] = {3, 24};
      tern_tensor* t = nullptr;
      REQUIRE(tern_tensor_create(TERN_FLOAT32, shape, 2, &t) == TERN_OK);
      auto* d = static_cast<float*>(tern_tensor_data(t));
      for (int i = 0; i < 72; ++i) d[i] = static_cast<float>(i % 9) * 0.1f - 0.4f;
      const char* in = "x";
      const char* on = yn.c_str();
      tern_tensor* r = nullptr;
      REQUIRE(tern_session_run(ses, nullptr, &in, &t, 1, &on, 1, &r) == TERN_OK);
      const auto* v = static_cast<const float*>(tern_tensor_data(r));
      out->assign(v, v + 21);
      tern_tensor_destroy(t);
      tern_tensor_destroy(r);
    };
    std::vector<float> want, got;
    run(s, &want);
    uint64_t packed = 0;
    REQUIRE(tern_session_memory_stat(s, "packed_weight_bytes", &packed) == TERN_OK);
    CHECK(packed > 0);
    const std::string path = std::filesystem::temp_directory_path() / "tern_planner_head.tern";
    size_t layouts = 0;
    REQUIRE(tern_session_save_optimized(s, path.c_str(), &layouts) == TERN_OK);
    CHECK(layouts == 2);
    tern_session_destroy(s);
    tern_model* loaded = nullptr;
    REQUIRE(tern_model_load_file(path.c_str(), &loaded) == TERN_OK);
    REQUIRE(tern_session_create(loaded, nullptr, &s) == TERN_OK);
    run(s, &got);
    CHECK(got == want);
    REQUIRE(tern_session_memory_stat(s, "packed_weight_bytes", &packed) == TERN_OK);
    CHECK(packed == 0);  // both layouts used in place from the file
    tern_session_destroy(s);
    tern_model_destroy(loaded);
    std::filesystem::remove(path);
  }
}

namespace {

#if !defined(TERN_MINIMAL)
// A host backend whose Relu kernels may be prepared beside each other (as the CPU's oneDNN ones
// are): it counts where each preparation ran. The planning thread's first one waits (at most 5 s)
// until a helper has taken a node, so that a helper takes one however fast the rest go.
// With `helpers_fail` 1 a helper's preparation declines, with 2 it throws: the sequential pass
// must then make those kernels itself.
struct AheadCounts {
  std::atomic<int> prepared{0}, on_helpers{0}, helpers_fail{0};
  std::atomic<bool> wait_for_helper{false};
};
AheadCounts g_ahead;

class AheadHost final : public Backend {
 public:
  const char* name() const override { return "aheadhost"; }
  bool is_built() const override { return true; }
  bool is_available() const override { return true; }
  bool prepares_concurrently(const std::string& op) const override { return op == "Relu"; }
};

Expected<std::unique_ptr<Kernel>> ahead_relu(const OpContext&) {
  ++g_ahead.prepared;
  if (on_helper_thread()) {
    ++g_ahead.on_helpers;
    if (g_ahead.helpers_fail == 1) return unsupported("declined on a helper");
    if (g_ahead.helpers_fail == 2) throw std::runtime_error("thrown on a helper");
  } else if (g_ahead.wait_for_helper.exchange(false)) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (g_ahead.on_helpers == 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  return make_kernel("ahead_relu", 0, [](int, const KernelArgs& a, const ExecContext&) {
    const float* x = a.inputs[0]->data<float>();
    float* y = a.outputs[0]->data<float>();
    for (int64_t i = 0; i < a.outputs[0]->numel(); ++i) y[i] = x[i] > 0 ? x[i] * 0.5f : x[i];
    return Status::ok();
  });
}
#endif

}  // namespace

TEST_SUITE("core") {
  TEST_CASE("planner: costly kernels are prepared ahead on helpers when runs use several threads") {
#if defined(TERN_MINIMAL)
    MESSAGE("minimal build: kernels are prepared on the planning thread alone");
#else
    static AheadHost host;
    static std::once_flag once;
    std::call_once(once, [] {
      KernelRegistry::global().add("Relu", "aheadhost", DType::kFloat32, ahead_relu);
    });
    // Eight Relus in a chain (each halves the positive values: every kernel must run, in order).
    Graph g;
    g.opset = 13;
    int v = g.add_value("x", ValueType{DType::kFloat32, true, {Dim{4, ""}}});
    g.inputs = {v};
    for (int i = 0; i < 8; ++i) {
      const int out = g.add_value("r" + std::to_string(i));
      g.nodes.push_back(Node{"relu" + std::to_string(i), "Relu", "", {v}, {out}, {}});
      v = out;
    }
    g.outputs = {v};
    auto model = Model::create(std::move(g), nullptr, "planner_test").value();
    const Tensor x = make_f32({4}, {256, -1, 0, 512});
    const bool two_cpus = thread_cpu_affinity().size() >= 2;
    // (threads, helpers_fail)
    for (const std::pair<int, int>& c :
         {std::pair{1, 0}, std::pair{2, 0}, std::pair{2, 1}, std::pair{2, 2}}) {
      const int threads = c.first, fail = c.second;
      CAPTURE(threads);
      CAPTURE(fail);
      g_ahead.prepared = 0;
      g_ahead.on_helpers = 0;
      g_ahead.helpers_fail = fail;
      g_ahead.wait_for_helper = threads > 1;
      SessionConfig cfg;
      cfg.backends = {&host};
      cfg.overrides.set(FlagId::kNumThreads, threads);
      cfg.overrides.set(FlagId::kGraphOptimize, 0);
      auto s = Session::create(model, cfg);
      REQUIRE(s);
      // Each node once, the sequential pass taking what was made; what failed on a helper, again.
      CHECK(g_ahead.prepared == 8 + (fail ? g_ahead.on_helpers.load() : 0));
      if (threads == 1) {
        CHECK(g_ahead.on_helpers == 0);
      } else if (two_cpus) {
        CHECK(g_ahead.on_helpers >= 1);
      } else {
        MESSAGE("one CPU to run on: no helper to check");
      }
      std::vector<Tensor> out;
      REQUIRE((*s)->run({"x"}, {&x}, {"r7"}, &out).is_ok());
      CHECK(values_f32(out[0]) == std::vector<float>{1, -1, 0, 2});
    }
#endif
  }
}

TEST_SUITE("core") {
  TEST_CASE("weight store: layouts of different weights pack at once, one layout once") {
#if defined(TERN_MINIMAL)
    MESSAGE("minimal build: packing runs under the store's lock");
#else
    WeightStore store;
    const Tensor a = make_f32({2, 2}, {1, 2, 3, 4}), b = make_f32({2, 2}, {5, 6, 7, 8});
    std::atomic<int> inside{0}, arrived{0}, packs_of_a{0};
    std::atomic<bool> overlapped{false};
    // Each packer waits (at most 5 s) until the other one has arrived: under one lock for all
    // packing the second would only arrive once the first gave up, and never see it inside.
    auto packer = [&](const Tensor& w, std::atomic<int>* count) {
      return [&, count]() -> Expected<PackedData> {
        if (count) ++*count;
        ++inside;
        ++arrived;
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (arrived < 2 && std::chrono::steady_clock::now() < until) {
          std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
        if (inside >= 2) overlapped = true;
        --inside;
        return PackedData{"test", w};
      };
    };
    std::vector<Expected<PackedData>> got(3, Status::ok());
    std::thread ta([&] { got[0] = store.packed(a, "x", packer(a, &packs_of_a)); });
    std::thread tb([&] { got[1] = store.packed(b, "x", packer(b, nullptr)); });
    ta.join();
    tb.join();
    CHECK(overlapped);
    // The same layout again: from the store. A new layout asked by two threads at once: packed by
    // one of them, the other waiting for it.
    CHECK(store.packed(a, "x", packer(a, &packs_of_a))->data.raw() == a.raw());
    CHECK(packs_of_a == 1);
    std::atomic<int> packs_of_y{0};
    auto slow = [&]() -> Expected<PackedData> {
      ++packs_of_y;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      return PackedData{"test", b};
    };
    std::thread tc([&] { got[2] = store.packed(a, "y", slow); });
    Expected<PackedData> again = store.packed(a, "y", slow);
    tc.join();
    CHECK(packs_of_y == 1);
    for (const auto& g : got) REQUIRE(g);
    REQUIRE(again);
    CHECK(again->data.raw() == b.raw());
    CHECK(got[2]->data.raw() == b.raw());
    CHECK(store.packed_count() == 3);
#endif
  }
}
