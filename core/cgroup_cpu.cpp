#include "core/cgroup_cpu.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

namespace tern {

namespace {

std::string read_small_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::string text(4096, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

// A positive integer filling `s` (surrounding white space allowed), else -1.
long long positive(const std::string& s) {
  std::istringstream in(s);
  long long v = -1;
  std::string rest;
  if (!(in >> v) || (in >> rest) || v <= 0) return -1;
  return v;
}

// The cgroup path and its ancestors: "/a/b" -> "/a/b", "/a", "".
std::vector<std::string> levels(std::string path) {
  while (!path.empty() && path.back() == '/') path.pop_back();
  std::vector<std::string> out;
  for (;;) {
    out.push_back(path);
    const size_t slash = path.rfind('/');
    if (path.empty() || slash == std::string::npos) break;
    path.resize(slash);
  }
  return out;
}

void consider(CgroupCpuQuota* best, double cpus, const std::string& file) {
  if (cpus > 0 && (best->cpus == 0 || cpus < best->cpus)) *best = {cpus, file};
}

// cgroup v2: "QUOTA PERIOD" or "max PERIOD".
void read_v2(const std::string& dir, CgroupCpuQuota* best) {
  const std::string file = dir + "/cpu.max";
  std::istringstream in(read_small_file(file));
  std::string quota, period, rest;
  if (!(in >> quota >> period) || (in >> rest) || quota == "max") return;
  const long long q = positive(quota), p = positive(period);
  if (q > 0 && p > 0) consider(best, static_cast<double>(q) / static_cast<double>(p), file);
}

// cgroup v1: cpu.cfs_quota_us (-1: none) over cpu.cfs_period_us.
void read_v1(const std::string& dir, CgroupCpuQuota* best) {
  const std::string file = dir + "/cpu.cfs_quota_us";
  const long long q = positive(read_small_file(file));
  const long long p = positive(read_small_file(dir + "/cpu.cfs_period_us"));
  if (q > 0 && p > 0) consider(best, static_cast<double>(q) / static_cast<double>(p), file);
}

}  // namespace

CgroupCpuQuota cgroup_cpu_quota(const std::string& root, const std::string& self_cgroup) {
  CgroupCpuQuota best;
  std::istringstream lines(self_cgroup);
  std::string line;
  while (std::getline(lines, line)) {
    // hierarchy-id:controller-list:path
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    if (path.empty() || path[0] != '/') continue;
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {
      for (const std::string& level : levels(path)) read_v2(root + level, &best);
      continue;
    }
    bool has_cpu = false;
    std::istringstream names(controllers);
    for (std::string c; std::getline(names, c, ',');) has_cpu = has_cpu || c == "cpu";
    if (!has_cpu) continue;
    std::vector<std::string> mounts = {controllers, "cpu", "cpu,cpuacct", "cpuacct,cpu"};
    for (size_t i = 0; i < mounts.size(); ++i) {
      bool seen = false;
      for (size_t j = 0; j < i; ++j) seen = seen || mounts[j] == mounts[i];
      if (seen) continue;
      for (const std::string& level : levels(path)) read_v1(root + "/" + mounts[i] + level, &best);
    }
  }
  return best;
}

CgroupCpuQuota process_cgroup_cpu_quota() {
  return cgroup_cpu_quota("/sys/fs/cgroup", read_small_file("/proc/self/cgroup"));
}

}  // namespace tern
