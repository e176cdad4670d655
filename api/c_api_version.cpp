// Version, errors and build/machine queries.
#include <string>
#include <string_view>

#include "api/api_internal.h"
#include "backends/registry.h"
#include "core/threading.h"
#include "serialization/model_io.h"

#ifndef TERN_BUILD_CONFIG
#define TERN_BUILD_CONFIG "unknown"
#endif

namespace tern::api {

static thread_local std::string g_last_error;

tern_status fail(const Status& s) {
  g_last_error = s.message();
  return static_cast<tern_status>(s.code());
}

}  // namespace tern::api

namespace {

// A backend record's answer; 0 when anything fails (no exception crosses the C boundary).
template <class Fn>
int ask(const char* kind, Fn fn) {
  TERN_TRY {
    const tern::backends::Record* r = tern::backends::record(kind);
    return r ? fn(*r) : 0;
  }
  TERN_CATCH_ALL {
    return 0;
  }
}

// Whether the CPU backend was built with a library ("onednn", "openblas", "openmp").
int library_built(const char* lib) {
  return ask("cpu",
             [&](const tern::backends::Record& r) { return r.library_version(lib) >= 0 ? 1 : 0; });
}

constexpr const char* kNoMkl =
    "not built: Tern's CPU GEMMs run on OpenBLAS (or Tern's own GEMM) and oneDNN; MKL is not "
    "linked";
constexpr const char* kNoNnpack =
    "not built: Tern's CPU convolutions run on oneDNN and Tern's own kernels; NNPACK is not "
    "linked";
constexpr const char* kNoCusparselt =
    "not built: no kernel of Tern uses structured-sparse matmuls, so the CUDA module does not "
    "link cuSPARSELt";

// Why a device backend cannot be used: "" when it can, else its record's report.
std::string backend_reason(const char* kind) {
  const tern::backends::Record* r = tern::backends::record(kind);
  if (!r) return "unknown backend";
  if (r->is_available()) return "";
  return r->is_built() ? tern::str_cat("no device: ", r->report())
                       : tern::str_cat("not built: ", r->report());
}

std::string library_reason(const char* lib, const char* label) {
  return library_built(lib)
             ? ""
             : tern::str_cat("not built: this library was configured without ", label);
}

// tern_backend_unavailable_reason's answer; throws nothing but std::bad_alloc.
bool unavailable_reason(std::string_view name, std::string* out) {
  if (name == "mkl") {
    *out = kNoMkl;
  } else if (name == "nnpack") {
    *out = kNoNnpack;
  } else if (name == "cusparselt") {
    *out = kNoCusparselt;
  } else if (name == "opt_einsum" || name == "flash_attention") {
    out->clear();  // Tern's own path search; the CPU's FLASH kernel is always built
  } else if (name == "mkldnn" || name == "onednn") {
    *out = library_reason("onednn", "oneDNN");
  } else if (name == "openblas") {
    *out = library_reason("openblas", "OpenBLAS");
  } else if (name == "openmp") {
    *out = library_reason("openmp", "OpenMP");
  } else if (name == "cuda" || name == "mps" || name == "vulkan") {
    *out = backend_reason(std::string(name).c_str());
  } else if (name == "cudnn") {
    const tern::backends::Record* cuda = tern::backends::record("cuda");
    if (cuda->library_version("cudnn") < 0) {
      *out = tern::str_cat("the CUDA module, which links cuDNN, is not built or cannot be loaded (",
                           cuda->report(), ")");
    } else {
      *out = backend_reason("cuda");
    }
  } else {
    return false;
  }
  return true;
}

}  // namespace

extern "C" {

int tern_mkl_is_available(void) {
  return 0;  // kNoMkl
}
int tern_nnpack_is_available(void) {
  return 0;  // kNoNnpack
}
int tern_cusparselt_is_available(void) {
  return 0;  // kNoCusparselt
}
int tern_is_flash_attention_available(void) {
  // The CPU backend's FLASH kernel (backends/cpu/kernels/attention.cpp) is in every build.
  return 1;
}

const char* tern_backend_unavailable_reason(const char* name) {
  thread_local std::string text;
  TERN_TRY {
    if (!name || !unavailable_reason(name, &text)) return nullptr;
    return text.c_str();
  }
  TERN_CATCH_ALL {
    return nullptr;
  }
}

const char* tern_version(void) {
  return TERN_VERSION_STRING;
}
uint32_t tern_abi_version(void) {
  return TERN_ABI_VERSION;
}
uint32_t tern_format_version(void) {
  return tern::serialization::kFormatVersion;
}

const char* tern_status_name(tern_status s) {
  if (static_cast<int>(s) < 0 ||
      static_cast<int>(s) > static_cast<int>(TERN_ERR_DEADLINE_EXCEEDED)) {
    return "TERN_UNKNOWN_STATUS";
  }
  return tern::code_name(static_cast<tern::Code>(s));
}

const char* tern_last_error(void) {
  return tern::api::g_last_error.c_str();
}

int tern_onednn_is_available(void) {
  return library_built("onednn");
}
int tern_openblas_is_available(void) {
  return library_built("openblas");
}
int tern_openmp_is_available(void) {
  return library_built("openmp");
}
int tern_cuda_is_built(void) {
  return ask("cuda", [](const tern::backends::Record& r) { return r.is_built() ? 1 : 0; });
}
int tern_cuda_is_available(void) {
  return ask("cuda", [](const tern::backends::Record& r) { return r.is_available() ? 1 : 0; });
}
int tern_cuda_device_count(void) {
  return ask("cuda", [](const tern::backends::Record& r) { return r.device_count(); });
}
int tern_vulkan_is_built(void) {
  return ask("vulkan", [](const tern::backends::Record& r) { return r.is_built() ? 1 : 0; });
}
int tern_vulkan_is_available(void) {
  return ask("vulkan", [](const tern::backends::Record& r) { return r.is_available() ? 1 : 0; });
}
int tern_mps_is_built(void) {
  return ask("mps", [](const tern::backends::Record& r) { return r.is_built() ? 1 : 0; });
}
int tern_mps_is_available(void) {
  return ask("mps", [](const tern::backends::Record& r) { return r.is_available() ? 1 : 0; });
}

}  // extern "C"
