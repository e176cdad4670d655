// The backends API (DESIGN §3 "threads" to "generic"): every function reads or writes the one
// flags registry (core/flags.h).
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "api/api_internal.h"
#include "backends/registry.h"
#include "core/built_dtypes.h"
#include "core/threading.h"
#include "serialization/model_io.h"

#ifndef TERN_BUILD_CONFIG
#define TERN_BUILD_CONFIG "unknown"
#endif

using tern::FlagId;
using tern::Flags;
using tern::Status;

namespace {

// Flags::global() allocates its table on first use: guarded like everything else.
int64_t get_value(FlagId id) {
  return tern::api::value_guard([id] { return Flags::global().get(id); }, int64_t{0});
}
int get_bool(FlagId id) {
  return tern::api::value_guard([id] { return Flags::global().on(id) ? 1 : 0; }, 0);
}
void set_bool(FlagId id, int on) {
  // 0/1 is always in range.
  tern::api::value_guard([id, on] { return Flags::global().set(id, on ? 1 : 0).is_ok(); }, false);
}

// Copies text into a caller buffer, or says how much is needed.
Status copy_out(const std::string& text, char* buf, size_t len) {
  TERN_API_REQUIRE(buf || len == 0, "buf is NULL with len = ", len);
  if (text.size() + 1 > len) {
    return tern::invalid_argument("buffer of ", len, " bytes is too small: ", text.size() + 1,
                                  " needed");
  }
  std::memcpy(buf, text.c_str(), text.size() + 1);
  return Status::ok();
}

std::string source_text(FlagId id) {
  Flags& f = Flags::global();
  std::string s = tern::flag_source_name(f.source(id));
  // A default thread count says what it was derived from.
  if (f.source(id) == tern::FlagSource::kDefault &&
      (id == FlagId::kNumThreads || id == FlagId::kNumInteropThreads)) {
    s += tern::str_cat(": ", tern::default_thread_choice().reason);
  }
  std::string note = f.env_note(id);
  if (f.source(id) == tern::FlagSource::kEnvironment) return s + " " + note;
  if (!note.empty()) s += " (" + note + ")";
  return s;
}

const tern::FlagId kSdpIds[] = {FlagId::kSdpMath, FlagId::kSdpFlash, FlagId::kSdpMemEfficient,
                                FlagId::kSdpCudnn};

}  // namespace

extern "C" {

/* ---- threads ---- */

tern_status tern_set_num_threads(int n) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(n >= 1 && n <= 4096, "num_threads must be 1..4096, got ", n);
    return Flags::global().set(FlagId::kNumThreads, n);
  });
}
int tern_get_num_threads(void) {
  return static_cast<int>(get_value(FlagId::kNumThreads));
}
tern_status tern_set_num_interop_threads(int n) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(n >= 1 && n <= 4096, "num_interop_threads must be 1..4096, got ", n);
    return Flags::global().set(FlagId::kNumInteropThreads, n);
  });
}
int tern_get_num_interop_threads(void) {
  return static_cast<int>(get_value(FlagId::kNumInteropThreads));
}

const char* tern_parallel_info(void) {
  thread_local std::string text;
  return tern::api::value_guard(
      [] {
        text = tern::str_cat("Tern ", TERN_VERSION_STRING, " parallel info\n");
        for (const tern::backends::Record* r : tern::backends::records()) {
          text += r->threads_report(tern_get_num_threads(), source_text(FlagId::kNumThreads),
                                    tern_get_num_interop_threads(),
                                    source_text(FlagId::kNumInteropThreads));
        }
        return text.c_str();
      },
      "(parallel info unavailable: out of memory)\n");
}

const char* tern_config_show(void) {
  thread_local std::string s;
  return tern::api::value_guard(
      [] {
        s = tern::str_cat("Tern ", TERN_VERSION_STRING, " (ABI ", tern_abi_version(),
                          ", .tern format ", tern_format_version(), ")\n");
        s += tern::str_cat("  build: ", TERN_BUILD_CONFIG, "\n");
        const std::string dtypes = tern::built_dtypes_text();
        if (!dtypes.empty()) {
          s += tern::str_cat("  element types: ", dtypes, " (the others left out of this ",
                             tern::kBuiltDTypesBuild, " build: TERN_SELECTED_DTYPES)\n");
        }
        const tern::backends::Record* cpu = tern::backends::record("cpu");
        s += tern::str_cat("  CPU capability: ", cpu->capability(), " (cap cpu.max_capability=",
                           Flags::global().text(FlagId::kCpuMaxCapability), " [",
                           source_text(FlagId::kCpuMaxCapability), "])\n");
        s += tern::str_cat("  threads: intra-op ", tern_get_num_threads(), " [",
                           source_text(FlagId::kNumThreads), "], inter-op ",
                           tern_get_num_interop_threads(), " [",
                           source_text(FlagId::kNumInteropThreads), "]\n");
        for (const tern::backends::Record* r : tern::backends::records()) {
          s += tern::str_cat("  ", r->name(), ": ", r->report(), "\n");
        }
        s += "  torch.backends counterparts:";
        for (const char* name :
             {"mkldnn", "openblas", "openmp", "opt_einsum", "mkl", "nnpack", "cusparselt",
              "flash_attention", "cuda", "cudnn", "mps", "vulkan"}) {
          const char* why = tern_backend_unavailable_reason(name);
          s += tern::str_cat("\n    ", name, ": ",
                             !why || *why ? tern::str_cat("unavailable (", why ? why : "?", ")")
                                          : std::string("available"));
        }
        s += "\n";
        s += "  backends:";
        for (const tern::backends::Record* r : tern::backends::records()) {
          s += tern::str_cat(" ", r->name(), "(built=", r->is_built() ? 1 : 0,
                             ", available=", r->is_available() ? 1 : 0, ")");
        }
        return (s += "\n").c_str();
      },
      "(configuration unavailable: out of memory)\n");
}

/* ---- cpu ---- */

const char* tern_cpu_get_capability(void) {
  TERN_TRY {
    return tern::backends::record("cpu")->capability();
  }
  TERN_CATCH_ALL {
    return "DEFAULT";
  }
}

/* ---- cuda ---- */

int tern_cuda_matmul_get_allow_tf32(void) {
  return get_bool(FlagId::kCudaAllowTf32);
}
void tern_cuda_matmul_set_allow_tf32(int on) {
  set_bool(FlagId::kCudaAllowTf32, on);
}
int tern_cuda_matmul_get_allow_fp16_reduced_precision_reduction(void) {
  return get_bool(FlagId::kCudaAllowFp16Reduced);
}
void tern_cuda_matmul_set_allow_fp16_reduced_precision_reduction(int on) {
  set_bool(FlagId::kCudaAllowFp16Reduced, on);
}
int tern_cuda_matmul_get_allow_bf16_reduced_precision_reduction(void) {
  return get_bool(FlagId::kCudaAllowBf16Reduced);
}
void tern_cuda_matmul_set_allow_bf16_reduced_precision_reduction(int on) {
  set_bool(FlagId::kCudaAllowBf16Reduced, on);
}
tern_blas_library tern_cuda_get_preferred_blas_library(void) {
  return static_cast<tern_blas_library>(get_value(FlagId::kCudaBlasLibrary));
}
tern_status tern_cuda_set_preferred_blas_library(tern_blas_library lib) {
  return tern::api::guard([&]() -> Status {
    int v = static_cast<int>(lib);
    TERN_API_REQUIRE(v >= 0 && v <= 2, "blas library ", v,
                     " is not DEFAULT (0), CUBLAS (1) or CUBLASLT (2)");
    return Flags::global().set(FlagId::kCudaBlasLibrary, v);
  });
}
tern_linalg_library tern_cuda_get_preferred_linalg_library(void) {
  return static_cast<tern_linalg_library>(get_value(FlagId::kCudaLinalgLibrary));
}
tern_status tern_cuda_set_preferred_linalg_library(tern_linalg_library lib) {
  return tern::api::guard([&]() -> Status {
    int v = static_cast<int>(lib);
    TERN_API_REQUIRE(v >= 0 && v <= 2, "linalg library ", v,
                     " is not DEFAULT (0), CUSOLVER (1) or MAGMA (2)");
    return Flags::global().set(FlagId::kCudaLinalgLibrary, v);
  });
}

/* ---- sdp ---- */

int tern_sdp_enabled(tern_sdp_backend b) {
  int i = static_cast<int>(b);
  return i >= 0 && i < 4 ? get_bool(kSdpIds[i]) : 0;
}
tern_status tern_sdp_enable(tern_sdp_backend b, int on) {
  return tern::api::guard([&]() -> Status {
    int i = static_cast<int>(b);
    TERN_API_REQUIRE(i >= 0 && i < 4, "sdp backend ", i,
                     " is not MATH (0), FLASH (1), MEM_EFFICIENT (2) or CUDNN (3)");
    return Flags::global().set(kSdpIds[i], on ? 1 : 0);
  });
}
}  // extern "C"

namespace {

// Fields added later go after dropout_p, and the code reads them only when struct_size covers
// them.
static_assert(sizeof(tern_sdp_params) - TERN_SDP_PARAMS_SIZE_V1 < alignof(tern_sdp_params),
              "tern_sdp_params grew: read the new fields only when struct_size covers them");

// A newer caller's struct is longer: its fields past the ones this library knows must be zero
// (their defaults), or the answer could ignore what the caller asked.
bool tail_is_zero(const tern_sdp_params* p, size_t size) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(p);
  for (size_t i = sizeof(tern_sdp_params); i < size; ++i) {
    if (bytes[i] != 0) return false;
  }
  return true;
}

}  // namespace

extern "C" {

int tern_sdp_can_use(tern_sdp_backend b, const tern_sdp_params* p, char* why, size_t why_len) {
  std::string reason;
  const int i = static_cast<int>(b);
  TERN_TRY {
    if (i < 0 || i > 3) {
      reason = tern::str_cat("unknown sdp backend ", i);
    } else if (!p) {
      reason = "params is NULL";
    } else if (p->struct_size < TERN_SDP_PARAMS_SIZE_V1) {
      reason = tern::str_cat("params.struct_size is ", p->struct_size, ", expected at least ",
                             TERN_SDP_PARAMS_SIZE_V1, " (the first version's size)");
    } else if (p->struct_size > 4096) {
      reason = tern::str_cat("params.struct_size is ", p->struct_size,
                             ", not a size of tern_sdp_params");
    } else if (!tail_is_zero(p, p->struct_size)) {
      reason =
          tern::str_cat("params.struct_size is ", p->struct_size, " and sets fields past the ",
                        sizeof(tern_sdp_params), " bytes this library knows (a newer header's)");
    } else if (!(p->dropout_p >= 0 && p->dropout_p < 1)) {
      reason = tern::str_cat("params.dropout_p is ", p->dropout_p, "; it must be in [0, 1)");
    } else if ((p->is_causal != 0 && p->is_causal != 1) || (p->has_mask != 0 && p->has_mask != 1)) {
      reason = "params.is_causal and params.has_mask must be 0 or 1";
    } else {
      if (!tern_sdp_enabled(b)) {
        reason = tern::str_cat(tern::backends::sdp_name(i), " is disabled (",
                               tern::Flags::def(kSdpIds[i]).name, " = false)");
      }
      tern::ops::SdpCase c;
      c.batch = p->batch;
      c.heads = p->num_heads;
      c.seq_q = p->seq_len_q;
      c.seq_kv = p->seq_len_kv;
      c.head_dim = p->head_dim;
      c.dtype = static_cast<tern::DType>(p->dtype);
      c.causal = p->is_causal != 0;
      c.mask = p->has_mask != 0;
      c.dropout = p->dropout_p;
      // The answer is the kernels' of the first available device backend that has attention
      // kernels (where a session listing it would run attention), else the CPU's.
      const tern::backends::Record* r = tern::backends::record("cpu");
      for (const tern::backends::Record* d : tern::backends::records()) {
        if (d != r && d->has_attention() && d->is_available()) {
          r = d;
          break;
        }
      }
      std::string refusal = r->sdp_refusal(i, c);
      if (!refusal.empty() && i >= 2 && r == tern::backends::record("cpu")) {
        // MEM_EFFICIENT and CUDNN are CUDA kernels: say why there is none.
        const tern::backends::Record* cuda = tern::backends::record("cuda");
        refusal = cuda->is_built() ? tern::str_cat(tern::backends::sdp_name(i),
                                                   " runs on CUDA only and there is no CUDA device")
                                   : tern::str_cat(tern::backends::sdp_name(i),
                                                   " needs the CUDA backend, which is not built");
      }
      if (!refusal.empty()) reason += (reason.empty() ? "" : "; ") + refusal;
    }
  }
  TERN_CATCH_ALL {
    reason = "internal error while checking";
  }
  if (why && why_len) {
    size_t n = std::min(reason.size(), why_len - 1);
    std::memcpy(why, reason.data(), n);
    why[n] = '\0';
  }
  return reason.empty() ? 1 : 0;
}

/* ---- cudnn ---- */

int tern_cudnn_is_available(void) {
  // cuDNN is linked into the CUDA module; it is usable where a CUDA device is.
  TERN_TRY {
    const tern::backends::Record* cuda = tern::backends::record("cuda");
    return cuda->library_version("cudnn") > 0 && cuda->is_available() ? 1 : 0;
  }
  TERN_CATCH_ALL {
    return 0;
  }
}
int64_t tern_cudnn_version(void) {
  TERN_TRY {
    return tern::backends::record("cuda")->library_version("cudnn");
  }
  TERN_CATCH_ALL {
    return -1;
  }
}
int tern_cudnn_get_enabled(void) {
  return get_bool(FlagId::kCudnnEnabled);
}
void tern_cudnn_set_enabled(int on) {
  set_bool(FlagId::kCudnnEnabled, on);
}
int tern_cudnn_get_allow_tf32(void) {
  return get_bool(FlagId::kCudnnAllowTf32);
}
void tern_cudnn_set_allow_tf32(int on) {
  set_bool(FlagId::kCudnnAllowTf32, on);
}
int tern_cudnn_get_deterministic(void) {
  return get_bool(FlagId::kCudnnDeterministic);
}
void tern_cudnn_set_deterministic(int on) {
  set_bool(FlagId::kCudnnDeterministic, on);
}
int tern_cudnn_get_benchmark(void) {
  return get_bool(FlagId::kCudnnBenchmark);
}
void tern_cudnn_set_benchmark(int on) {
  set_bool(FlagId::kCudnnBenchmark, on);
}
int tern_cudnn_get_benchmark_limit(void) {
  return static_cast<int>(get_value(FlagId::kCudnnBenchmarkLimit));
}
tern_status tern_cudnn_set_benchmark_limit(int limit) {
  return tern::api::guard(
      [&]() -> Status { return Flags::global().set(FlagId::kCudnnBenchmarkLimit, limit); });
}

/* ---- mha / onednn / opt_einsum / determinism ---- */

int tern_mha_get_fastpath_enabled(void) {
  return get_bool(FlagId::kMhaFastpath);
}
void tern_mha_set_fastpath_enabled(int on) {
  set_bool(FlagId::kMhaFastpath, on);
}

tern_status tern_onednn_set_verbose(tern_verbose_level level) {
  return tern::api::guard([&]() -> Status {
    int v = static_cast<int>(level);
    TERN_API_REQUIRE(v >= 0 && v <= 2, "verbose level ", v,
                     " is not OFF (0), ON (1) or ON_CREATION (2)");
    if (tern::backends::record("cpu")->library_version("onednn") < 0) {
      return Status(tern::Code::kBackendUnavailable, "oneDNN is not built into this library");
    }
    return Flags::global().set(FlagId::kOnednnVerbose, v);
  });
}

tern_status tern_blas_set_verbose(tern_verbose_level level) {
  return tern::api::guard([&]() -> Status {
    int v = static_cast<int>(level);
    TERN_API_REQUIRE(v == 0 || v == 1, "BLAS verbose level ", v,
                     " is not OFF (0) or ON (1) (GEMM calls have no creation step for "
                     "ON_CREATION)");
    return Flags::global().set(FlagId::kBlasVerbose, v);
  });
}

void tern_sdp_allow_fp16_bf16_reduction_math(int on) {
  set_bool(FlagId::kSdpFp16Bf16ReductionMath, on);
}
int tern_sdp_fp16_bf16_reduction_math_allowed(void) {
  return get_bool(FlagId::kSdpFp16Bf16ReductionMath);
}

int tern_opt_einsum_is_available(void) {
  return 1;  // the path search is Tern's own (ops/einsum.cpp), in every build
}
int tern_opt_einsum_get_enabled(void) {
  return get_bool(FlagId::kOptEinsumEnabled);
}
void tern_opt_einsum_set_enabled(int on) {
  set_bool(FlagId::kOptEinsumEnabled, on);
}
const char* tern_opt_einsum_get_strategy(void) {
  return tern::api::value_guard(
      [] {
        const tern::FlagDef& d = Flags::def(FlagId::kOptEinsumStrategy);
        return d.choices[static_cast<size_t>(get_value(FlagId::kOptEinsumStrategy))];
      },
      "auto");
}
tern_status tern_opt_einsum_set_strategy(const char* s) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(s, "strategy is NULL");
    return Flags::global().set_text("opt_einsum.strategy", s);
  });
}

tern_status tern_use_deterministic_algorithms(int on) {
  return tern::api::guard([&]() -> Status {
    return Flags::global().set(FlagId::kDeterministicAlgorithms, on ? 1 : 0);
  });
}
int tern_are_deterministic_algorithms_enabled(void) {
  return get_bool(FlagId::kDeterministicAlgorithms);
}

/* ---- generic ---- */

size_t tern_flag_count(void) {
  return tern::kFlagCount;
}

tern_status tern_flag_info(size_t i, const char** name, const char** type, const char** doc) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(i < tern::kFlagCount, "flag index ", i,
                     " >= tern_flag_count() = ", tern::kFlagCount);
    const tern::FlagDef& d = Flags::defs()[i];
    if (name) *name = d.name;
    if (type) *type = tern::flag_type_name(d.type);
    if (doc) *doc = d.doc;
    return Status::ok();
  });
}

tern_status tern_flag_get(const char* name, char* buf, size_t len) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(name, "name is NULL");
    const tern::FlagDef* d = Flags::find(name);
    TERN_API_REQUIRE(d, "unknown flag '", tern::shorten(name), "' (tern info --flags lists them)");
    return copy_out(Flags::global().text(d->id), buf, len);
  });
}

tern_status tern_flag_set(const char* name, const char* value) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(name && value, "name or value is NULL");
    return Flags::global().set_text(name, value);
  });
}

tern_status tern_flag_describe(const char* name, const char** source, const char** scope,
                               const char** default_value, const char** env_var) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(name, "name is NULL");
    const tern::FlagDef* d = Flags::find(name);
    TERN_API_REQUIRE(d, "unknown flag '", tern::shorten(name), "' (tern info --flags lists them)");
    thread_local std::string def_text;
    def_text = tern::flag_value_text(*d, d->default_value);
    if (source) *source = tern::flag_source_name(Flags::global().source(d->id));
    if (scope) *scope = tern::flag_scope_name(d->scope);
    if (default_value) *default_value = def_text.c_str();
    if (env_var) *env_var = d->env;
    return Status::ok();
  });
}

tern_status tern_session_flag_get(const tern_session* s, const char* name, char* buf, size_t len,
                                  const char** source) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(s, "session is NULL");
    TERN_API_REQUIRE(name, "name is NULL");
    const tern::FlagDef* d = Flags::find(name);
    TERN_API_REQUIRE(d, "unknown flag '", tern::shorten(name), "' (tern info --flags lists them)");
    const tern::FlagValues v = s->s->flags();
    TERN_RETURN_IF_ERROR(copy_out(tern::flag_value_text(*d, v[d->id]), buf, len));
    if (source) *source = tern::flag_source_name(v.source[static_cast<size_t>(d->id)]);
    return Status::ok();
  });
}

}  // extern "C"
