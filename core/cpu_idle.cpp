#include "core/cpu_idle.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "core/small_file.h"

namespace tern {

int64_t idle_jiffies_of(std::string_view stat, const CpuList& cpus) {
  int64_t total = 0;
  bool any = false;
  size_t pos = 0;
  while (pos < stat.size()) {
    size_t end = stat.find('\n', pos);
    if (end == std::string_view::npos) end = stat.size();
    std::string_view line = stat.substr(pos, end - pos);
    pos = end + 1;
    // "cpuN user nice system idle iowait irq softirq ..."
    if (line.size() < 4 || line.substr(0, 3) != "cpu" || line[3] < '0' || line[3] > '9') continue;
    size_t i = 3;
    int cpu = 0;
    while (i < line.size() && line[i] >= '0' && line[i] <= '9') cpu = cpu * 10 + (line[i++] - '0');
    if (!std::binary_search(cpus.begin(), cpus.end(), cpu)) continue;
    int64_t fields[5] = {0, 0, 0, 0, 0};
    int n = 0;
    while (n < 5 && i < line.size()) {
      while (i < line.size() && line[i] == ' ') ++i;
      if (i >= line.size() || line[i] < '0' || line[i] > '9') break;
      int64_t v = 0;
      while (i < line.size() && line[i] >= '0' && line[i] <= '9') v = v * 10 + (line[i++] - '0');
      fields[n++] = v;
    }
    if (n < 4) continue;
    total += fields[3] + fields[4];  // idle + iowait
    any = true;
  }
  return any ? total : -1;
}

namespace {

// /proc/stat's text ("" when it cannot be read). Machines with hundreds of CPUs write ~100 kB.
std::string read_proc_stat() {
  return read_small_file("/proc/stat", size_t{16} << 20);
}

// The CPU time of all of this process's threads, in seconds.
double process_cpu_seconds() {
  timespec ts{};
  if (::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

IdleCpuMeter::Reading IdleCpuMeter::read(double min_window_ms) {
  Reading r;
  const Clock::time_point now = Clock::now();
  if (started_ && std::chrono::duration<double, std::milli>(now - t0_).count() < min_window_ms) {
    r.known = true;  // not read yet: too soon
    return r;
  }
  const int64_t jiffies = idle_jiffies_of(read_proc_stat(), process_cpu_affinity());
  if (jiffies < 0) return r;
  r.known = true;
  const double cpu_s = process_cpu_seconds();
  if (started_) {
    const long hz = ::sysconf(_SC_CLK_TCK);
    const double seconds = std::chrono::duration<double>(now - t0_).count();
    r.ready = true;
    r.idle_cpus =
        static_cast<double>(jiffies - jiffies0_) / static_cast<double>(hz > 0 ? hz : 100) / seconds;
    r.own_cpus = std::max(0.0, cpu_s - process_cpu_s0_) / seconds;
  }
  started_ = true;
  t0_ = now;
  jiffies0_ = jiffies;
  process_cpu_s0_ = cpu_s;
  return r;
}

}  // namespace tern
