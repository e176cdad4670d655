// Concurrency through the C API: one session run from many threads, sessions made and destroyed
// concurrently, and global flags changed while runs are in flight. Every result is compared
// bitwise with a serial run. The TSan build (scripts/sanitize.sh thread) runs this suite.
#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "c_api.h"
#include "core/graph.h"
#include "graph_builder.h"
#include "serialization/model_io.h"
#include "test_util.h"

using namespace tern;
using namespace tern_test;

namespace {

constexpr int kInputs = 16;       // distinct inputs, cycled through by the threads
constexpr int64_t kClasses = 10;  // the model's output: [1, 10] probabilities

Tensor random_tensor(Shape shape, std::mt19937& rng) {
  Tensor t = Tensor::allocate(DType::kFloat32, std::move(shape)).value();
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// x [1, 3, 16, 16] -> Conv 3x3 (16) -> Relu -> Conv 1x1 (32) -> Relu -> GlobalAveragePool ->
// Flatten -> Gemm (10) -> Softmax -> y: oneDNN convolutions (or the portable ones), a GEMM and
// the own kernels, on a graph the optimizer rewrites.
std::string write_small_cnn() {
  std::mt19937 rng(11);
  GraphMaker mk;
  Graph& g = mk.g;
  g.opset = 13;
  ValueType xt{DType::kFloat32, true, {}};
  for (int64_t d : {1, 3, 16, 16}) xt.dims.push_back(Dim{d, ""});
  const int x = g.add_value("x", xt);
  g.inputs.push_back(x);
  auto weights = [&](Shape shape) {
    return mk.constant("c" + std::to_string(g.values.size()), random_tensor(std::move(shape), rng));
  };
  Attributes pad1;
  pad1.set("pads", attr_ints({1, 1, 1, 1}));
  int cur = mk.node("Conv", {x, weights({16, 3, 3, 3}), weights({16})}, pad1);
  cur = mk.node("Relu", {cur});
  cur = mk.node("Conv", {cur, weights({32, 16, 1, 1}), weights({32})});
  cur = mk.node("Relu", {cur});
  cur = mk.node("GlobalAveragePool", {cur});
  cur = mk.node("Flatten", {cur});
  cur = mk.node("Gemm", {cur, weights({32, kClasses}), weights({kClasses})});
  cur = mk.node("Softmax", {cur});
  g.values[static_cast<size_t>(cur)].name = "y";
  g.outputs.push_back(cur);
  const std::string path = "/tmp/tern_concurrency_" + std::to_string(::getpid()) + ".tern";
  REQUIRE(serialization::save_tern(g, path).is_ok());
  return path;
}

struct Fixture {
  tern_model* model = nullptr;
  std::vector<std::vector<float>> inputs;
  Fixture() {
    const std::string path = write_small_cnn();
    REQUIRE(tern_model_load_file(path.c_str(), &model) == TERN_OK);
    std::remove(path.c_str());
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-1, 1);
    inputs.resize(kInputs);
    for (auto& in : inputs) {
      in.resize(3 * 16 * 16);
      for (float& v : in) v = u(rng);
    }
  }
  ~Fixture() { tern_model_destroy(model); }

  tern_session* session(const char* deterministic = nullptr) const {
    tern_session_options* o = nullptr;
    REQUIRE(tern_session_options_create(&o) == TERN_OK);
    REQUIRE(tern_session_options_set_num_threads(o, 2) == TERN_OK);
    if (deterministic) {
      REQUIRE(tern_session_options_set_flag(o, "deterministic_algorithms", deterministic) ==
              TERN_OK);
    }
    tern_session* s = nullptr;
    const tern_status st = tern_session_create(model, o, &s);
    tern_session_options_destroy(o);
    REQUIRE(st == TERN_OK);
    return s;
  }
};

// One run of input k; false (and `out` untouched) when any call fails.
// The message of the first failure any thread saw (for the report).
std::mutex first_error_mu;
std::string first_error;
void note_failure() {
  std::lock_guard<std::mutex> lock(first_error_mu);
  if (first_error.empty()) first_error = tern_last_error();
}

bool run(tern_session* s, const std::vector<float>& in, std::vector<float>* out) {
  const int64_t shape[] = {1, 3, 16, 16};
  tern_tensor* x = nullptr;
  if (tern_tensor_create_from_data(TERN_FLOAT32, shape, 4, const_cast<float*>(in.data()),
                                   in.size() * sizeof(float), nullptr, nullptr, &x) != TERN_OK) {
    return false;
  }
  const char* in_names[] = {"x"};
  const char* out_names[] = {"y"};
  const tern_tensor* ins[] = {x};
  tern_tensor* y = nullptr;
  const tern_status st = tern_session_run(s, nullptr, in_names, ins, 1, out_names, 1, &y);
  tern_tensor_destroy(x);
  if (st != TERN_OK) {
    note_failure();
    return false;
  }
  const auto* p = static_cast<const float*>(tern_tensor_data(y));
  out->assign(p, p + kClasses);
  tern_tensor_destroy(y);
  return true;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_SUITE("concurrency") {
  TEST_CASE("one session, 8 threads x 200 runs of different inputs: bitwise the serial results") {
    Fixture f;
    tern_session* s = f.session();
    std::vector<std::vector<float>> serial(kInputs);
    for (int k = 0; k < kInputs; ++k) REQUIRE(run(s, f.inputs[static_cast<size_t>(k)], &serial[k]));
    std::atomic<int> failed{0}, different{0}, runs{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        std::vector<float> out;
        for (int i = 0; i < 200; ++i) {
          const auto k = static_cast<size_t>((t * 7 + i) % kInputs);
          if (!run(s, f.inputs[k], &out)) {
            ++failed;
          } else if (!same_bits(out, serial[k])) {
            ++different;
          }
          ++runs;
        }
      });
    }
    for (auto& t : threads) t.join();
    CHECK(runs == 1600);
    CHECK(failed == 0);
    CHECK(different == 0);
    tern_session_destroy(s);
  }

  TEST_CASE("sessions created, run and destroyed concurrently from several threads on one model") {
    Fixture f;
    tern_session* first = f.session();
    std::vector<float> want;
    REQUIRE(run(first, f.inputs[0], &want));
    tern_session_destroy(first);
    std::atomic<int> failed{0}, different{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        std::vector<float> out;
        for (int i = 0; i < 10; ++i) {
          tern_session_options* o = nullptr;
          tern_session* s = nullptr;
          if (tern_session_options_create(&o) != TERN_OK ||
              tern_session_options_set_num_threads(o, 2) != TERN_OK ||
              tern_session_create(f.model, o, &s) != TERN_OK) {
            ++failed;
          } else if (!run(s, f.inputs[0], &out)) {
            ++failed;
          } else if (!same_bits(out, want)) {
            ++different;
          }
          tern_session_destroy(s);
          tern_session_options_destroy(o);
        }
      });
    }
    for (auto& t : threads) t.join();
    CHECK(failed == 0);
    CHECK(different == 0);
  }

  TEST_CASE("flags changed while runs are in flight: each run sees one whole flag snapshot") {
    Fixture f;
    // deterministic_algorithms picks other kernels (plans are cached per flag values): a run
    // reading the flag mid-way could mix them. Each result must be bitwise one of the two.
    std::vector<std::vector<float>> fast(kInputs), det(kInputs);
    {
      tern_session* a = f.session("false");
      tern_session* b = f.session("true");
      for (int k = 0; k < kInputs; ++k) {
        REQUIRE(run(a, f.inputs[static_cast<size_t>(k)], &fast[static_cast<size_t>(k)]));
        REQUIRE(run(b, f.inputs[static_cast<size_t>(k)], &det[static_cast<size_t>(k)]));
      }
      tern_session_destroy(a);
      tern_session_destroy(b);
    }
    char saved_det[16] = {}, saved_limit[16] = {};
    REQUIRE(tern_flag_get("deterministic_algorithms", saved_det, sizeof saved_det) == TERN_OK);
    REQUIRE(tern_flag_get("cudnn.benchmark_limit", saved_limit, sizeof saved_limit) == TERN_OK);
    tern_session* s = f.session();              // follows the global flag at every run
    tern_session* pinned = f.session("false");  // its own value, whatever the global one
    std::atomic<bool> stop{false};
    std::atomic<int> failed{0}, neither{0}, torn{0}, pinned_moved{0}, det_runs{0}, fast_runs{0};
    std::thread writer([&] {
      for (int i = 0; !stop; ++i) {
        if (tern_flag_set("deterministic_algorithms", i % 2 ? "true" : "false") != TERN_OK ||
            tern_flag_set("cudnn.benchmark_limit", i % 2 ? "7" : "1000000") != TERN_OK) {
          note_failure();
          ++failed;
        }
        std::this_thread::yield();
      }
    });
    std::thread reader([&] {
      char buf[32];
      while (!stop) {
        if (tern_flag_get("cudnn.benchmark_limit", buf, sizeof buf) != TERN_OK) {
          note_failure();
          ++failed;
        } else if (std::strcmp(buf, "7") != 0 && std::strcmp(buf, "1000000") != 0 &&
                   std::strcmp(buf, saved_limit) != 0) {
          ++torn;
        }
        if (tern_session_flag_get(pinned, "deterministic_algorithms", buf, sizeof buf, nullptr) !=
                TERN_OK ||
            std::strcmp(buf, "false") != 0) {
          ++pinned_moved;
        }
      }
    });
    std::vector<std::thread> runners;
    for (int t = 0; t < 4; ++t) {
      runners.emplace_back([&, t] {
        std::vector<float> out;
        for (int i = 0; i < 100; ++i) {
          const auto k = static_cast<size_t>((t * 5 + i) % kInputs);
          tern_session* which = i % 4 == 3 ? pinned : s;
          if (!run(which, f.inputs[k], &out)) {
            ++failed;
          } else if (same_bits(out, fast[k])) {
            ++fast_runs;
          } else if (which == s && same_bits(out, det[k])) {
            ++det_runs;
          } else {
            ++neither;
          }
        }
      });
    }
    for (auto& t : runners) t.join();
    stop = true;
    writer.join();
    reader.join();
    CHECK(tern_flag_set("deterministic_algorithms", saved_det) == TERN_OK);
    CHECK(tern_flag_set("cudnn.benchmark_limit", saved_limit) == TERN_OK);
    CHECK_MESSAGE(failed == 0, first_error);
    CHECK(neither == 0);
    CHECK(torn == 0);
    CHECK(pinned_moved == 0);
    CHECK(fast_runs + det_runs == 400);
    MESSAGE("runs under the fast kernels: ", fast_runs.load(),
            ", deterministic: ", det_runs.load());
    tern_session_destroy(pinned);
    tern_session_destroy(s);
  }
}
