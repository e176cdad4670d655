// `tern --version`: the version on the first line, the build configuration on the second (one
// line each, for scripts and bug reports; `tern info` has the long form).
#include <cstdio>
#include <string>

#include "c_api.h"
#include "tools/tern/commands.h"

namespace tern_cli {

int print_version() {
  std::printf("tern %s\n", tern_version());
  std::string libs;
  auto add = [&](const char* name, int on) {
    if (on) libs += std::string(libs.empty() ? "" : ",") + name;
  };
  add("onednn", tern_onednn_is_available());
  add("openblas", tern_openblas_is_available());
  add("openmp", tern_openmp_is_available());
  std::printf("build: ABI %u, .tern format %u, CPU capability %s, backends cpu%s%s, libraries %s\n",
              static_cast<unsigned>(tern_abi_version()),
              static_cast<unsigned>(tern_format_version()), tern_cpu_get_capability(),
              tern_cuda_is_built() ? ",cuda" : "", tern_vulkan_is_built() ? ",vulkan" : "",
              libs.empty() ? "none" : libs.c_str());
  return 0;
}

}  // namespace tern_cli
