// Version, errors and build/machine queries.
#include <string>

#include "api/api_internal.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_libraries.h"
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
  if (static_cast<int>(s) < 0 || static_cast<int>(s) > static_cast<int>(TERN_ERR_INTERNAL)) {
    return "TERN_UNKNOWN_STATUS";
  }
  return tern::code_name(static_cast<tern::Code>(s));
}

const char* tern_last_error(void) {
  return tern::api::g_last_error.c_str();
}

int tern_onednn_is_available(void) {
  return tern::onednn_available();
}
int tern_openblas_is_available(void) {
  return tern::openblas_available();
}
int tern_openmp_is_available(void) {
  return tern::openmp_available();
}
int tern_cuda_is_built(void) {
  return tern::backends::is_built("cuda");
}
int tern_cuda_is_available(void) {
  return tern::backends::is_available("cuda");
}
int tern_cuda_device_count(void) {
  try {
    return tern::backends::cuda_devices();
  } catch (...) {
    return 0;
  }
}
int tern_vulkan_is_built(void) {
  return tern::backends::is_built("vulkan");
}
int tern_vulkan_is_available(void) {
  return tern::backends::is_available("vulkan");
}
int tern_mps_is_built(void) {
  return tern::backends::is_built("mps");
}
int tern_mps_is_available(void) {
  return tern::backends::is_available("mps");
}

}  // extern "C"
