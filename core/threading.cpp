#include "core/threading.h"

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>

namespace tern {

int physical_core_count() {
  static const int count = [] {
    std::set<std::pair<int, int>> cores;  // (package, core)
    unsigned logical = std::thread::hardware_concurrency();
    for (unsigned cpu = 0; cpu < logical; ++cpu) {
      std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
      std::ifstream core(base + "core_id"), pkg(base + "physical_package_id");
      int c = -1, p = -1;
      if (!(core >> c) || !(pkg >> p)) return logical ? static_cast<int>(logical) : 1;
      cores.insert({p, c});
    }
    return cores.empty() ? 1 : static_cast<int>(cores.size());
  }();
  return count;
}

static int env_threads(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return 0;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  return (end && *end == '\0' && n > 0 && n < 4096) ? static_cast<int>(n) : 0;
}

int default_num_threads() {
  if (int n = env_threads("MKL_NUM_THREADS")) return n;
  if (int n = env_threads("OMP_NUM_THREADS")) return n;
  return physical_core_count();
}

}  // namespace tern
