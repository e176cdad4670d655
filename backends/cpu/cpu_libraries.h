// What the CPU backend was built with, for tern_config_show and the availability queries.
#pragma once

#include <string>

namespace tern {

bool onednn_available();
bool openblas_available();
bool openmp_available();
// One line per library with its version and configuration.
std::string cpu_library_report();

}  // namespace tern
