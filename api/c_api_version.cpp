// Version, errors and build/machine queries.
#include <string>

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
  try {
    const tern::backends::Record* r = tern::backends::record(kind);
    return r ? fn(*r) : 0;
  } catch (...) {
    return 0;
  }
}

// Whether the CPU backend was built with a library ("onednn", "openblas", "openmp").
int library_built(const char* lib) {
  return ask("cpu",
             [&](const tern::backends::Record& r) { return r.library_version(lib) >= 0 ? 1 : 0; });
}

}  // namespace

extern "C" {

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
