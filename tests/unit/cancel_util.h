// Helpers of the cancellation tests (cancel_test.cpp, vulkan_test.cpp): models saved and
// loaded through the C API, a chain of MatMul -> Tanh to stop half way, a canceller thread that
// times the stop, and the session's arena bytes.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "c_api.h"
#include "graph_builder.h"
#include "serialization/model_io.h"
#include "test_util.h"

namespace tern_test {

using Clock = std::chrono::steady_clock;
// A safety deadline on runs the tests expect to be stopped: a broken cancel fails the test with
// DEADLINE_EXCEEDED instead of hanging it.
constexpr int64_t kSafetyMs = 60000;

inline double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

inline tern_model* load(const tern::Graph& g, const char* what) {
  const std::string path =
      "/tmp/tern_cancel_" + std::string(what) + "_" + std::to_string(::getpid()) + ".tern";
  REQUIRE(tern::serialization::save_tern(g, path).is_ok());
  tern_model* m = nullptr;
  REQUIRE(tern_model_load_file(path.c_str(), &m) == TERN_OK);
  std::remove(path.c_str());
  return m;
}

// `branches` (1 or 2) independent chains of `depth` MatMul -> Tanh on x [n, n], added at the end
// when there are two: a plain plan of many steps, `branches` wide (run with inter-op threads it
// goes through the concurrent executor). `one_weight`: every MatMul multiplies by the same W, so a
// deep chain needs no weight per step.
inline tern_model* chain_model(int64_t n, int depth, int branches = 2, bool one_weight = false) {
  GraphMaker mk;
  tern::Graph& g = mk.g;
  g.opset = 17;
  tern::ValueType xt{tern::DType::kFloat32, true, {tern::Dim{n, ""}, tern::Dim{n, ""}}};
  const int x = g.add_value("x", xt);
  g.inputs.push_back(x);
  std::mt19937 rng(9);
  std::vector<int> heads(static_cast<size_t>(branches), x), weights(heads.size());
  for (int k = 0; k < depth; ++k) {
    if (!one_weight || k == 0) {  // (a deep one-weight chain draws one matrix, not depth of them)
      tern::Tensor w = random_f32({n, n}, rng);
      for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] /= static_cast<float>(n);
      for (size_t b = 0; b < heads.size(); ++b) {
        weights[b] = mk.constant(std::string(1, static_cast<char>('a' + b)) + std::to_string(k), w);
      }
    }
    for (size_t b = 0; b < heads.size(); ++b) {
      heads[b] = mk.node("Tanh", {mk.node("MatMul", {heads[b], weights[b]})});
    }
  }
  const int y = branches == 2 ? mk.node("Add", {heads[0], heads[1]}) : heads[0];
  g.values[static_cast<size_t>(y)].name = "y";
  g.outputs.push_back(y);
  return load(g, "chain");
}

inline tern_status run_chain(tern_session* s, tern_run_options* r, int64_t n,
                             std::vector<float>* out = nullptr) {
  std::vector<float> x(static_cast<size_t>(n * n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i));
  const int64_t shape[] = {n, n};
  tern_tensor *t = nullptr, *y = nullptr;
  REQUIRE(tern_tensor_create_from_data(TERN_FLOAT32, shape, 2, x.data(), x.size() * sizeof(float),
                                       nullptr, nullptr, &t) == TERN_OK);
  const char* in_names[] = {"x"};
  const char* out_names[] = {"y"};
  const tern_status st = tern_session_run(s, r, in_names, &t, 1, out_names, 1, &y);
  if (st == TERN_OK && out) {
    const float* p = static_cast<const float*>(tern_tensor_data(y));
    out->assign(p, p + x.size());
  }
  tern_tensor_destroy(y);
  tern_tensor_destroy(t);
  return st;
}

// Starts `run` (which returns a status), cancels `r` from a second thread after `after_ms`, and
// returns the run's status; *latency_ms receives the time from the cancel call to the return.
template <class Run>
tern_status cancel_during(tern_run_options* r, int after_ms, Run run, double* latency_ms) {
  Clock::time_point cancelled_at{};
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(after_ms));
    cancelled_at = Clock::now();
    CHECK(tern_run_options_cancel(r) == TERN_OK);  // (REQUIRE must not throw on this thread)
  });
  const tern_status st = run();
  const Clock::time_point returned = Clock::now();
  canceller.join();
  *latency_ms = ms_between(cancelled_at, returned);
  return st;
}

// A chain model (one branch, one weight) on [n, n] deep enough that a warm run of a session made
// by make_session(model) takes >= 200 ms (the depth grows up to max_depth), with that session.
struct LongChain {
  tern_model* model = nullptr;
  tern_session* session = nullptr;
  int depth = 0;
  double whole_ms = 0;         // a warm run
  std::vector<float> outputs;  // of that run
};
template <class MakeSession>
LongChain long_chain(int64_t n, int depth, int max_depth, MakeSession make_session) {
  LongChain c;
  for (;;) {
    c.model = chain_model(n, depth, /*branches=*/1, /*one_weight=*/true);
    c.session = make_session(c.model);
    REQUIRE(run_chain(c.session, nullptr, n, &c.outputs) == TERN_OK);  // planned, warmed
    const auto t0 = Clock::now();
    REQUIRE(run_chain(c.session, nullptr, n, &c.outputs) == TERN_OK);
    c.whole_ms = ms_between(t0, Clock::now());
    c.depth = depth;
    if (c.whole_ms >= 200 || depth >= max_depth) return c;
    tern_session_destroy(c.session);
    tern_model_destroy(c.model);
    depth =
        std::min(max_depth, static_cast<int>(depth * std::ceil(300 / std::max(c.whole_ms, 1.0))));
  }
}

// Cancels `trials` runs of the chain model on `s` from a second thread, each at a random point
// (5-60% of whole_ms, a whole run's time), checks each returns TERN_ERR_CANCELLED, prints the
// median and worst time from cancel to return, and checks the worst is well before a whole run
// would have ended.
inline void check_cancels_at_random_points(tern_session* s, int64_t n, double whole_ms,
                                           int trials) {
  std::mt19937 rng(28);
  std::uniform_real_distribution<double> when(0.05, 0.6);
  std::vector<double> latencies;
  for (int trial = 0; trial < trials; ++trial) {
    tern_run_options* r = nullptr;
    REQUIRE(tern_run_options_create(&r) == TERN_OK);
    REQUIRE(tern_run_options_set_deadline_ms(r, kSafetyMs) == TERN_OK);
    const int after_ms = static_cast<int>(when(rng) * whole_ms);
    double latency = 0;
    const tern_status st = cancel_during(
        r, after_ms, [&] { return run_chain(s, r, n); }, &latency);
    INFO(std::string(tern_last_error()));
    CAPTURE(after_ms);
    CHECK(st == TERN_ERR_CANCELLED);
    latencies.push_back(latency);
    tern_run_options_destroy(r);
  }
  std::sort(latencies.begin(), latencies.end());
  const double median = latencies[latencies.size() / 2], worst = latencies.back();
  MESSAGE("cancel to return over ", latencies.size(), " cancels at random points of a ", whole_ms,
          " ms run: median ", median, " ms, max ", worst, " ms");
  CHECK(worst < whole_ms / 2);
}

// A run of the chain model on `s` with a 50 ms deadline returns TERN_ERR_DEADLINE_EXCEEDED after
// at least 50 ms and well before a whole run (whole_ms) would have ended.
inline void check_deadline_50ms(tern_session* s, int64_t n, double whole_ms) {
  tern_run_options* r = nullptr;
  REQUIRE(tern_run_options_create(&r) == TERN_OK);
  REQUIRE(tern_run_options_set_deadline_ms(r, 50) == TERN_OK);
  const auto t0 = Clock::now();
  const tern_status st = run_chain(s, r, n);
  const double took = ms_between(t0, Clock::now());
  INFO(std::string(tern_last_error()));
  MESSAGE("a 50 ms deadline on the ", whole_ms, " ms run returned after ", took, " ms");
  CHECK(st == TERN_ERR_DEADLINE_EXCEEDED);
  CHECK(took >= 50);
  CHECK(took < 50 + whole_ms / 2);
  tern_run_options_destroy(r);
}

inline uint64_t arena_bytes(const tern_session* s) {
  uint64_t v = 0;
  REQUIRE(tern_session_memory_stat(s, "arena_bytes", &v) == TERN_OK);
  return v;
}

}  // namespace tern_test
