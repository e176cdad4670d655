#include "core/cgroup_cpu.h"

#include <cerrno>
#include <cstdlib>
#include <vector>

#include "core/small_file.h"

namespace tern {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// The words of `s`, split at white space.
std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    while (i < s.size() && is_space(s[i])) ++i;
    size_t j = i;
    while (j < s.size() && !is_space(s[j])) ++j;
    if (j > i) out.emplace_back(s, i, j - i);
    i = j;
  }
  return out;
}

// A positive decimal integer that is all of `word`, else -1.
long long positive(const std::string& word) {
  if (word.empty()) return -1;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(word.c_str(), &end, 10);
  if (errno != 0 || end != word.c_str() + word.size() || v <= 0) return -1;
  return v;
}

// The one word of a file that must hold one, else "".
std::string only_word(const std::string& text) {
  std::vector<std::string> w = words(text);
  return w.size() == 1 ? w[0] : std::string();
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
  const std::vector<std::string> w = words(read_small_file(file.c_str()));
  if (w.size() != 2 || w[0] == "max") return;
  const long long q = positive(w[0]), p = positive(w[1]);
  if (q > 0 && p > 0) consider(best, static_cast<double>(q) / static_cast<double>(p), file);
}

// cgroup v1: cpu.cfs_quota_us (-1: none) over cpu.cfs_period_us.
void read_v1(const std::string& dir, CgroupCpuQuota* best) {
  const std::string file = dir + "/cpu.cfs_quota_us";
  const long long q = positive(only_word(read_small_file(file.c_str())));
  if (q <= 0) return;  // none here (-1), or no such level
  const long long p = positive(only_word(read_small_file((dir + "/cpu.cfs_period_us").c_str())));
  if (q > 0 && p > 0) consider(best, static_cast<double>(q) / static_cast<double>(p), file);
}

}  // namespace

CgroupCpuQuota cgroup_cpu_quota(const std::string& root, const std::string& self_cgroup) {
  CgroupCpuQuota best;
  for (size_t pos = 0; pos < self_cgroup.size();) {
    size_t eol = self_cgroup.find('\n', pos);
    if (eol == std::string::npos) eol = self_cgroup.size();
    const std::string line = self_cgroup.substr(pos, eol - pos);
    pos = eol + 1;
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
    for (size_t c = 0; c <= controllers.size();) {
      size_t comma = controllers.find(',', c);
      if (comma == std::string::npos) comma = controllers.size();
      has_cpu = has_cpu || controllers.compare(c, comma - c, "cpu") == 0;
      c = comma + 1;
    }
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

const CgroupCpuQuota& process_cgroup_cpu_quota() {
  static const CgroupCpuQuota q =
      cgroup_cpu_quota("/sys/fs/cgroup", read_small_file("/proc/self/cgroup", 65536));
  return q;
}

}  // namespace tern
