#include "core/flags.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>

#include "core/cpu_set.h"
#include "core/threading.h"

namespace tern {

namespace {

constexpr int64_t kMaxThreads = 4096;
// Spinning a little after a region keeps back-to-back regions from paying a wake-up each (tens of
// microseconds); long enough for the next node to start, short enough that an idle process goes
// quiet at once.
constexpr int64_t kDefaultSpinUs = 200;

// A flag whose effect is a library's that this build lacks is kept (set and reported like any
// other) and its description says it has none.
#if defined(TERN_HAVE_ONEDNN)
#define TERN_ONEDNN_DOC(doc) doc
#else
#define TERN_ONEDNN_DOC(doc) "no effect in this build (it has no oneDNN)"
#endif
#if defined(TERN_HAVE_OPENMP)
#define TERN_OPENMP_DOC(with_openmp, without) with_openmp
#else
#define TERN_OPENMP_DOC(with_openmp, without) without
#endif

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::vector<FlagDef> make_defs() {
  using T = FlagType;
  using S = FlagScope;
  using P = PlanEffect;
  const int64_t cores = default_thread_choice().threads;
  std::vector<FlagDef> d = {
      {FlagId::kNumThreads,
       "num_threads",
       T::kInt,
       S::kSession,
       P::kKernels,
       "",
       cores,
       "MKL_NUM_THREADS, OMP_NUM_THREADS",
       "intra-op threads: the threads one node may use (oneDNN and OpenBLAS included); default "
       "= physical cores within the process's affinity mask, at most its cgroup CPU quota "
       "rounded up",
       {},
       1,
       kMaxThreads},
      {FlagId::kNumInteropThreads,
       "num_interop_threads",
       T::kInt,
       S::kSession,
       P::kNone,
       "",
       cores,
       "TERN_NUM_INTEROP_THREADS",
       "inter-op threads: how many independent nodes of a graph may run at the same time "
       "(when nodes run single-threaded and the branches carry enough work); default as "
       "num_threads",
       {},
       1,
       kMaxThreads},
      {FlagId::kCpuMaxCapability,
       "cpu.max_capability",
       T::kEnum,
       S::kGlobal,
       P::kKernels,
       "cpu",
       0,
       "TERN_CPU_CAPABILITY",
       "caps the vector ISA Tern's kernels dispatch to and oneDNN may use (oneDNN takes it once, "
       "at its first use in the process); auto = what the CPU has",
       {"auto", "AVX512", "AVX2", "NO AVX", "DEFAULT", "VSX", "Z VECTOR", "SVE256"}},
      {FlagId::kDeterministicAlgorithms, "deterministic_algorithms", T::kBool, S::kSession,
       P::kKernels, "", 0, "TERN_DETERMINISTIC_ALGORITHMS",
       "choose kernels whose results are bitwise identical across runs and thread counts "
       "(fixed work partitions; Conv by im2col + GEMM instead of oneDNN)"},
      {FlagId::kOnednnVerbose,
       "onednn.verbose",
       T::kEnum,
       S::kRun,
       P::kNone,
       "cpu",
       0,
       "TERN_ONEDNN_VERBOSE",
       TERN_ONEDNN_DOC(
           "oneDNN verbose output on stdout: OFF, ON (each primitive execution), ON_CREATION (also "
           "creation); oneDNN's switch is process-wide: a run's own level reaches other threads' "
           "runs while it lasts"),
       {"OFF", "ON", "ON_CREATION"}},
      {FlagId::kOptEinsumEnabled, "opt_einsum.enabled", T::kBool, S::kSession, P::kKernels, "", 1,
       "", "Einsum contracts operands in an optimised order (otherwise left to right)"},
      {FlagId::kOptEinsumStrategy,
       "opt_einsum.strategy",
       T::kEnum,
       S::kSession,
       P::kKernels,
       "",
       0,
       "TERN_OPT_EINSUM_STRATEGY",
       "Einsum path search: auto (optimal up to 4 operands, else greedy), greedy, optimal",
       {"auto", "greedy", "optimal"}},
      {FlagId::kSdpMath, "sdp.math_enabled", T::kBool, S::kRun, P::kKernels, "", 1, "",
       "scaled-dot-product attention may use the MATH kernel (materialises the score matrix)"},
      {FlagId::kSdpFlash, "sdp.flash_enabled", T::kBool, S::kRun, P::kKernels, "", 1, "",
       "scaled-dot-product attention may use the FLASH kernel (tiled online softmax)"},
      {FlagId::kSdpMemEfficient, "sdp.mem_efficient_enabled", T::kBool, S::kRun, P::kKernels,
       "cuda", 1, "",
       "scaled-dot-product attention may use the memory-efficient kernel (CUDA only)"},
      {FlagId::kSdpCudnn, "sdp.cudnn_enabled", T::kBool, S::kRun, P::kNone, "cuda", 1, "",
       "scaled-dot-product attention may use a cuDNN kernel (kept and reported; no effect: Tern's "
       "CUDA backend has no cuDNN attention kernel, so CUDNN is never chosen)"},
      {FlagId::kMhaFastpath, "mha.fastpath_enabled", T::kBool, S::kSession, P::kKernels, "", 1, "",
       "fuse MatMul-Softmax-MatMul attention subgraphs into one Attention kernel"},
      {FlagId::kCudaAllowTf32, "cuda.matmul.allow_tf32", T::kBool, S::kSession, P::kKernels, "cuda",
       0, "", "CUDA float32 matmuls may use TF32 tensor cores"},
      {FlagId::kCudaAllowFp16Reduced, "cuda.matmul.allow_fp16_reduced_precision_reduction",
       T::kBool, S::kSession, P::kKernels, "cuda", 1, "",
       "CUDA float16 matmuls may reduce in float16"},
      {FlagId::kCudaAllowBf16Reduced, "cuda.matmul.allow_bf16_reduced_precision_reduction",
       T::kBool, S::kSession, P::kKernels, "cuda", 1, "",
       "CUDA bfloat16 matmuls may reduce in bfloat16"},
      {FlagId::kCudaBlasLibrary,
       "cuda.preferred_blas_library",
       T::kEnum,
       S::kSession,
       P::kKernels,
       "cuda",
       0,
       "TERN_BLAS_PREFER_CUBLASLT",
       "BLAS library for CUDA matmuls",
       {"DEFAULT", "CUBLAS", "CUBLASLT"}},
      {FlagId::kCudaLinalgLibrary,
       "cuda.preferred_linalg_library",
       T::kEnum,
       S::kSession,
       P::kNone,
       "cuda",
       0,
       "TERN_LINALG_PREFER_CUSOLVER",
       "linear-algebra library for CUDA (kept and reported; no effect: Tern runs no CUDA "
       "linear-algebra op)",
       {"DEFAULT", "CUSOLVER", "MAGMA"}},
      {FlagId::kCudnnEnabled, "cudnn.enabled", T::kBool, S::kSession, P::kKernels, "cuda", 1, "",
       "CUDA convolutions may use cuDNN"},
      {FlagId::kCudnnAllowTf32, "cudnn.allow_tf32", T::kBool, S::kSession, P::kKernels, "cuda", 1,
       "", "cuDNN convolutions may use TF32 tensor cores"},
      {FlagId::kCudnnDeterministic, "cudnn.deterministic", T::kBool, S::kSession, P::kKernels,
       "cuda", 0, "", "cuDNN uses deterministic algorithms only"},
      {FlagId::kCudnnBenchmark, "cudnn.benchmark", T::kBool, S::kSession, P::kKernels, "cuda", 0,
       "", "cuDNN times candidate algorithms per shape and keeps the fastest"},
      {FlagId::kCudnnBenchmarkLimit,
       "cudnn.benchmark_limit",
       T::kInt,
       S::kSession,
       P::kKernels,
       "cuda",
       10,
       "",
       "how many cuDNN algorithms benchmark mode tries (0 = all)",
       {},
       0,
       1 << 20},
      {FlagId::kCpuConvMemoryFormat,
       "cpu.conv_memory_format",
       T::kEnum,
       S::kSession,
       P::kKernels,
       "cpu",
       0,
       "",
       TERN_ONEDNN_DOC(
           "activation layout of CPU convolution chains: blocked = channels in blocks of the "
           "vector width (oneDNN nChw16c / nChw8c), channels_last = NHWC (oneDNN's brgemm "
           "convolutions), auto = channels_last on AVX-512 when no convolution is grouped, and "
           "wherever a quarter of the convolutions have channel counts that are not multiples of 8 "
           "(they would stay plain blocked), else blocked"),
       {"auto", "blocked", "channels_last"}},
      {FlagId::kCudaGraphs, "cuda.graphs", T::kBool, S::kSession, P::kNone, "cuda", 0,
       "TERN_CUDA_GRAPHS",
       "CUDA runs capture each stretch of device kernels as a CUDA graph once per arena, from a "
       "plan's second run on, and replay it; a stretch whose capture fails runs eagerly "
       "(profiling turns it off)"},
      {FlagId::kVulkanAllowFp16, "vulkan.allow_fp16", T::kBool, S::kSession, P::kKernels, "vulkan",
       1, "",
       "float16 tensors may run on Vulkan's float16 shaders (devices with 16-bit storage); "
       "off: float16 nodes run on the next backend"},
      {FlagId::kVulkanFp16Arithmetic, "vulkan.allow_fp16_reduced_precision", T::kBool, S::kSession,
       P::kKernels, "vulkan", 0, "",
       "Vulkan float16 shaders may compute and accumulate in float16 (devices with "
       "shaderFloat16); off: float16 storage, float32 arithmetic"},
      {FlagId::kVulkanConvAlgorithm,
       "vulkan.conv_algorithm",
       T::kEnum,
       S::kSession,
       P::kKernels,
       "vulkan",
       0,
       "",
       "Vulkan convolutions: auto = im2col + tiled GEMM for ungrouped ones (1x1 stride-1 ones "
       "as a plain GEMM), direct for grouped ones; direct; gemm (ungrouped ones)",
       {"auto", "direct", "gemm"}},
      {FlagId::kCpuMatmulAllowBf16, "cpu.matmul.allow_bf16", T::kBool, S::kSession, P::kKernels,
       "cpu", 0, "TERN_CPU_MATMUL_ALLOW_BF16",
       TERN_ONEDNN_DOC(
           "float32 MatMul/Gemm with constant weights may compute in bfloat16 (inputs rounded to "
           "bf16, products accumulated in float32, float32 out) on CPUs with AVX-512 BF16 or AMX "
           "(oneDNN's bf16 kernels); no effect on other CPUs or under cpu.max_capability=AVX2")},
      {FlagId::kCpuConvAllowBf16, "cpu.conv.allow_bf16", T::kBool, S::kSession, P::kKernels, "cpu",
       0, "TERN_CPU_CONV_ALLOW_BF16",
       TERN_ONEDNN_DOC(
           "float32 Conv (and fused convolutions) with constant weights may compute in bfloat16 "
           "(inputs rounded to bf16, float32 accumulation and output) on CPUs with AVX-512 BF16 or "
           "AMX; no effect on other CPUs or under cpu.max_capability=AVX2")},
      {FlagId::kCpuAffinity, "cpu.affinity", T::kCpuList, S::kSession, P::kNone, "cpu", 0,
       "TERN_CPU_AFFINITY",
       "CPUs (a list like 0-3,8; none = no pinning) the run's intra-op threads are pinned to: "
       "the calling thread's OpenMP team, for the run (the calling thread gets its own mask back "
       "after it), and inter-op pool threads while they work for the run. It replaces the "
       "binding OMP_PROC_BIND/OMP_PLACES gave those threads, each getting the whole list; leave "
       "it none to keep OpenMP's placement. A num_threads left at its default becomes at most "
       "the list's physical cores"},
      {FlagId::kGraphOptimize, "graph.optimize", T::kBool, S::kSession, P::kKernels, "", 1,
       "TERN_GRAPH_OPTIMIZE",
       "the session rewrites the graph (fusions such as Conv+BatchNorm+Relu, attention, QDQ into "
       "int8 ops) before planning; off: it runs the nodes as imported, only constants computed "
       "once (slower; for inspecting intermediate values and for debugging a fusion). Read when "
       "the session is created"},
      {FlagId::kCpuThreadBudget,
       "cpu.thread_budget",
       T::kInt,
       S::kGlobal,
       P::kNone,
       "cpu",
       0,
       "TERN_THREAD_BUDGET",
       "the process-wide budget of busy intra-op threads, shared by all runs of all sessions: a "
       "run gets min(num_threads, what is free), at least its calling thread, so N application "
       "threads running sessions at once never multiply the cores Tern keeps busy; 0 = the "
       "logical CPUs of the process's affinity mask, at most its cgroup CPU quota rounded up",
       {},
       0,
       kMaxThreads},
      {FlagId::kCpuThreadBudgetWait, "cpu.thread_budget_wait", T::kBool, S::kRun, P::kNone, "cpu",
       0, "TERN_THREAD_BUDGET_WAIT",
       "a run that finds the whole cpu.thread_budget taken waits until a thread is free (its "
       "deadline and cancellation still apply) instead of running on its calling thread beside "
       "the others; off: it never waits"},
      {FlagId::kCpuAdaptiveThreads, "cpu.adaptive_threads", T::kBool, S::kSession, P::kNone, "cpu",
       1, "TERN_ADAPTIVE_THREADS",
       "a session's runs use fewer intra-op threads (halving down to 1) while other processes "
       "hold the CPUs their threads would need: at once when, over the last ~100 ms, the CPUs "
       "other processes left to this one (idle ones plus those it used itself, from /proc/stat) "
       "are fewer than the threads by over half a CPU; and while runs are measured faster so "
       "(per input shapes and thread count: slow runs try fewer, kept unless clearly slower). "
       "They try the larger counts again now and then (1 run in 16, backing off to 1 in 256 "
       "while the choice holds), not while those would not fit. Off: every run uses num_threads "
       "(as granted by cpu.thread_budget)"},
      {FlagId::kCpuSpinUs,
       "cpu.spin_us",
       T::kInt,
       S::kGlobal,
       P::kNone,
       "cpu",
       kDefaultSpinUs,
       "TERN_SPIN_US",
       "how long Tern's own idle pool threads spin waiting for work before they sleep, in "
       "microseconds: the inter-op pool's, and the intra-op pool's" TERN_OPENMP_DOC(
           " in builds without OpenMP. OpenMP's threads, which run Tern's kernels and oneDNN's in "
           "the standard build, spin as OMP_WAIT_POLICY / GOMP_SPINCOUNT said when the process "
           "started (unset: libgomp spins about 300,000 pauses, milliseconds); 0 also releases a "
           "run's OpenMP team when the run returns, so that nothing spins after it (the next run "
           "starts its workers again, tens of microseconds: ONNX Runtime's allow_spinning=0)",
           ""),
       {},
       0,
       1000000},
      {FlagId::kCpuRunHomes, "cpu.run_homes", T::kBool, S::kGlobal, P::kNone, "cpu", 1,
       "TERN_RUN_HOMES",
       TERN_OPENMP_DOC(
           "runs with several intra-op threads are planned and run on a few long-lived Tern "
           "threads (homes), the calling thread waiting, and CPU sessions are created there: "
           "libgomp gives every thread that starts a parallel region a team of its own, and once a "
           "process holds more team threads than CPUs (a second application thread running a "
           "session) every team sleeps at each region instead of spinning, 1.5x slower or worse. "
           "Homes keep one team per run at a time whatever the number of application threads; a "
           "hand-off costs microseconds. Off: runs execute on the calling thread. No effect in "
           "builds without OpenMP (Tern's own intra-op pool is shared already)",
           "no effect in this build: it has no OpenMP (Tern's own intra-op pool is shared "
           "already)")},
      {FlagId::kBlasVerbose, "blas.verbose", T::kBool, S::kRun, P::kNone, "cpu", 0,
       "TERN_BLAS_VERBOSE",
       "print one line on stdout per matrix product a CPU kernel runs (MatMul, FusedMatMul, "
       "Gemm, Conv by im2col, ConvTranspose, Einsum): op, library:kernel, shape, threads and "
       "milliseconds, like torch.backends.mkl.verbose; attention's products are not listed"},
      {FlagId::kSdpFp16Bf16ReductionMath, "sdp.allow_fp16_bf16_reduction_math", T::kBool, S::kRun,
       P::kKernels, "cpu", 0, "",
       "float16/bfloat16 attention on the CPU's MATH kernel rounds the scaled scores and the "
       "softmax probabilities to the input's precision (PyTorch's reduced-precision math path); "
       "off: float32 throughout, only the output rounded. Accuracy, not speed; no effect on FLASH "
       "or float32"},
      {FlagId::kCpuConvWinograd, "cpu.conv.winograd", T::kBool, S::kSession, P::kKernels, "cpu", 1,
       "TERN_CPU_CONV_WINOGRAD",
       TERN_ONEDNN_DOC(
           "float32 3x3 stride-1 Conv (and fused convolutions) with constant weights, outputs of "
           "12x12 or more and 16+ channels (or activations in 16-channel blocks) run oneDNN's "
           "Winograd kernels on CPUs with AVX-512 (2.25-4x fewer multiplications; transformed "
           "weights take 1.8-4x the memory; results differ from direct convolution by rounding); "
           "off: direct convolution only. No effect under cpu.max_capability=AVX2 (oneDNN 2.6 has "
           "no AVX2 Winograd kernel)")},
      {FlagId::kCpuFloat16InFloat32, "cpu.float16_in_float32", T::kBool, S::kSession, P::kNone,
       "cpu", 1, "TERN_CPU_FLOAT16_IN_FLOAT32",
       "a CPU-only session computes a float16 model in float32: float16 constants widened once "
       "at creation (a float32 copy per session beside the model's), a Cast at each float16 "
       "graph input and output, the "
       "model's own Casts to float16 kept, float32 kernels and layouts in between (as ONNX "
       "Runtime's CPU provider does); intermediate values are no longer rounded to float16 after "
       "each node. Off: each float16 node widens its inputs and rounds its outputs. Part of "
       "graph.optimize; read when the session is created (a session saved with "
       "tern_session_save_optimized keeps the float32 graph)"},
  };
  for (size_t i = 0; i < d.size(); ++i) {
    if (static_cast<size_t>(d[i].id) != i) std::abort();  // table order must match FlagId
  }
  return d;
}

// The initial value from the environment, if any; *note says which variable, or why it was
// ignored.
bool env_value(const FlagDef& def, int64_t* value, std::string* note) {
  auto read = [](const char* name) -> const char* {
    const char* v = std::getenv(name);
    return v && *v ? v : nullptr;
  };
  auto one_or_zero = [&](const char* name, int64_t on_value) {
    const char* v = read(name);
    if (!v) return false;
    std::string_view s(v);
    if (s == "1" || iequals(s, "true") || iequals(s, "on")) {
      *value = on_value;
    } else if (s == "0" || iequals(s, "false") || iequals(s, "off")) {
      *value = 0;
    } else {
      *note = str_cat(name, "='", v, "' ignored (use 1 or 0)");
      return false;
    }
    *note = name;
    return true;
  };
  switch (def.id) {
    case FlagId::kNumThreads:
      for (const char* name : {"MKL_NUM_THREADS", "OMP_NUM_THREADS"}) {
        const char* v = read(name);
        if (!v) continue;
        auto parsed = parse_flag_value(def, v);
        if (parsed) {
          *value = *parsed;
          *note = name;
          return true;
        }
        *note += str_cat(note->empty() ? "" : "; ", name, "='", v, "' ignored (not 1..4096)");
      }
      return false;
    case FlagId::kCudaBlasLibrary:
      return one_or_zero("TERN_BLAS_PREFER_CUBLASLT", 2);
    case FlagId::kCudaLinalgLibrary:
      return one_or_zero("TERN_LINALG_PREFER_CUSOLVER", 1);
    default:
      break;
  }
  if (!*def.env) return false;
  const char* v = read(def.env);
  if (!v) return false;
  auto parsed = parse_flag_value(def, v);
  if (!parsed) {
    *note = str_cat(def.env, "='", v, "' ignored: ", parsed.status().message());
    return false;
  }
  *value = *parsed;
  *note = def.env;
  return true;
}

}  // namespace

const char* flag_type_name(FlagType t) {
  switch (t) {
    case FlagType::kBool:
      return "bool";
    case FlagType::kInt:
      return "int";
    case FlagType::kEnum:
      return "enum";
    case FlagType::kCpuList:
      return "cpulist";
  }
  return "?";
}

const char* flag_source_name(FlagSource s) {
  static const char* names[] = {"default", "environment", "api", "session", "run"};
  return names[static_cast<int>(s)];
}

const char* flag_scope_name(FlagScope s) {
  static const char* names[] = {"global", "session", "run"};
  return names[static_cast<int>(s)];
}

Expected<int64_t> parse_flag_value(const FlagDef& def, std::string_view text) {
  switch (def.type) {
    case FlagType::kBool:
      for (const char* t : {"1", "true", "on", "yes"}) {
        if (iequals(text, t)) return int64_t{1};
      }
      for (const char* f : {"0", "false", "off", "no"}) {
        if (iequals(text, f)) return int64_t{0};
      }
      return invalid_argument("flag '", def.name,
                              "' is a bool: use true or false (or 1/0, on/off), got '",
                              shorten(text), "'");
    case FlagType::kInt: {
      std::string s(text);
      char* end = nullptr;
      long long v = s.empty() ? 0 : std::strtoll(s.c_str(), &end, 10);
      if (s.empty() || *end != '\0' || v < def.min || v > def.max) {
        return invalid_argument("flag '", def.name, "' needs an integer in ", def.min, "..",
                                def.max, ", got '", shorten(text), "'");
      }
      return static_cast<int64_t>(v);
    }
    case FlagType::kEnum: {
      std::string allowed;
      for (size_t i = 0; i < def.choices.size(); ++i) {
        if (iequals(text, def.choices[i])) return static_cast<int64_t>(i);
        allowed += str_cat(i ? ", " : "", def.choices[i]);
      }
      return invalid_argument("flag '", def.name, "' must be one of ", allowed, "; got '",
                              shorten(text), "'");
    }
    case FlagType::kCpuList: {
      auto cpus = parse_cpu_list(text, configured_cpu_count());
      if (!cpus) return cpus.status().with_prefix(str_cat("flag '", def.name, "'"));
      return intern_cpu_list(*cpus);
    }
  }
  return internal_error("bad flag type");
}

std::string flag_value_text(const FlagDef& def, int64_t value) {
  switch (def.type) {
    case FlagType::kBool:
      return value ? "true" : "false";
    case FlagType::kInt:
      return std::to_string(value);
    case FlagType::kEnum:
      return value >= 0 && static_cast<size_t>(value) < def.choices.size()
                 ? def.choices[static_cast<size_t>(value)]
                 : "?";
    case FlagType::kCpuList:
      return cpu_list_text(interned_cpu_list(value));
  }
  return "?";
}

Status FlagOverrides::set(std::string_view name, std::string_view text, FlagScope level) {
  const FlagDef* def = Flags::find(name);
  if (!def)
    return invalid_argument("unknown flag '", shorten(name), "' (tern info --flags lists them)");
  if (static_cast<int>(def->scope) < static_cast<int>(level)) {
    return invalid_argument("flag '", shorten(name), "' has scope ", flag_scope_name(def->scope),
                            " and cannot be set per ", flag_scope_name(level),
                            def->scope == FlagScope::kGlobal ? " (set it with tern_flag_set)" : "");
  }
  TERN_ASSIGN_OR_RETURN(int64_t v, parse_flag_value(*def, text));
  set(def->id, v);
  return Status::ok();
}

struct Flags::Impl {
  mutable std::mutex mu;
  std::array<int64_t, kFlagCount> value{};
  std::array<FlagSource, kFlagCount> source{};
  std::array<std::string, kFlagCount> env_note;  // written once, in the constructor
};

Flags::Flags() : impl_(new Impl()) {
  for (const FlagDef& d : defs()) {
    size_t i = static_cast<size_t>(d.id);
    impl_->value[i] = d.default_value;
    impl_->source[i] = FlagSource::kDefault;
    int64_t v = 0;
    if (env_value(d, &v, &impl_->env_note[i])) {
      impl_->value[i] = v;
      impl_->source[i] = FlagSource::kEnvironment;
    }
  }
}

Flags& Flags::global() {
  static Flags* flags = new Flags();  // never destroyed: runs may read it during exit
  return *flags;
}

const std::vector<FlagDef>& Flags::defs() {
  static const std::vector<FlagDef> d = make_defs();
  return d;
}

const FlagDef* Flags::find(std::string_view name) {
  for (const FlagDef& d : defs()) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

int64_t Flags::get(FlagId id) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->value[static_cast<size_t>(id)];
}

FlagSource Flags::source(FlagId id) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->source[static_cast<size_t>(id)];
}

std::string Flags::env_note(FlagId id) const {
  return impl_->env_note[static_cast<size_t>(id)];
}

Status Flags::set(FlagId id, int64_t value) {
  const FlagDef& d = def(id);
  bool ok = d.type == FlagType::kBool  ? (value == 0 || value == 1)
            : d.type == FlagType::kInt ? (value >= d.min && value <= d.max)
            : d.type == FlagType::kCpuList
                ? is_interned_cpu_list(value)
                : (value >= 0 && static_cast<size_t>(value) < d.choices.size());
  if (!ok) {
    return invalid_argument("flag '", d.name, "': value ", value, " is out of range",
                            d.type == FlagType::kInt ? str_cat(" ", d.min, "..", d.max) : "");
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->value[static_cast<size_t>(id)] = value;
  impl_->source[static_cast<size_t>(id)] = FlagSource::kApi;
  return Status::ok();
}

Status Flags::set_text(std::string_view name, std::string_view text) {
  const FlagDef* d = find(name);
  if (!d)
    return invalid_argument("unknown flag '", shorten(name), "' (tern info --flags lists them)");
  TERN_ASSIGN_OR_RETURN(int64_t v, parse_flag_value(*d, text));
  return set(d->id, v);
}

FlagValues Flags::resolve(const FlagOverrides* session, const FlagOverrides* run) const {
  FlagValues out;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    out.value = impl_->value;
    out.source = impl_->source;
  }
  for (size_t i = 0; i < kFlagCount; ++i) {
    FlagId id = static_cast<FlagId>(i);
    if (session && session->has(id)) {
      out.value[i] = session->get(id);
      out.source[i] = FlagSource::kSession;
    }
    if (run && run->has(id)) {
      out.value[i] = run->get(id);
      out.source[i] = FlagSource::kRun;
    }
  }
  // Pinned to a CPU list with num_threads left at its default: no more threads than the list's
  // physical cores (a team larger than its CPUs waits out OpenMP's spinning barriers: 2 threads
  // on 1 CPU made a 0.02 ms run take 16 ms).
  const size_t threads = static_cast<size_t>(FlagId::kNumThreads);
  const int64_t cpus = out.value[static_cast<size_t>(FlagId::kCpuAffinity)];
  if (cpus != 0 && out.source[threads] == FlagSource::kDefault) {
    out.value[threads] = std::min<int64_t>(out.value[threads], physical_cores_in_list(cpus));
  }
  return out;
}

std::vector<int64_t> Flags::plan_key(const FlagValues& values,
                                     const std::vector<std::string>& kernel_backends) {
  std::vector<int64_t> key;
  for (const FlagDef& d : defs()) {
    if (d.plan != PlanEffect::kKernels) continue;
    if (*d.backend && std::find(kernel_backends.begin(), kernel_backends.end(), d.backend) ==
                          kernel_backends.end()) {
      continue;
    }
    key.push_back(values[d.id]);
  }
  return key;
}

}  // namespace tern
