// The backends API (DESIGN §3 "threads" to "generic"): the flags registry and every typed
// function over it, environment initial values and precedence (in child processes), session and
// run overrides, and each effect observable on the CPU.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "api/api_internal.h"
#include "backends/cpu/cpu_capability.h"
#include "backends/registry.h"
#include "c_api.h"
#include "core/session.h"
#include "core/threading.h"
#include "graph_builder.h"
#include "ops/einsum.h"

using namespace tern;
using namespace tern_test;

namespace {

// Puts every flag back to its value at construction (tests share the process-wide registry).
struct FlagRestore {
  std::vector<std::pair<std::string, std::string>> saved;
  FlagRestore() {
    for (size_t i = 0; i < tern_flag_count(); ++i) {
      const char *name, *type, *doc;
      REQUIRE(tern_flag_info(i, &name, &type, &doc) == TERN_OK);
      char buf[64];
      REQUIRE(tern_flag_get(name, buf, sizeof buf) == TERN_OK);
      saved.emplace_back(name, buf);
    }
  }
  ~FlagRestore() {
    for (const auto& [name, value] : saved) (void)tern_flag_set(name.c_str(), value.c_str());
  }
};

std::string flag(const char* name) {
  char buf[64] = {};
  REQUIRE(tern_flag_get(name, buf, sizeof buf) == TERN_OK);
  return buf;
}

struct Cli {
  int code;
  std::string out;
};
Cli run_cli(const std::string& env, const std::string& args) {
  std::string cmd = env + " " + TERN_CLI_PATH + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  Cli r{-1, ""};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}
// The line of `tern info --flags` for one flag, split on runs of spaces: name, value, source...
std::vector<std::string> flag_row(const std::string& listing, const std::string& name) {
  std::istringstream in(listing);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + " ", 0) != 0) continue;
    std::vector<std::string> cols;
    std::istringstream ls(line);
    std::string c;
    for (int i = 0; i < 3 && ls >> c; ++i) cols.push_back(c);
    return cols;
  }
  return {};
}

Tensor random_f32(Shape shape, unsigned seed, float lo = -1, float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Tensor t = Tensor::allocate(DType::kFloat32, shape).value();
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// A graph under construction: inputs with static shapes, constants, nodes.
struct Builder {
  Graph g;
  Builder() { g.opset = 13; }
  int input(const std::string& name, const Shape& s, DType dt = DType::kFloat32) {
    ValueType t{dt, true, {}};
    for (int64_t d : s) t.dims.push_back(Dim{d, ""});
    int id = g.add_value(name, t);
    g.inputs.push_back(id);
    return id;
  }
  int constant(const std::string& name, Tensor t) {
    int id = g.add_value(name);
    g.values[static_cast<size_t>(id)].constant = std::move(t);
    return id;
  }
  int node(const std::string& op, std::vector<int> ins, Attributes attrs = {}) {
    int out = g.add_value("v" + std::to_string(g.values.size()));
    g.nodes.push_back(Node{
        "n" + std::to_string(g.nodes.size()), op, "", std::move(ins), {out}, std::move(attrs)});
    return out;
  }
  std::unique_ptr<Session> session(std::vector<int> outputs, FlagOverrides o = {}) {
    g.outputs = std::move(outputs);
    auto model = Model::create(std::move(g), nullptr, "test").value();
    SessionConfig cfg;
    cfg.backends.push_back(backends::get("cpu").value());
    cfg.overrides = o;
    auto s = Session::create(model, cfg);
    REQUIRE_MESSAGE(s, s.status().message());
    return std::move(s).value();
  }
};

std::vector<Tensor> run(Session& s, const std::vector<std::string>& names,
                        const std::vector<const Tensor*>& ins, const std::string& out,
                        const FlagOverrides* run_flags = nullptr) {
  std::vector<Tensor> res;
  Status st = s.run(names, ins, {out}, &res, run_flags);
  REQUIRE_MESSAGE(st.is_ok(), st.message());
  return res;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.byte_size() == b.byte_size() && std::memcmp(a.raw(), b.raw(), a.byte_size()) == 0;
}

float max_abs_diff(const Tensor& a, const Tensor& b) {
  float m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    float d = std::fabs(a.data<float>()[i] - b.data<float>()[i]);
    if (std::isnan(d)) return INFINITY;
    m = std::max(m, d);
  }
  return m;
}

// The kernel names of a plan's steps, for dispatch checks.
std::vector<std::string> kernels(Session& s, const std::vector<Shape>& shapes,
                                 const FlagOverrides* run_flags = nullptr) {
  auto plan = s.plan_for(shapes, s.flags(run_flags)).value();
  std::vector<std::string> k;
  for (const PlanStep& st : plan->steps) k.push_back(st.kernel->name());
  return k;
}

Attributes attrs1(const std::string& name, Attribute a) {
  Attributes at;
  at.set(name, std::move(a));
  return at;
}

double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

}  // namespace

TEST_SUITE("backends") {
  TEST_CASE("flags: registry, generic access, descriptions and invalid values") {
    FlagRestore restore;
    REQUIRE(tern_flag_count() >= 22);
    for (size_t i = 0; i < tern_flag_count(); ++i) {
      const char *name = nullptr, *type = nullptr, *doc = nullptr;
      REQUIRE(tern_flag_info(i, &name, &type, &doc) == TERN_OK);
      CHECK(std::strlen(doc) > 10);
      CHECK((std::string(type) == "bool" || std::string(type) == "int" ||
             std::string(type) == "enum"));
      const char *source, *scope, *def, *env;
      REQUIRE(tern_flag_describe(name, &source, &scope, &def, &env) == TERN_OK);
      CHECK(std::string(source) != "");
      CHECK((std::string(scope) == "global" || std::string(scope) == "session" ||
             std::string(scope) == "run"));
    }
    CHECK(tern_flag_info(tern_flag_count(), nullptr, nullptr, nullptr) ==
          TERN_ERR_INVALID_ARGUMENT);
    // Defaults (PyTorch's).
    CHECK(flag("cuda.matmul.allow_tf32") == "false");
    CHECK(flag("cudnn.allow_tf32") == "true");
    CHECK(flag("cudnn.benchmark_limit") == "10");
    CHECK(flag("opt_einsum.strategy") == "auto");
    CHECK(flag("sdp.flash_enabled") == "true");
    // Set through the generic API, read through the typed one, and back.
    REQUIRE(tern_flag_set("cuda.matmul.allow_tf32", "true") == TERN_OK);
    CHECK(tern_cuda_matmul_get_allow_tf32() == 1);
    const char* source = nullptr;
    REQUIRE(tern_flag_describe("cuda.matmul.allow_tf32", &source, nullptr, nullptr, nullptr) ==
            TERN_OK);
    CHECK(std::string(source) == "api");
    tern_cuda_matmul_set_allow_tf32(0);
    CHECK(flag("cuda.matmul.allow_tf32") == "false");
    REQUIRE(tern_flag_set("opt_einsum.strategy", "GREEDY") == TERN_OK);  // case-insensitive
    CHECK(std::string(tern_opt_einsum_get_strategy()) == "greedy");
    // Invalid values name what is allowed.
    CHECK(tern_flag_set("opt_einsum.strategy", "fastest") == TERN_ERR_INVALID_ARGUMENT);
    CHECK(std::string(tern_last_error()).find("auto, greedy, optimal") != std::string::npos);
    CHECK(tern_flag_set("cudnn.benchmark", "maybe") == TERN_ERR_INVALID_ARGUMENT);
    CHECK(std::string(tern_last_error()).find("true or false") != std::string::npos);
    CHECK(tern_flag_set("num_threads", "0") == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_flag_set("num_threads", "3x") == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_flag_set("no.such.flag", "1") == TERN_ERR_INVALID_ARGUMENT);
    CHECK(std::string(tern_last_error()).find("no.such.flag") != std::string::npos);
    CHECK(tern_flag_set(nullptr, "1") == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_flag_get("no.such.flag", nullptr, 0) == TERN_ERR_INVALID_ARGUMENT);
    char tiny[3];
    CHECK(tern_flag_get("opt_einsum.strategy", tiny, sizeof tiny) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(std::string(tern_last_error()).find("7 needed") != std::string::npos);
    CHECK(tern_flag_describe("nope", nullptr, nullptr, nullptr, nullptr) ==
          TERN_ERR_INVALID_ARGUMENT);
  }

  TEST_CASE("flags: every typed function reads and writes the registry") {
    FlagRestore restore;
    struct BoolFn {
      const char* name;
      int (*get)(void);
      void (*set)(int);
    };
    const BoolFn fns[] = {
        {"cuda.matmul.allow_tf32", tern_cuda_matmul_get_allow_tf32,
         tern_cuda_matmul_set_allow_tf32},
        {"cuda.matmul.allow_fp16_reduced_precision_reduction",
         tern_cuda_matmul_get_allow_fp16_reduced_precision_reduction,
         tern_cuda_matmul_set_allow_fp16_reduced_precision_reduction},
        {"cuda.matmul.allow_bf16_reduced_precision_reduction",
         tern_cuda_matmul_get_allow_bf16_reduced_precision_reduction,
         tern_cuda_matmul_set_allow_bf16_reduced_precision_reduction},
        {"cudnn.enabled", tern_cudnn_get_enabled, tern_cudnn_set_enabled},
        {"cudnn.allow_tf32", tern_cudnn_get_allow_tf32, tern_cudnn_set_allow_tf32},
        {"cudnn.deterministic", tern_cudnn_get_deterministic, tern_cudnn_set_deterministic},
        {"cudnn.benchmark", tern_cudnn_get_benchmark, tern_cudnn_set_benchmark},
        {"mha.fastpath_enabled", tern_mha_get_fastpath_enabled, tern_mha_set_fastpath_enabled},
        {"opt_einsum.enabled", tern_opt_einsum_get_enabled, tern_opt_einsum_set_enabled},
    };
    for (const BoolFn& f : fns) {
      CAPTURE(f.name);
      for (int v : {1, 0, 1}) {
        f.set(v);
        CHECK(f.get() == v);
        CHECK(flag(f.name) == (v ? "true" : "false"));
        REQUIRE(tern_flag_set(f.name, v ? "0" : "1") == TERN_OK);
        CHECK(f.get() == !v);
      }
    }
    CHECK(tern_cuda_set_preferred_blas_library(TERN_BLAS_CUBLASLT) == TERN_OK);
    CHECK(tern_cuda_get_preferred_blas_library() == TERN_BLAS_CUBLASLT);
    CHECK(flag("cuda.preferred_blas_library") == "CUBLASLT");
    CHECK(tern_cuda_set_preferred_blas_library(static_cast<tern_blas_library>(7)) ==
          TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_cuda_set_preferred_linalg_library(TERN_LINALG_MAGMA) == TERN_OK);
    CHECK(flag("cuda.preferred_linalg_library") == "MAGMA");
    CHECK(tern_cuda_set_preferred_linalg_library(static_cast<tern_linalg_library>(-1)) ==
          TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_cudnn_set_benchmark_limit(3) == TERN_OK);
    CHECK(tern_cudnn_get_benchmark_limit() == 3);
    CHECK(tern_cudnn_set_benchmark_limit(-1) == TERN_ERR_INVALID_ARGUMENT);
    for (tern_sdp_backend b :
         {TERN_SDP_MATH, TERN_SDP_FLASH, TERN_SDP_MEM_EFFICIENT, TERN_SDP_CUDNN}) {
      CHECK(tern_sdp_enable(b, 0) == TERN_OK);
      CHECK(tern_sdp_enabled(b) == 0);
      CHECK(tern_sdp_enable(b, 1) == TERN_OK);
      CHECK(tern_sdp_enabled(b) == 1);
    }
    CHECK(flag("sdp.mem_efficient_enabled") == "true");
    CHECK(tern_sdp_enable(static_cast<tern_sdp_backend>(9), 1) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_sdp_enabled(static_cast<tern_sdp_backend>(9)) == 0);
    CHECK(tern_opt_einsum_set_strategy("optimal") == TERN_OK);
    CHECK(flag("opt_einsum.strategy") == "optimal");
    CHECK(tern_opt_einsum_set_strategy(nullptr) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_use_deterministic_algorithms(1) == TERN_OK);
    CHECK(tern_are_deterministic_algorithms_enabled() == 1);
    CHECK(flag("deterministic_algorithms") == "true");
    CHECK(tern_use_deterministic_algorithms(0) == TERN_OK);
    CHECK(tern_onednn_set_verbose(TERN_VERBOSE_ON_CREATION) ==
          (tern_onednn_is_available() ? TERN_OK : TERN_ERR_BACKEND_UNAVAILABLE));
    CHECK(tern_onednn_set_verbose(static_cast<tern_verbose_level>(5)) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_onednn_set_verbose(TERN_VERBOSE_OFF) ==
          (tern_onednn_is_available() ? TERN_OK : TERN_ERR_BACKEND_UNAVAILABLE));
    // Backends this build lacks answer truthfully and keep their flags.
    CHECK(tern_cuda_is_built() == 0);
    CHECK(tern_cuda_is_available() == 0);
    CHECK(tern_cuda_device_count() == 0);
    CHECK(tern_cudnn_is_available() == 0);
    CHECK(tern_cudnn_version() == -1);
    CHECK(tern_vulkan_is_built() == 0);
    CHECK(tern_mps_is_built() == 0);
    CHECK(tern_mps_is_available() == 0);
    CHECK(tern_openmp_is_available() == 1);
  }

  TEST_CASE("flags: environment initial values and thread precedence (child processes)") {
    auto row = [](const std::string& env, const char* name) {
      Cli r = run_cli(env, "info --flags");
      REQUIRE(r.code == 0);
      return flag_row(r.out, name);
    };
    auto v = row("MKL_NUM_THREADS=3 OMP_NUM_THREADS=5", "num_threads");
    REQUIRE(v.size() == 3);
    CHECK(v[1] == "3");
    CHECK(v[2] == "environment");
    CHECK(row("OMP_NUM_THREADS=5", "num_threads")[1] == "5");
    CHECK(row("MKL_NUM_THREADS=bad OMP_NUM_THREADS=4", "num_threads")[1] == "4");
    v = row("env -u MKL_NUM_THREADS -u OMP_NUM_THREADS", "num_threads");
    CHECK(v[1] == std::to_string(tern::physical_core_count()));
    CHECK(v[2] == "default");
    CHECK(row("TERN_NUM_INTEROP_THREADS=3", "num_interop_threads")[1] == "3");
    CHECK(row("TERN_BLAS_PREFER_CUBLASLT=1", "cuda.preferred_blas_library")[1] == "CUBLASLT");
    CHECK(row("TERN_LINALG_PREFER_CUSOLVER=1", "cuda.preferred_linalg_library")[1] == "CUSOLVER");
    CHECK(row("TERN_DETERMINISTIC_ALGORITHMS=1", "deterministic_algorithms")[1] == "true");
    CHECK(row("TERN_OPT_EINSUM_STRATEGY=greedy", "opt_einsum.strategy")[1] == "greedy");
    v = row("TERN_OPT_EINSUM_STRATEGY=fast", "opt_einsum.strategy");
    CHECK(v[1] == "auto");  // an invalid value is ignored ...
    Cli p = run_cli("TERN_OPT_EINSUM_STRATEGY=fast", "info");
    CHECK(p.code == 0);
    // ... and the capability cap shows in config_show.
    Cli cap = run_cli("TERN_CPU_CAPABILITY=default", "info");
    CHECK(cap.out.find("CPU capability: ") != std::string::npos);
    CHECK(cap.out.find("cap cpu.max_capability=DEFAULT [environment TERN_CPU_CAPABILITY]") !=
          std::string::npos);
    // The parallel report says where each thread count came from.
    Cli par = run_cli("MKL_NUM_THREADS=1", "info --parallel");
    CHECK(par.out.find("intra-op threads (tern_get_num_threads): 1  [source: environment "
                       "MKL_NUM_THREADS]") != std::string::npos);
    CHECK(par.out.find("openblas_get_num_threads() = 1") != std::string::npos);
  }

  TEST_CASE("threads: set/get, validation, API over environment, reports") {
    FlagRestore restore;
    CHECK(tern_set_num_threads(0) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_set_num_threads(-2) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_set_num_interop_threads(0) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_set_num_interop_threads(5000) == TERN_ERR_INVALID_ARGUMENT);
    REQUIRE(tern_set_num_threads(1) == TERN_OK);
    CHECK(tern_get_num_threads() == 1);
    REQUIRE(tern_set_num_interop_threads(3) == TERN_OK);
    CHECK(tern_get_num_interop_threads() == 3);
    CHECK(flag("num_interop_threads") == "3");
    std::string info = tern_parallel_info();
    CHECK(info.find("intra-op threads (tern_get_num_threads): 1  [source: api") !=
          std::string::npos);
    CHECK(info.find("inter-op threads (tern_get_num_interop_threads): 3") != std::string::npos);
    std::string cfg = tern_config_show();
    CHECK(cfg.find("threads: intra-op 1 [api") != std::string::npos);
    CHECK(cfg.find("oneDNN") != std::string::npos);
  }

  TEST_CASE("session and run overrides, with sources") {
    FlagRestore restore;
    // Through the C API: options carry session-scoped flags.
    Builder c;
    int cx = c.input("x", {2, 3});
    c.g.outputs = {c.node("Relu", {cx})};
    tern_model m{Model::create(std::move(c.g), nullptr, "t").value()};
    tern_session_options* o = nullptr;
    REQUIRE(tern_session_options_create(&o) == TERN_OK);
    CHECK(tern_session_options_set_flag(o, "cpu.max_capability", "AVX2") ==
          TERN_ERR_INVALID_ARGUMENT);  // global scope
    CHECK(std::string(tern_last_error()).find("scope global") != std::string::npos);
    CHECK(tern_session_options_set_flag(o, "deterministic_algorithms", "perhaps") ==
          TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_session_options_set_flag(o, "nope", "1") == TERN_ERR_INVALID_ARGUMENT);
    REQUIRE(tern_session_options_set_flag(o, "deterministic_algorithms", "true") == TERN_OK);
    REQUIRE(tern_session_options_set_num_threads(o, 1) == TERN_OK);
    tern_session* s = nullptr;
    REQUIRE(tern_session_create(&m, o, &s) == TERN_OK);
    char buf[32];
    const char* src = nullptr;
    REQUIRE(tern_session_flag_get(s, "deterministic_algorithms", buf, sizeof buf, &src) == TERN_OK);
    CHECK(std::string(buf) == "true");
    CHECK(std::string(src) == "session");
    REQUIRE(tern_session_flag_get(s, "num_threads", buf, sizeof buf, &src) == TERN_OK);
    CHECK(std::string(buf) == "1");
    CHECK(std::string(src) == "session");
    // A flag the session does not override follows the global value at the next run.
    REQUIRE(tern_flag_set("opt_einsum.strategy", "greedy") == TERN_OK);
    REQUIRE(tern_session_flag_get(s, "opt_einsum.strategy", buf, sizeof buf, &src) == TERN_OK);
    CHECK(std::string(buf) == "greedy");
    CHECK(std::string(src) == "api");
    CHECK(tern_flag_get("deterministic_algorithms", buf, sizeof buf) == TERN_OK);
    CHECK(std::string(buf) == "false");  // the global value is untouched
    CHECK(tern_session_flag_get(nullptr, "num_threads", buf, sizeof buf, &src) ==
          TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_session_flag_get(s, "nope", buf, sizeof buf, &src) == TERN_ERR_INVALID_ARGUMENT);
    // Run options take run-scoped flags only.
    tern_run_options* r = nullptr;
    REQUIRE(tern_run_options_create(&r) == TERN_OK);
    CHECK(tern_run_options_set_flag(r, "num_threads", "1") == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_run_options_set_flag(r, "sdp.flash_enabled", "false") == TERN_OK);
    CHECK(tern_run_options_set_flag(r, "onednn.verbose", "LOUD") == TERN_ERR_INVALID_ARGUMENT);
    tern_sdp_backend bad = static_cast<tern_sdp_backend>(4);
    CHECK(tern_run_options_set_sdp_backends(r, &bad, 1) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_run_options_set_sdp_backends(r, nullptr, 1) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_run_options_set_sdp_backends(nullptr, nullptr, 0) == TERN_ERR_INVALID_ARGUMENT);
    const int64_t shape[] = {2, 3};
    tern_tensor* in = nullptr;
    REQUIRE(tern_tensor_create(TERN_FLOAT32, shape, 2, &in) == TERN_OK);
    const char* in_name = "x";
    const char* out_name = m.m->graph().value_name(m.m->graph().outputs[0]).c_str();
    tern_tensor* out = nullptr;
    CHECK(tern_session_run(s, r, &in_name, &in, 1, &out_name, 1, &out) == TERN_OK);
    tern_tensor_destroy(out);
    tern_tensor_destroy(in);
    tern_run_options_destroy(r);
    tern_session_destroy(s);
    tern_session_options_destroy(o);
  }

  TEST_CASE("threads: a run keeps no more cores busy than asked, and idle threads sleep") {
    FlagRestore restore;
    // GEMM-heavy (OpenBLAS under Tern's split) then Conv (oneDNN): both libraries in one run.
    Builder b;
    int x = b.input("x", {256, 256});
    int w = b.constant("w", random_f32({256, 256}, 1));
    int h = b.node("MatMul", {x, w});
    int h2 = b.node("MatMul", {h, w});
    int r4 = b.constant("r4", make_i64({4}, {1, 4, 128, 128}));
    int img = b.node("Reshape", {h2, r4});
    int k = b.constant("k", random_f32({16, 4, 3, 3}, 2));
    Attributes pads;
    Attribute p;
    p.kind = Attribute::Kind::kInts;
    p.ints = {1, 1, 1, 1};
    pads.set("pads", p);
    int y = b.node("Conv", {img, k}, pads);
    auto s = b.session({y});
    Tensor xin = random_f32({256, 256}, 3);
    const std::string out = s->model().graph().value_name(y);
    for (int threads : {1, 2}) {
      if (threads > static_cast<int>(std::thread::hardware_concurrency())) continue;
      REQUIRE(tern_set_num_threads(threads) == TERN_OK);
      run(*s, {"x"}, {&xin}, out);  // warm up (plans, primitives)
      double c0 = process_cpu_ms();
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 40; ++i) run(*s, {"x"}, {&xin}, out);
      double wall =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      double busy = (process_cpu_ms() - c0) / wall;
      MESSAGE("threads=", threads, ": busy cores ", busy, " over ", wall, " ms");
      CHECK(busy < threads + 0.25);  // never oversubscribed (LibTorch kept 1.98 busy at 1)
      // Idle: after the runs, the pools sleep within a short, bounded time.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      double i0 = process_cpu_ms();
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      double idle_ms = process_cpu_ms() - i0;
      MESSAGE("threads=", threads, ": CPU time while idle for 300 ms: ", idle_ms, " ms");
      CHECK(idle_ms < 30);
    }
  }

  TEST_CASE("inter-op: independent branches run concurrently with the same results") {
    FlagRestore restore;
    // Two branches from x: a = MatMul(MatMul(x, w1), w1), b = MatMul(MatMul(x, w2), w2); y = a + b.
    Builder b;
    int x = b.input("x", {64, 128});
    int w1 = b.constant("w1", random_f32({128, 128}, 11, -0.1f, 0.1f));
    int w2 = b.constant("w2", random_f32({128, 128}, 12, -0.1f, 0.1f));
    int a = b.node("MatMul", {b.node("MatMul", {x, w1}), w1});
    int c = b.node("MatMul", {b.node("MatMul", {x, w2}), w2});
    int y = b.node("Add", {a, c});
    auto s = b.session({y});
    Tensor xin = random_f32({64, 128}, 13);
    const std::string out = s->model().graph().value_name(y);
    auto plan = s->plan_for({{64, 128}}).value();
    CHECK(plan->width == 2);
    CHECK(plan->layouts[1].bytes >= plan->layouts[0].bytes);
    REQUIRE(tern_set_num_threads(1) == TERN_OK);
    REQUIRE(tern_set_num_interop_threads(1) == TERN_OK);
    Tensor serial = run(*s, {"x"}, {&xin}, out)[0];
    REQUIRE(tern_set_num_interop_threads(2) == TERN_OK);  // takes effect at the next run
    for (int i = 0; i < 20; ++i) {
      Tensor par = run(*s, {"x"}, {&xin}, out)[0];
      REQUIRE(bitwise_equal(par, serial));  // same kernels, same per-node threads
    }
    // Concurrent runs of one session while the inter-op pool is busy.
    std::vector<std::thread> ts;
    std::atomic<int> ok{0};
    for (int t = 0; t < 3; ++t) {
      ts.emplace_back([&] {
        for (int i = 0; i < 10; ++i) {
          std::vector<Tensor> res;
          if (s->run({"x"}, {&xin}, {out}, &res).is_ok() && bitwise_equal(res[0], serial)) ++ok;
        }
      });
    }
    for (auto& t : ts) t.join();
    CHECK(ok == 30);
    CHECK(std::string(tern_parallel_info()).find("inter-op pool threads started: 0") ==
          std::string::npos);
  }

  TEST_CASE("cpu capability: the cap changes what our kernels dispatch to") {
    FlagRestore restore;
    const std::string detected = detected_cpu_capability();
    CHECK(std::string(tern_cpu_get_capability()) == detected);
    Builder b;
    int q = b.input("q", {1, 2, 40, 16});
    int k = b.input("k", {1, 2, 40, 16});
    int v = b.input("v", {1, 2, 40, 16});
    int y = b.node("Attention", {q, k, v});
    auto s = b.session({y});
    const std::vector<Shape> shapes(3, Shape{1, 2, 40, 16});
    Tensor qt = random_f32(shapes[0], 1), kt = random_f32(shapes[0], 2),
           vt = random_f32(shapes[0], 3);
    const std::string out = s->model().graph().value_name(y);
    std::vector<std::string> seen;
    std::vector<Tensor> results;
    for (const char* cap : {"auto", "AVX2", "DEFAULT"}) {
      REQUIRE(tern_flag_set("cpu.max_capability", cap) == TERN_OK);
      std::string kname = kernels(*s, shapes)[0];
      seen.push_back(kname);
      results.push_back(run(*s, {"q", "k", "v"}, {&qt, &kt, &vt}, out)[0]);
      MESSAGE("cap ", std::string(cap), ": ", std::string(tern_cpu_get_capability()), " -> ",
              kname);
    }
#if defined(__x86_64__)
    if (detected == "AVX512") CHECK(seen[0] == "flash.avx512");
    if (detected == "AVX512" || detected == "AVX2") CHECK(seen[1] == "flash.avx2");
    CHECK(seen[2] == "flash.scalar");
    REQUIRE(tern_flag_set("cpu.max_capability", "DEFAULT") == TERN_OK);
    CHECK(std::string(tern_cpu_get_capability()) == "NO AVX");
#endif
    for (const Tensor& r : results) CHECK(max_abs_diff(r, results[0]) < 1e-5f);
    CHECK(tern_flag_set("cpu.max_capability", "AVX9000") == TERN_ERR_INVALID_ARGUMENT);
  }

  TEST_CASE("sdpa: MATH and FLASH match the reference; selection by flags and run options") {
    FlagRestore restore;
    struct Case {
      const char* what;
      Shape q, k, v;
      int64_t qh = 0, kvh = 0;
      bool causal = false;
      int mask = 0;  // 0 none, 1 bool, 2 float
    };
    const Case cases[] = {
        {"4-D MHA", {2, 3, 70, 16}, {2, 3, 150, 16}, {2, 3, 150, 24}},
        {"4-D causal", {1, 2, 130, 32}, {1, 2, 130, 32}, {1, 2, 130, 32}, 0, 0, true},
        {"GQA + bool mask", {1, 4, 33, 8}, {1, 2, 200, 8}, {1, 2, 200, 8}, 0, 0, false, 1},
        {"3-D + float mask", {2, 17, 4 * 8}, {2, 19, 2 * 8}, {2, 19, 2 * 8}, 4, 2, true, 2},
    };
    for (const Case& c : cases) {
      CAPTURE(c.what);
      Attributes at;
      if (c.qh) {
        Attribute a;
        a.kind = Attribute::Kind::kInt;
        a.i = c.qh;
        at.set("q_num_heads", a);
        a.i = c.kvh;
        at.set("kv_num_heads", a);
      }
      if (c.causal) {
        Attribute a;
        a.kind = Attribute::Kind::kInt;
        a.i = 1;
        at.set("is_causal", a);
      }
      Builder b;
      int q = b.input("q", c.q), k = b.input("k", c.k), v = b.input("v", c.v);
      std::vector<int> ins = {q, k, v};
      const int64_t sq = c.q.size() == 4 ? c.q[2] : c.q[1];
      const int64_t skv = c.k.size() == 4 ? c.k[2] : c.k[1];
      Tensor mask;
      if (c.mask == 1) {
        mask = Tensor::allocate(DType::kBool, {sq, skv}).value();
        for (int64_t i = 0; i < mask.numel(); ++i)
          mask.data<bool>()[i] = (i * 7) % 5 != 0 || i % skv == 0;
        ins.push_back(b.input("m", {sq, skv}, DType::kBool));
      } else if (c.mask == 2) {
        mask = random_f32({c.q[0], 1, sq, skv}, 9, -2, 0);
        ins.push_back(b.input("m", mask.shape()));
      }
      int y = b.node("Attention", ins, at);
      auto s = b.session({y});
      Tensor qt = random_f32(c.q, 1), kt = random_f32(c.k, 2), vt = random_f32(c.v, 3);
      std::vector<std::string> names = {"q", "k", "v"};
      std::vector<const Tensor*> tensors = {&qt, &kt, &vt};
      if (c.mask) {
        names.push_back("m");
        tensors.push_back(&mask);
      }
      const std::string out = s->model().graph().value_name(y);
      // The reference kernel is the ground truth.
      SingleOp ref{"Attention", at, {qt, kt, vt}, {}, 23, 1};
      if (c.mask) ref.runtime.push_back(mask);
      auto expect = ref.run();
      REQUIRE(expect);
      std::vector<Shape> shapes;
      for (const Tensor* t : tensors) shapes.push_back(t->shape());
      FlagOverrides flash_only, math_only, none;
      for (auto* o : {&flash_only, &math_only, &none}) {
        o->set(FlagId::kSdpFlash, o == &flash_only);
        o->set(FlagId::kSdpMath, o == &math_only);
      }
      CHECK(kernels(*s, shapes, &flash_only)[0].rfind("flash.", 0) == 0);
      CHECK(kernels(*s, shapes, &math_only)[0].rfind("math.", 0) == 0);
      Tensor f = run(*s, names, tensors, out, &flash_only)[0];
      Tensor m = run(*s, names, tensors, out, &math_only)[0];
      CHECK(max_abs_diff(f, (*expect)[0]) < 2e-5f);
      CHECK(max_abs_diff(m, (*expect)[0]) < 2e-5f);
      std::vector<Tensor> res;
      Status st = s->run(names, tensors, {out}, &res, &none);
      CHECK(st.code() == Code::kInvalidArgument);
      CHECK(st.message().find("FLASH: disabled") != std::string::npos);
      // The global flags decide when a run says nothing: FLASH first.
      CHECK(kernels(*s, shapes)[0].rfind("flash.", 0) == 0);
      REQUIRE(tern_sdp_enable(TERN_SDP_FLASH, 0) == TERN_OK);
      CHECK(kernels(*s, shapes)[0].rfind("math.", 0) == 0);
      REQUIRE(tern_sdp_enable(TERN_SDP_FLASH, 1) == TERN_OK);
      // MATH plans a score workspace; FLASH does not.
      auto pf = s->plan_for(shapes, s->flags(&flash_only)).value();
      auto pm = s->plan_for(shapes, s->flags(&math_only)).value();
      CHECK(pm->arena_bytes >= pf->arena_bytes + static_cast<size_t>(c.q[0] * sq * skv * 4));
    }
  }

  TEST_CASE("sdpa: tern_sdp_can_use explains refusals") {
    FlagRestore restore;
    tern_sdp_params p{};
    p.struct_size = sizeof p;
    p.batch = 1;
    p.num_heads = 8;
    p.seq_len_q = p.seq_len_kv = 512;
    p.head_dim = 64;
    p.dtype = TERN_FLOAT32;
    char why[256];
    CHECK(tern_sdp_can_use(TERN_SDP_MATH, &p, why, sizeof why) == 1);
    CHECK(std::string(why).empty());
    CHECK(tern_sdp_can_use(TERN_SDP_FLASH, &p, why, sizeof why) == 1);
    CHECK(tern_sdp_can_use(TERN_SDP_MEM_EFFICIENT, &p, why, sizeof why) == 0);
    CHECK(std::string(why).find("CUDA") != std::string::npos);
    CHECK(tern_sdp_can_use(TERN_SDP_CUDNN, &p, why, sizeof why) == 0);
    p.dropout_p = 0.1f;
    CHECK(tern_sdp_can_use(TERN_SDP_FLASH, &p, why, sizeof why) == 0);
    CHECK(std::string(why).find("dropout") != std::string::npos);
    p.dropout_p = 0;
    p.dtype = TERN_FLOAT16;
    CHECK(tern_sdp_can_use(TERN_SDP_MATH, &p, why, sizeof why) == 0);
    CHECK(std::string(why).find("float16") != std::string::npos);
    p.dtype = TERN_FLOAT32;
    p.head_dim = 4096;
    CHECK(tern_sdp_can_use(TERN_SDP_FLASH, &p, why, sizeof why) == 0);
    CHECK(std::string(why).find("head_dim") != std::string::npos);
    p.head_dim = 64;
    REQUIRE(tern_sdp_enable(TERN_SDP_FLASH, 0) == TERN_OK);
    CHECK(tern_sdp_can_use(TERN_SDP_FLASH, &p, why, sizeof why) == 0);
    CHECK(std::string(why).find("disabled") != std::string::npos);
    char small[8];
    CHECK(tern_sdp_can_use(TERN_SDP_FLASH, &p, small, sizeof small) == 0);
    CHECK(std::strlen(small) == 7);  // truncated, terminated
    CHECK(tern_sdp_can_use(TERN_SDP_FLASH, &p, nullptr, 0) == 0);
    CHECK(tern_sdp_can_use(TERN_SDP_MATH, nullptr, why, sizeof why) == 0);
    p.struct_size = 8;
    CHECK(tern_sdp_can_use(TERN_SDP_MATH, &p, why, sizeof why) == 0);
    CHECK(std::string(why).find("struct_size") != std::string::npos);
  }

  TEST_CASE("mha fastpath: MatMul-Softmax-MatMul becomes one Attention step") {
    FlagRestore restore;
    // PyTorch's export of softmax(q @ k.transpose(-2, -1) / sqrt(d) + mask) @ v.
    Builder b;
    const Shape qs = {2, 4, 48, 16};
    int q = b.input("q", qs), k = b.input("k", qs), v = b.input("v", qs);
    int mask = b.input("mask", {2, 1, 48, 48});
    Attribute perm;
    perm.kind = Attribute::Kind::kInts;
    perm.ints = {0, 1, 3, 2};
    int kt = b.node("Transpose", {k}, attrs1("perm", perm));
    int scores = b.node("MatMul", {q, kt});
    int scaled = b.node("Div", {scores, b.constant("sqrt_d", make_f32({}, {4.0f}))});
    int masked = b.node("Add", {scaled, mask});
    Attribute axis;
    axis.kind = Attribute::Kind::kInt;
    axis.i = -1;
    int probs = b.node("Softmax", {masked}, attrs1("axis", axis));
    int y = b.node("MatMul", {probs, v});
    auto s = b.session({y});
    CHECK(s->attention_pattern_count() == 1);
    Tensor qt = random_f32(qs, 1), ktt = random_f32(qs, 2), vt = random_f32(qs, 3);
    Tensor mt = random_f32({2, 1, 48, 48}, 4, -3, 0);
    const std::vector<Shape> shapes = {qs, qs, qs, {2, 1, 48, 48}};
    const std::string out = s->model().graph().value_name(y);
    const std::vector<std::string> names = {"q", "k", "v", "mask"};
    const std::vector<const Tensor*> ins = {&qt, &ktt, &vt, &mt};
    auto fused = s->plan_for(shapes).value();
    CHECK(fused->fused_attention == 1);
    CHECK(fused->steps.size() == 1);
    CHECK(std::string(fused->steps[0].kernel->name()).rfind("flash.", 0) == 0);
    Tensor yf = run(*s, names, ins, out)[0];
    tern_mha_set_fastpath_enabled(0);
    auto plain = s->plan_for(shapes).value();
    CHECK(plain->fused_attention == 0);
    CHECK(plain->steps.size() == 6);
    Tensor yp = run(*s, names, ins, out)[0];
    CHECK(max_abs_diff(yf, yp) < 2e-5f);
    // A session can opt out on its own.
    tern_mha_set_fastpath_enabled(1);
    FlagOverrides off;
    off.set(FlagId::kMhaFastpath, 0);
    CHECK(s->plan_for(shapes, s->flags(&off)).value()->fused_attention == 0);
  }

  TEST_CASE("opt_einsum: the path changes with the flags, the result does not") {
    FlagRestore restore;
    // ab,bc,cd->ad with a=d=200, b=c... left to right makes a 200x200 intermediate.
    const Shape sa = {200, 2}, sb = {2, 300}, sc = {300, 3};
    Builder b;
    int x = b.input("a", sa), y = b.input("b", sb), z = b.input("c", sc);
    Attribute eq;
    eq.kind = Attribute::Kind::kString;
    eq.s = "ab,bc,cd->ad";
    int out_id = b.node("Einsum", {x, y, z}, attrs1("equation", eq));
    auto s = b.session({out_id});
    Tensor ta = random_f32(sa, 1), tb = random_f32(sb, 2), tc = random_f32(sc, 3);
    const std::vector<Shape> shapes = {sa, sb, sc};
    const std::string out = s->model().graph().value_name(out_id);
    SingleOp ref{"Einsum", attrs1("equation", eq), {ta, tb, tc}, {}, 13, 1};
    auto expect = ref.run();
    REQUIRE(expect);
    std::string k_opt = kernels(*s, shapes)[0];
    Tensor r_opt = run(*s, {"a", "b", "c"}, {&ta, &tb, &tc}, out)[0];
    tern_opt_einsum_set_enabled(0);
    std::string k_ltr = kernels(*s, shapes)[0];
    Tensor r_ltr = run(*s, {"a", "b", "c"}, {&ta, &tb, &tc}, out)[0];
    tern_opt_einsum_set_enabled(1);
    REQUIRE(tern_opt_einsum_set_strategy("greedy") == TERN_OK);
    std::string k_greedy = kernels(*s, shapes)[0];
    MESSAGE(k_opt, " | ", k_ltr, " | ", k_greedy);
    CHECK(k_opt == "gemm.optimal(1,2)(0,3)");
    CHECK(k_ltr == "gemm.left_to_right(0,1)(2,3)");
    CHECK(k_greedy.rfind("gemm.greedy", 0) == 0);
    CHECK(max_abs_diff(r_opt, (*expect)[0]) < 1e-4f);
    CHECK(max_abs_diff(r_ltr, (*expect)[0]) < 1e-4f);
    // The cost model behind the choice.
    auto spec = ops::parse_einsum("ab,bc,cd->ad", shapes).value();
    auto opt = ops::einsum_path(spec, ops::EinsumStrategy::kOptimal);
    auto ltr = ops::einsum_path(spec, ops::EinsumStrategy::kLeftToRight);
    CHECK(opt.cost < ltr.cost / 10);
    CHECK(ops::einsum_strategy(true, 0, 5) == ops::EinsumStrategy::kGreedy);
    CHECK(ops::einsum_strategy(true, 0, 3) == ops::EinsumStrategy::kOptimal);
    CHECK(!ops::parse_einsum("ab,bc->ad", {sa, sb}));
    CHECK(!ops::parse_einsum("ab,bc->a", {sa, {3, 3}}));
  }

  TEST_CASE("deterministic algorithms: bitwise identical across runs and thread counts") {
    FlagRestore restore;
    Builder b;
    int x = b.input("x", {1, 8, 40, 40});
    int w = b.constant("w", random_f32({16, 8, 3, 3}, 5));
    Attribute pads;
    pads.kind = Attribute::Kind::kInts;
    pads.ints = {1, 1, 1, 1};
    int conv = b.node("Conv", {x, w}, attrs1("pads", pads));
    int r = b.constant("shape", make_i64({2}, {16 * 40, 40}));
    int flat = b.node("Reshape", {conv, r});
    int mm = b.node("MatMul", {flat, b.constant("w2", random_f32({40, 300}, 6))});
    Attribute axis;
    axis.kind = Attribute::Kind::kInt;
    axis.i = -1;
    int y = b.node("Softmax", {mm}, attrs1("axis", axis));
    auto s = b.session({y});
    Tensor xin = random_f32({1, 8, 40, 40}, 7);
    const std::string out = s->model().graph().value_name(y);
    const std::vector<Shape> shapes = {{1, 8, 40, 40}};
    CHECK(kernels(*s, shapes)[0] == (tern_onednn_is_available() ? "onednn" : "im2col_gemm"));
    REQUIRE(tern_use_deterministic_algorithms(1) == TERN_OK);
    CHECK(kernels(*s, shapes)[0] == "im2col_gemm");
    std::vector<Tensor> results;
    for (int threads : {1, 2, 3, 1, 2}) {
      REQUIRE(tern_set_num_threads(threads) == TERN_OK);
      results.push_back(run(*s, {"x"}, {&xin}, out)[0]);
    }
    for (const Tensor& t : results) CHECK(bitwise_equal(t, results[0]));
    REQUIRE(tern_use_deterministic_algorithms(0) == TERN_OK);
    Tensor fast = run(*s, {"x"}, {&xin}, out)[0];
    CHECK(max_abs_diff(fast, results[0]) < 1e-5f);
  }

  TEST_CASE("oneDNN verbose: on demand, and around one run only") {
    if (!tern_onednn_is_available()) return;
    FlagRestore restore;
    Builder b;
    int x = b.input("x", {1, 4, 16, 16});
    int y = b.node("Conv", {x, b.constant("w", random_f32({8, 4, 3, 3}, 1))});
    auto s = b.session({y});
    Tensor xin = random_f32({1, 4, 16, 16}, 2);
    const std::string out = s->model().graph().value_name(y);
    // Captures what a run prints on stdout (oneDNN writes its verbose lines there).
    auto captured = [&](const FlagOverrides* rf) {
      std::fflush(stdout);
      char path[] = "/tmp/tern_verbose_XXXXXX";
      int fd = mkstemp(path);
      REQUIRE(fd >= 0);
      int saved = dup(1);
      dup2(fd, 1);
      run(*s, {"x"}, {&xin}, out, rf);
      std::fflush(stdout);
      dup2(saved, 1);
      close(saved);
      close(fd);
      std::ifstream in(path);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::remove(path);
      return text;
    };
    CHECK(captured(nullptr).find("onednn_verbose") == std::string::npos);
    REQUIRE(tern_onednn_set_verbose(TERN_VERBOSE_ON) == TERN_OK);
    std::string on = captured(nullptr);
    CHECK(on.find("onednn_verbose") != std::string::npos);
    CHECK(on.find("convolution") != std::string::npos);
    REQUIRE(tern_onednn_set_verbose(TERN_VERBOSE_OFF) == TERN_OK);
    CHECK(captured(nullptr).find("onednn_verbose") == std::string::npos);
    FlagOverrides one_run;
    one_run.set(FlagId::kOnednnVerbose, 1);
    CHECK(captured(&one_run).find("onednn_verbose") != std::string::npos);
    CHECK(captured(nullptr).find("onednn_verbose") == std::string::npos);
  }

  TEST_CASE("Transpose matches a hand computation") {
    Attribute perm;
    perm.kind = Attribute::Kind::kInts;
    perm.ints = {1, 2, 0};
    SingleOp op{"Transpose",
                attrs1("perm", perm),
                {make_f32({2, 2, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})},
                {}};
    auto r = op.run();
    REQUIRE(r);
    CHECK((*r)[0].shape() == Shape{2, 3, 2});
    CHECK(values_f32((*r)[0]) == std::vector<float>{0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11});
    perm.ints = {0, 0, 1};
    SingleOp bad{
        "Transpose", attrs1("perm", perm), {make_f32({2, 2, 3}, std::vector<float>(12))}, {}};
    CHECK(bad.run().status().code() == Code::kInvalidModel);
  }
}
