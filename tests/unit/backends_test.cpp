// The backends API (DESIGN §3 "threads" to "generic"): the flags registry and every typed
// function over it, environment initial values and precedence (in child processes), session and
// run overrides, threads (busy cores, idle spin, inter-op) and the CPU capability cap.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "api/api_internal.h"
#include "backends/cpu/cpu_capability.h"
#include "backends_util.h"
#include "c_api.h"
#include "core/threading.h"

using namespace tern;
using namespace tern_test;

TEST_SUITE("backends") {
  TEST_CASE("flags: registry, generic access, descriptions and invalid values") {
    FlagRestore restore;
    REQUIRE(tern_flag_count() >= 22);
    for (size_t i = 0; i < tern_flag_count(); ++i) {
      const char *name = nullptr, *type = nullptr, *doc = nullptr;
      REQUIRE(tern_flag_info(i, &name, &type, &doc) == TERN_OK);
      CHECK(std::strlen(doc) > 10);
      CHECK((std::string(type) == "bool" || std::string(type) == "int" ||
             std::string(type) == "enum" || std::string(type) == "cpulist"));
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
    CHECK(tern_cuda_set_preferred_linalg_library(static_cast<tern_linalg_library>(3)) ==
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
    // Backends this build lacks answer truthfully and keep their flags; CUDA builds answer from
    // the runtime (no device here is 0 devices, not an error) and report the linked cuDNN.
#if defined(TERN_HAVE_CUDA)
    constexpr int kCudaBuilt = 1;
#else
    constexpr int kCudaBuilt = 0;
#endif
    CHECK(tern_cuda_is_built() == kCudaBuilt);
    CHECK(tern_cuda_is_available() == (tern_cuda_device_count() > 0 ? 1 : 0));
    if (kCudaBuilt) {
      CHECK(tern_cudnn_version() >= 90000);  // cuDNN 9.x: 9xxyy
      CHECK(tern_cudnn_is_available() == tern_cuda_is_available());
    } else {
      CHECK(tern_cuda_device_count() == 0);
      CHECK(tern_cudnn_is_available() == 0);
      CHECK(tern_cudnn_version() == -1);
    }
#if defined(TERN_HAVE_VULKAN)
    CHECK(tern_vulkan_is_built() == 1);
#else
    CHECK(tern_vulkan_is_built() == 0);
    CHECK(tern_vulkan_is_available() == 0);
#endif
    CHECK(tern_mps_is_built() == 0);
    CHECK(tern_mps_is_available() == 0);
#if defined(TERN_HAVE_OPENMP)
    CHECK(tern_openmp_is_available() == 1);
#else
    CHECK(tern_openmp_is_available() == 0);  // the minimal build has Tern's own threads only
#endif
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
    CHECK(v[1] == std::to_string(tern::default_thread_choice().threads));
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
#if defined(TERN_HAVE_OPENBLAS)
    CHECK(par.out.find("openblas_get_num_threads() = 1") != std::string::npos);
#endif
  }

  TEST_CASE("flags: tern info --flags names the flags without effect and the process-wide one") {
    Cli r = run_cli("", "info --flags");
    REQUIRE(r.code == 0);
    auto line = [&](const std::string& name) {
      const size_t at = r.out.find("\n" + name + " ");
      REQUIRE_MESSAGE(at != std::string::npos, name);
      return r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
    };
    CHECK(line("sdp.cudnn_enabled").find("no effect") != std::string::npos);
    CHECK(line("cuda.preferred_linalg_library").find("no effect") != std::string::npos);
    // The library-bound ones say they have no effect in a build without the library.
    const char* onednn_only[] = {"onednn.verbose", "cpu.conv_memory_format",
                                 "cpu.matmul.allow_bf16", "cpu.conv.allow_bf16",
                                 "cpu.conv.winograd"};
    for (const char* name : onednn_only) {
#if defined(TERN_HAVE_ONEDNN)
      CHECK_MESSAGE(line(name).find("no effect in this build") == std::string::npos, name);
#else
      CHECK_MESSAGE(line(name).find("no effect in this build") != std::string::npos, name);
#endif
    }
#if defined(TERN_HAVE_ONEDNN)
    CHECK(line("onednn.verbose").find("process-wide") != std::string::npos);
#endif
#if defined(TERN_HAVE_OPENMP)
    CHECK(line("cpu.run_homes").find("no effect in this build") == std::string::npos);
#else
    CHECK(line("cpu.run_homes").find("no effect in this build") != std::string::npos);
#endif
    // Flags with an effect do not say otherwise.
    CHECK(line("sdp.flash_enabled").find("no effect") == std::string::npos);
    CHECK(line("cuda.preferred_blas_library").find("no effect") == std::string::npos);
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
    // GEMM-heavy (OpenBLAS under Tern's split) then Conv (oneDNN): both libraries in one run,
    // with oneDNN's pooling, Tern's own kernels and a grouped dilated convolution after.
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
    int conv = b.node("Conv", {img, k}, pads);
    // Then oneDNN's pooling, Tern's own Softmax, and a grouped convolution dilated past most of
    // its map (the kind oneDNN once ran on its reference kernel with a thread count of its own).
    Attributes pool;
    Attribute ks;
    ks.kind = Attribute::Kind::kInts;
    ks.ints = {2, 2};
    pool.set("kernel_shape", ks);
    pool.set("strides", ks);
    int pooled = b.node("Softmax", {b.node("MaxPool", {conv}, pool)});
    Attributes grouped = pads;
    Attribute dil, pad6, group;
    dil.kind = pad6.kind = Attribute::Kind::kInts;
    dil.ints = {6, 6};
    pad6.ints = {6, 6, 6, 6};
    group.kind = Attribute::Kind::kInt;
    group.i = 8;
    grouped.set("dilations", dil);
    grouped.set("pads", pad6);
    grouped.set("group", group);
    int y = b.node("Conv", {pooled, b.constant("k2", random_f32({16, 2, 3, 3}, 4))}, grouped);
    auto s = b.session({y});
    Tensor xin = random_f32({256, 256}, 3);
    const std::string out = s->model().graph().value_name(y);
    for (int threads : {1, 2}) {
      if (threads > static_cast<int>(std::thread::hardware_concurrency())) continue;
      REQUIRE(tern_set_num_threads(threads) == TERN_OK);
      run(*s, {"x"}, {&xin}, out);  // warm up (plans, primitives)
      // The least busy of three windows: a core kept busy by a run shows in every window,
      // while a worker still spinning down from an earlier test's parallel region does not.
      double busy = 1e9, wall = 0;
      for (int window = 0; window < 3; ++window) {
        double c0 = process_cpu_ms();
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 40; ++i) run(*s, {"x"}, {&xin}, out);
        wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                   .count();
        busy = std::min(busy, (process_cpu_ms() - c0) / wall);
      }
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
  }

  TEST_CASE("inter-op: branches overlap in time on different threads (the profile shows it)") {
    FlagRestore restore;
    // Two branches of four 192x192x192 MatMuls each (~0.3 ms apiece on one core).
    Builder b;
    int x = b.input("x", {192, 192});
    int branch[2];
    for (int k = 0; k < 2; ++k) {
      int w = b.constant("w" + std::to_string(k), random_f32({192, 192}, 20 + k, -0.05f, 0.05f));
      int h = x;
      for (int i = 0; i < 4; ++i) h = b.node("MatMul", {h, w});
      branch[k] = h;
    }
    int y = b.node("Add", {branch[0], branch[1]});
    auto s = b.session({y}, {}, "interop_profile.json");
    Tensor xin = random_f32({192, 192}, 22);
    const std::string out = s->model().graph().value_name(y);
    REQUIRE(tern_set_num_threads(1) == TERN_OK);
    REQUIRE(tern_set_num_interop_threads(2) == TERN_OK);
    const Tensor first = run(*s, {"x"}, {&xin}, out)[0];
    // Rounds of 10 runs (up to 5: on a machine busy with other tests the helper thread may start
    // its branch late in every run of a round) until one has a run with overlapping nodes.
    int overlapping_runs = 0, total_runs = 0;
    std::set<uint32_t> threads;
    for (int round = 0; round < 5 && overlapping_runs == 0; ++round) {
      const size_t before = s->profiler()->event_count();
      for (int i = round == 0 ? 1 : 0; i < 10; ++i) {
        REQUIRE(bitwise_equal(run(*s, {"x"}, {&xin}, out)[0], first));
      }
      // Node events of one run that overlap in time and ran on different threads.
      const std::vector<ProfileEvent> events = s->profiler()->events();
      std::vector<const ProfileEvent*> run_events, nodes;
      for (size_t i = round == 0 ? 0 : before; i < events.size(); ++i) {
        (events[i].cat == "run" ? run_events : nodes).push_back(&events[i]);
      }
      REQUIRE(run_events.size() == 10);
      total_runs += 10;
      for (const ProfileEvent* r : run_events) {
        bool overlap = false;
        for (const ProfileEvent* a : nodes) {
          if (a->ts_us < r->ts_us || a->ts_us > r->ts_us + r->dur_us) continue;
          threads.insert(a->tid);
          for (const ProfileEvent* c : nodes) {
            overlap = overlap ||
                      (a->tid != c->tid && c->ts_us >= a->ts_us && c->ts_us < a->ts_us + a->dur_us);
          }
        }
        overlapping_runs += overlap;
      }
    }
    MESSAGE("runs with overlapping nodes on two threads: ", overlapping_runs, " of ", total_runs,
            "; threads ", threads.size());
    CHECK(threads.size() >= 2);
    // One run with overlapping nodes proves the branches ran concurrently (the serial runs below
    // have none); a busy machine may delay the helper past its branch on many runs.
    CHECK(overlapping_runs >= 1);
    // With one inter-op thread nothing overlaps: the check above can fail.
    REQUIRE(tern_set_num_interop_threads(1) == TERN_OK);
    const size_t before = s->profiler()->event_count();
    for (int i = 0; i < 3; ++i) run(*s, {"x"}, {&xin}, out);
    const std::vector<ProfileEvent> serial = s->profiler()->events();
    std::set<uint32_t> serial_threads;
    for (size_t i = before; i < serial.size(); ++i) {
      if (serial[i].cat == "node") serial_threads.insert(serial[i].tid);
    }
    CHECK(serial_threads.size() == 1);
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
    if (detected == "AVX512") CHECK(seen[0] == "math.avx512");
    if (detected == "AVX512" || detected == "AVX2") CHECK(seen[1] == "math.avx2");
    CHECK(seen[2] == "math.scalar");
    REQUIRE(tern_flag_set("cpu.max_capability", "DEFAULT") == TERN_OK);
    CHECK(std::string(tern_cpu_get_capability()) == "NO AVX");
#elif defined(__aarch64__)
    for (const std::string& name : seen) CHECK(name == "math.neon");
#endif
    for (const Tensor& r : results) CHECK(max_abs_diff(r, results[0]) < 1e-5f);
    CHECK(tern_flag_set("cpu.max_capability", "AVX9000") == TERN_ERR_INVALID_ARGUMENT);
  }
}
