// What every model-reading fuzz target checks on an input the loader accepted.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "serialization/model_io.h"

namespace tern_fuzz {

// A model that loads saves as .tern and loads again; aborts (a finding) when it does not.
inline void check_round_trip(const tern::Model& m, const char* target) {
  static const std::string path =
      std::string("/tmp/") + target + "_" + std::to_string(getpid()) + ".tern";
  if (tern::serialization::save_tern(m.graph(), path).is_ok()) {
    auto again = tern::serialization::load_model_file(path);
    if (!again) {
      std::fprintf(stderr, "%s: an accepted model saved as .tern does not load again: %s\n", target,
                   again.status().message().c_str());
      std::abort();
    }
  }
  std::remove(path.c_str());
}

}  // namespace tern_fuzz
