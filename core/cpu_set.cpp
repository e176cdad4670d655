#include "core/cpu_set.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <mutex>

#if defined(TERN_HAVE_OPENMP)
#include <omp.h>
#endif

namespace tern {

namespace {

// The number of CPUs a mask has room for: the kernel refuses a mask smaller than its own.
int mask_cpus() {
  return std::max(configured_cpu_count(), CPU_SETSIZE);
}

struct Mask {
  explicit Mask(int n) : cpus(n), set(CPU_ALLOC(n)), bytes(CPU_ALLOC_SIZE(n)) {
    if (set) CPU_ZERO_S(bytes, set);
  }
  ~Mask() { CPU_FREE(set); }
  Mask(const Mask&) = delete;
  Mask& operator=(const Mask&) = delete;
  int cpus;
  cpu_set_t* set;
  size_t bytes;
};

CpuList mask_list(const Mask& m) {
  CpuList out;
  for (int c = 0; c < m.cpus; ++c) {
    if (CPU_ISSET_S(static_cast<size_t>(c), m.bytes, m.set)) out.push_back(c);
  }
  return out;
}

// A decimal CPU number, or -1.
long parse_cpu_number(std::string_view s) {
  if (s.empty() || s.size() > 9) return -1;
  long v = 0;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

struct Interned {
  std::mutex mu;
  std::vector<CpuList> lists{CpuList{}};  // id 0: the empty list
};
Interned& interned() {
  static Interned* table = new Interned();  // never destroyed: runs may read it during exit
  return *table;
}

}  // namespace

Expected<CpuList> parse_cpu_list(std::string_view text, int cpu_count) {
  text = trim(text);
  if (text.empty() || text == "none" || text == "NONE" || text == "None") return CpuList{};
  auto bad = [&](std::string_view item, const char* why) {
    return invalid_argument("CPU list '", shorten(text), "': ", why, " in '", shorten(item),
                            "' (use a list like 0-3,8)");
  };
  CpuList out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view item = trim(text.substr(at, comma - at));
    at = comma + 1;
    if (item.empty()) return bad(item, "an empty item");
    const size_t dash = item.find('-');
    const std::string_view first = trim(item.substr(0, dash));
    const long lo = parse_cpu_number(first);
    if (lo < 0) return bad(item, "not a CPU number");
    long hi = lo;
    if (dash != std::string_view::npos) {
      const std::string_view last = trim(item.substr(dash + 1));
      if (last.empty()) return bad(item, "a range with no end");
      hi = parse_cpu_number(last);
      if (hi < 0) return bad(item, "not a CPU number");
      if (hi < lo) return bad(item, "a range that runs backwards");
    }
    if (hi >= cpu_count) {
      return invalid_argument("CPU list '", shorten(text), "': CPU ", hi,
                              " does not exist: this machine has CPUs 0-", cpu_count - 1);
    }
    for (long c = lo; c <= hi; ++c) out.push_back(static_cast<int>(c));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string cpu_list_text(const CpuList& cpus) {
  if (cpus.empty()) return "none";
  std::string s;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    s += str_cat(s.empty() ? "" : ",", cpus[i]);
    if (j > i) s += str_cat("-", cpus[j]);
    i = j + 1;
  }
  return s;
}

int configured_cpu_count() {
  static const int n = [] {
    const long v = sysconf(_SC_NPROCESSORS_CONF);
    return v > 0 ? static_cast<int>(v) : 1;
  }();
  return n;
}

CpuList thread_cpu_affinity() {
  Mask m(mask_cpus());
  if (!m.set || sched_getaffinity(0, m.bytes, m.set) != 0) return {};
  return mask_list(m);
}

CpuList process_cpu_affinity() {
#if defined(TERN_HAVE_OPENMP)
  // With OMP_PROC_BIND set, OpenMP binds the initial thread to its first place (before main() in
  // libgomp, when the runtime starts in LLVM's libomp): the process's CPUs are those of all its
  // places. The places are asked for first: in libomp that starts the runtime, which computes
  // them. (A process that loads both runtimes, as the clang builds do beside Debian's oneDNN,
  // gets libomp's places from the mask libgomp already narrowed.)
  const int places = omp_get_num_places();
  if (places > 0 && omp_get_proc_bind() != omp_proc_bind_false) {
    CpuList all;
    for (int p = 0; p < places; ++p) {
      std::vector<int> ids(static_cast<size_t>(std::max(0, omp_get_place_num_procs(p))));
      omp_get_place_proc_ids(p, ids.data());
      all.insert(all.end(), ids.begin(), ids.end());
    }
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
    if (!all.empty()) return all;
  }
#endif
  CpuList cpus = thread_cpu_affinity();
  if (cpus.empty()) {
    for (int c = 0; c < configured_cpu_count(); ++c) cpus.push_back(c);
  }
  return cpus;
}

bool set_thread_cpu_affinity(const CpuList& cpus) {
  if (cpus.empty()) return false;
  Mask m(std::max(mask_cpus(), cpus.back() + 1));
  if (!m.set) return false;
  for (int c : cpus) CPU_SET_S(static_cast<size_t>(c), m.bytes, m.set);
  return sched_setaffinity(0, m.bytes, m.set) == 0;  // pid 0: the calling thread
}

ScopedThreadAffinity::ScopedThreadAffinity(const CpuList& cpus) {
  if (cpus.empty()) return;
  saved_ = thread_cpu_affinity();
  pinned_ = !saved_.empty() && saved_ != cpus && set_thread_cpu_affinity(cpus);
}

ScopedThreadAffinity::~ScopedThreadAffinity() {
  if (pinned_) set_thread_cpu_affinity(saved_);
}

int64_t intern_cpu_list(const CpuList& cpus) {
  Interned& t = interned();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = std::find(t.lists.begin(), t.lists.end(), cpus);
  if (it != t.lists.end()) return it - t.lists.begin();
  t.lists.push_back(cpus);
  return static_cast<int64_t>(t.lists.size() - 1);
}

CpuList interned_cpu_list(int64_t id) {
  Interned& t = interned();
  std::lock_guard<std::mutex> lock(t.mu);
  if (id < 0 || static_cast<size_t>(id) >= t.lists.size()) return {};
  return t.lists[static_cast<size_t>(id)];
}

bool is_interned_cpu_list(int64_t id) {
  Interned& t = interned();
  std::lock_guard<std::mutex> lock(t.mu);
  return id >= 0 && static_cast<size_t>(id) < t.lists.size();
}

}  // namespace tern
