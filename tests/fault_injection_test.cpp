// The C boundary's promise under injected failures: "no C++ exception and no abort crosses this
// boundary", and a run whose inter-op threads cannot be created still computes the right answer.
// This program replaces the global operator new (once armed with k, the k-th allocation from any
// thread throws std::bad_alloc, once) and interposes pthread_create (refused with EAGAIN while
// armed), so it is a program of its own rather than a suite of tern_unit_tests:
//   - every C function is called with its k-th allocation failing, for every k up to the number it
//     makes: the value functions still answer, the status functions answer OK or
//     TERN_ERR_OUT_OF_MEMORY, and what was loaded before still works;
//   - a session at one intra-op and two inter-op threads runs a two-branch graph while no thread
//   can
//     be created: the caller runs every branch itself and the outputs equal the serial ones.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <dlfcn.h>
#include <doctest/doctest.h>
#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include "api/api_internal.h"
#include "graph_builder.h"
#include "test_util.h"

namespace {

std::atomic<long> g_fail_at{-1};  // allocations to let through before one fails; -1: none fails
std::atomic<long> g_failed{0};    // allocations failed so far
std::atomic<bool> g_refuse_threads{false};
std::atomic<long> g_refused_threads{0};

void count_or_throw() {
  long left = g_fail_at.load(std::memory_order_relaxed);
  while (left >= 0 && !g_fail_at.compare_exchange_weak(left, left - 1)) {
  }
  if (left == 0) {  // this one: g_fail_at is now -1, so only this allocation fails
    g_failed.fetch_add(1);
    throw std::bad_alloc();
  }
}

void* allocate(std::size_t n) {
  count_or_throw();
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}

void* allocate_aligned(std::size_t n, std::align_val_t a) {
  count_or_throw();
  const std::size_t align = static_cast<std::size_t>(a);
  const std::size_t size = (std::max<std::size_t>(n, 1) + align - 1) / align * align;
  if (void* p = std::aligned_alloc(align, size)) return p;
  throw std::bad_alloc();
}

}  // namespace

void* operator new(std::size_t n) {
  return allocate(n);
}
void* operator new[](std::size_t n) {
  return allocate(n);
}
void* operator new(std::size_t n, std::align_val_t a) {
  return allocate_aligned(n, a);
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return allocate_aligned(n, a);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}

extern "C" int pthread_create(pthread_t* t, const pthread_attr_t* attr, void* (*fn)(void*),
                              void* arg) {
  if (g_refuse_threads.load()) {
    g_refused_threads.fetch_add(1);
    return EAGAIN;
  }
  using Create = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static const Create real = reinterpret_cast<Create>(dlsym(RTLD_NEXT, "pthread_create"));
  return real(t, attr, fn, arg);
}

using namespace tern;
using namespace tern_test;

namespace {

// Two independent branches from x [192, 192]: y = MatMul(MatMul(x, w1), w1) + MatMul(MatMul(x,
// w2), w2): a plan two steps wide, each MatMul long enough (~0.3 ms) that the executor runs the
// branches on inter-op threads.
tern_model* branch_model() {
  GraphMaker m;
  m.g.opset = 13;
  const int x = m.g.add_value("x", ValueType{DType::kFloat32, true, {Dim{192, ""}, Dim{192, ""}}});
  m.g.inputs = {x};
  auto weights = [&](const char* name, float scale) {
    Tensor w = Tensor::allocate(DType::kFloat32, {192, 192}).value();
    for (int64_t i = 0; i < w.numel(); ++i)
      w.data<float>()[i] = scale * static_cast<float>(i % 7 - 3);
    return m.constant(name, w);
  };
  const int w1 = weights("w1", 0.01f), w2 = weights("w2", -0.02f);
  const int a = m.node("MatMul", {m.node("MatMul", {x, w1}), w1});
  const int b = m.node("MatMul", {m.node("MatMul", {x, w2}), w2});
  m.g.values[static_cast<size_t>(m.node("Add", {a, b}))].name = "y";
  m.g.outputs = {static_cast<int>(m.g.values.size()) - 1};
  return new tern_model{Model::create(std::move(m.g), nullptr, "branches").value()};
}

tern_tensor* input_x() {
  const int64_t shape[2] = {192, 192};
  tern_tensor* t = nullptr;
  REQUIRE(tern_tensor_create(TERN_FLOAT32, shape, 2, &t) == TERN_OK);
  float* d = static_cast<float*>(tern_tensor_data(t));
  for (int i = 0; i < 192 * 192; ++i) d[i] = static_cast<float>(i % 11) * 0.1f - 0.5f;
  return t;
}

// fn() with its k-th allocation failing (none when k < 0); only Tern's calls run armed, so the
// test's own allocations never fail.
template <class Fn>
auto failing(long k, Fn fn) {
  g_fail_at.store(k);
  auto r = fn();
  g_fail_at.store(-1);
  return r;
}

std::vector<float> values_of(tern_tensor* y) {
  const float* d = static_cast<const float*>(tern_tensor_data(y));
  std::vector<float> v(d, d + tern_tensor_byte_size(y) / sizeof(float));
  tern_tensor_destroy(y);
  return v;
}

// A run of y = f(x), its k-th allocation failing; empty output unless the status is OK.
std::vector<float> run_y(tern_session* s, const tern_tensor* x, tern_status* status = nullptr,
                         long k = -1) {
  const char* in = "x";
  const char* out = "y";
  tern_tensor* y = nullptr;
  const tern_status st =
      failing(k, [&] { return tern_session_run(s, nullptr, &in, &x, 1, &out, 1, &y); });
  if (status) *status = st;
  return st == TERN_OK ? values_of(y) : std::vector<float>{};
}

// step(k) for k = 0, 1, ... until a step's armed calls make fewer than k + 1 allocations (none
// failed). Returns that k: how many allocations the calls make.
long for_each_failing_allocation(const std::function<void(long)>& step) {
  for (long k = 0; k < 200000; ++k) {
    const long failed = g_failed.load();
    step(k);
    if (g_failed.load() == failed) return k;
  }
  FAIL("more than 200000 allocations");
  return -1;
}

bool oom_or_ok(tern_status st) {
  return st == TERN_OK || st == TERN_ERR_OUT_OF_MEMORY;
}

}  // namespace

TEST_CASE("no inter-op thread can be created: the caller runs every branch, outputs unchanged") {
  // First in this process: the inter-op pool has no thread yet, so the run must create them.
  tern_model* m = branch_model();
  tern_tensor* x = input_x();
  tern_session* serial = c_api_session(m, 1, 1);
  const std::vector<float> want = run_y(serial, x);
  REQUIRE(want.size() == 192 * 192);
  tern_session* s = c_api_session(m, 1, 2);
  const auto plan = s->s->plan_for({{192, 192}}).value();
  REQUIRE(plan->width == 2);
  REQUIRE(runs_concurrently(*plan, /*threads=*/1, /*interop=*/2));
  g_refuse_threads.store(true);
  for (int i = 0; i < 5; ++i) {
    tern_status st = TERN_OK;
    const std::vector<float> got = run_y(s, x, &st);
    REQUIRE_MESSAGE(st == TERN_OK, tern_last_error());
    CHECK(got == want);
  }
  g_refuse_threads.store(false);
  CHECK(g_refused_threads.load() > 0);  // the pool did try to create its threads
  // Once threads can be made again, the same session runs concurrently with the same results.
  CHECK(run_y(s, x) == want);
  tern_session_destroy(s);
  tern_session_destroy(serial);
  tern_tensor_destroy(x);
  tern_model_destroy(m);
}

TEST_CASE("each C function survives its k-th allocation failing, for every k") {
  tern_model* m = branch_model();
  tern_tensor* x = input_x();
  // The value functions answer whatever fails.
  const std::vector<std::pair<std::string, std::function<bool()>>> values = {
      {"tern_parallel_info", [] { return std::strlen(tern_parallel_info()) > 0; }},
      {"tern_config_show", [] { return std::strlen(tern_config_show()) > 0; }},
      {"tern_cpu_get_capability", [] { return std::strlen(tern_cpu_get_capability()) > 0; }},
      {"tern_tensor_device", [x] { return std::strcmp(tern_tensor_device(x), "cpu") == 0; }},
      {"tern_cuda_is_available", [] { return tern_cuda_is_available() >= 0; }},
      {"tern_vulkan_is_available", [] { return tern_vulkan_is_available() >= 0; }},
      {"tern_cudnn_is_available", [] { return tern_cudnn_is_available() >= 0; }},
  };
  // Each once with nothing failing first: the Vulkan and CUDA probes initialize their drivers once
  // per process (the Vulkan loader and Mesa's LLVM allocate through this operator new, and a
  // throw through their C frames leaves the loader's lock held). What is tested is Tern's code.
  for (const auto& entry : values) REQUIRE(entry.second());
  for (const auto& entry : values) {
    const std::string& name = entry.first;  // not a structured binding: CAPTURE is a lambda
    const auto& call = entry.second;
    CAPTURE(name);
    const long n = for_each_failing_allocation([&](long k) { CHECK(failing(k, call)); });
    MESSAGE(name, ": ", n, " allocations, each failed once");
  }
  // Loading a model, creating a session and running it: OK or TERN_ERR_OUT_OF_MEMORY, and what
  // existed before still works.
  const std::string path =
      std::string(TERN_SOURCE_DIR) + "/tests/fuzz/corpus/tern_loader/matmul.tern";
  long n = for_each_failing_allocation([&](long k) {
    tern_model* loaded = nullptr;
    const tern_status st = failing(k, [&] { return tern_model_load_file(path.c_str(), &loaded); });
    CHECK_MESSAGE(oom_or_ok(st), tern_last_error());
    CHECK((st == TERN_OK) == (loaded != nullptr));
    tern_model_destroy(loaded);
  });
  MESSAGE("tern_model_load_file: ", n, " allocations");
  CHECK(n > 0);
  tern_session* good = c_api_session(m, 1, 1);
  const std::vector<float> want = run_y(good, x);
  n = for_each_failing_allocation([&](long k) {
    tern_session* s = nullptr;
    const tern_status st = failing(k, [&] {
      tern_session_options* o = nullptr;
      tern_status r = tern_session_options_create(&o);
      if (r == TERN_OK) r = tern_session_options_set_num_threads(o, 1);
      if (r == TERN_OK) r = tern_session_create(m, o, &s);
      tern_session_options_destroy(o);
      return r;
    });
    CHECK_MESSAGE(oom_or_ok(st), tern_last_error());
    CHECK((st == TERN_OK) == (s != nullptr));
    if (st == TERN_OK) CHECK(run_y(s, x) == want);
    tern_session_destroy(s);
  });
  MESSAGE("tern_session_options_create + tern_session_create: ", n, " allocations");
  CHECK(n > 0);
  // Runs at one and two intra-op threads, two inter-op threads: allocations fail on worker
  // threads too.
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    tern_session* s = c_api_session(m, threads, 2);
    REQUIRE(run_y(s, x) == want);
    n = for_each_failing_allocation([&](long k) {
      tern_status st = TERN_OK;
      const std::vector<float> got = run_y(s, x, &st, k);
      CHECK_MESSAGE(oom_or_ok(st), tern_last_error());
      if (st == TERN_OK) CHECK(got == want);
    });
    MESSAGE("tern_session_run at ", threads, " threads: ", n, " allocations");
    CHECK(n > 0);
    CHECK(run_y(s, x) == want);  // the session is intact
    tern_session_destroy(s);
  }
  CHECK(run_y(good, x) == want);
  tern_session_destroy(good);
  tern_tensor_destroy(x);
  tern_model_destroy(m);
}
