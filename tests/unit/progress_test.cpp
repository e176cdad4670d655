// tern_session_options_set_progress (core/progress.h): session creation reports constant folding
// and the rewrite passes, and the plan built for new input shapes reports kernel preparation;
// each stage climbs from 0 to its total on the calling thread; no reports without the callback.
// (The CLI's bar: cli_test.cpp.)
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "c_api.h"
#include "test_util.h"

using namespace tern_test;

namespace {

struct Report {
  std::string stage;
  size_t done, total;
  std::thread::id thread;
};

void record(const char* stage, size_t done, size_t total, void* ctx) {
  static_cast<std::vector<Report>*>(ctx)->push_back(
      Report{stage, done, total, std::this_thread::get_id()});
}

// Within one pass of a stage the reports never go down, and each pass ends at its total.
void check_stages(const std::vector<Report>& reports) {
  std::map<std::string, Report> last;
  for (const Report& r : reports) {
    CAPTURE(r.stage);
    CHECK(r.thread == std::this_thread::get_id());
    CHECK(r.done <= r.total);
    auto it = last.find(r.stage);
    // A stage starts again (at 0) only after its pass finished (subgraphs, each new plan).
    if (it != last.end() && it->second.done != it->second.total) {
      CHECK(r.total == it->second.total);
      CHECK(r.done >= it->second.done);
    }
    last[r.stage] = r;
  }
  for (const auto& entry : last) {  // no structured binding: clang 14 cannot capture one
    const std::string& stage = entry.first;
    CAPTURE(stage);
    CHECK(entry.second.done == entry.second.total);
  }
}

size_t count(const std::vector<Report>& reports, const std::string& stage) {
  size_t n = 0;
  for (const Report& r : reports) n += r.stage == stage;
  return n;
}

}  // namespace

TEST_SUITE("api") {
  TEST_CASE("progress: creation reports folding and rewrites, a new plan its kernels") {
    tern_model* m = nullptr;
    REQUIRE(tern_model_load_file(matmul_seed_model().c_str(), &m) == TERN_OK);
    tern_session_options* o = nullptr;
    REQUIRE(tern_session_options_create(&o) == TERN_OK);
    std::vector<Report> reports;
    REQUIRE(tern_session_options_set_progress(o, record, &reports) == TERN_OK);
    tern_session* s = nullptr;
    REQUIRE(tern_session_create(m, o, &s) == TERN_OK);
    tern_session_options_destroy(o);  // the session keeps the callback
    check_stages(reports);
    CHECK(count(reports, "fold constants") > 0);
    CHECK(count(reports, "optimize") > 0);
    // The seed model's batch is dynamic: kernels are prepared by the first run's plan.
    CHECK(count(reports, "prepare kernels") == 0);
    reports.clear();
    const int64_t shape[2] = {3, 8};
    tern_tensor* x = nullptr;
    REQUIRE(tern_tensor_create(TERN_FLOAT32, shape, 2, &x) == TERN_OK);
    const char* in_names[1] = {tern_model_input_name(m, 0)};
    const char* out_names[1] = {tern_model_output_name(m, 0)};
    const tern_tensor* ins[1] = {x};
    tern_tensor* outs[1] = {nullptr};
    REQUIRE(tern_session_run(s, nullptr, in_names, ins, 1, out_names, 1, outs) == TERN_OK);
    tern_tensor_destroy(outs[0]);
    check_stages(reports);
    CHECK(count(reports, "prepare kernels") > 0);
    // Same shapes again: the plan is cached, nothing to report.
    reports.clear();
    REQUIRE(tern_session_run(s, nullptr, in_names, ins, 1, out_names, 1, outs) == TERN_OK);
    tern_tensor_destroy(outs[0]);
    CHECK(reports.empty());
    tern_session_destroy(s);

    // Without a callback (or after clearing it) nothing is reported.
    REQUIRE(tern_session_options_create(&o) == TERN_OK);
    REQUIRE(tern_session_options_set_progress(o, record, &reports) == TERN_OK);
    REQUIRE(tern_session_options_set_progress(o, nullptr, nullptr) == TERN_OK);
    REQUIRE(tern_session_create(m, o, &s) == TERN_OK);
    REQUIRE(tern_session_run(s, nullptr, in_names, ins, 1, out_names, 1, outs) == TERN_OK);
    tern_tensor_destroy(outs[0]);
    CHECK(reports.empty());
    CHECK(tern_session_options_set_progress(nullptr, record, nullptr) == TERN_ERR_INVALID_ARGUMENT);
    tern_session_destroy(s);
    tern_session_options_destroy(o);
    tern_tensor_destroy(x);
    tern_model_destroy(m);
  }
}
