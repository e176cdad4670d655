#include "core/threading.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/small_file.h"

namespace tern {

bool start_detached_thread(void (*fn)(void*), void* arg) noexcept {
  struct Start {
    void (*fn)(void*);
    void* arg;
  };
  auto* start = new (std::nothrow) Start{fn, arg};
  if (!start) return false;
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) {
    delete start;
    return false;
  }
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  const int rc = pthread_create(
      &thread, &attr,
      [](void* p) -> void* {
        const Start s = *static_cast<Start*>(p);
        delete static_cast<Start*>(p);
        s.fn(s.arg);
        return nullptr;
      },
      start);
  pthread_attr_destroy(&attr);
  if (rc != 0) delete start;
  return rc == 0;
}

#if !defined(TERN_MINIMAL)
namespace {
thread_local bool t_helper = false;
thread_local bool t_with_helpers = false;
}  // namespace

bool on_helper_thread() noexcept {
  return t_helper;
}

bool beside_helpers() noexcept {
  return t_helper || t_with_helpers;
}

int run_with_helpers(int helpers, const std::function<void()>& work) {
  const CpuList mask = thread_cpu_affinity();
  const int here = sched_getcpu();
  std::vector<int> elsewhere;
  for (int c : mask) {
    if (c != here) elsewhere.push_back(c);
  }
  helpers = std::min(helpers, static_cast<int>(elsewhere.size()));
  struct Shared {
    const std::function<void()>* work;
    const CpuList* mask;
  } shared{&work, &mask};
  std::vector<pthread_t> started;
  started.reserve(static_cast<size_t>(std::max(helpers, 0)));
  // Joined however this returns: the helpers read `shared` and what `work` refers to.
  struct Join {
    std::vector<pthread_t>& threads;
    ~Join() {
      t_with_helpers = false;
      for (pthread_t t : threads) pthread_join(t, nullptr);
    }
  } join{started};
  cpu_set_t* set = helpers > 0 ? CPU_ALLOC(elsewhere.back() + 1) : nullptr;
  const size_t bytes = set ? CPU_ALLOC_SIZE(elsewhere.back() + 1) : 0;
  if (set) {
    CPU_ZERO_S(bytes, set);
    for (int c : elsewhere) CPU_SET_S(static_cast<size_t>(c), bytes, set);
  }
  for (int i = 0; set && i < helpers; ++i) {
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) break;
    pthread_attr_setaffinity_np(&attr, bytes, set);
    pthread_t thread;
    const int rc = pthread_create(
        &thread, &attr,
        [](void* p) -> void* {
          const auto* s = static_cast<const Shared*>(p);
          set_thread_cpu_affinity(*s->mask);  // started elsewhere; now free to run anywhere
          t_helper = true;
          (*s->work)();
          return nullptr;
        },
        &shared);
    pthread_attr_destroy(&attr);
    if (rc != 0) break;
    started.push_back(thread);
  }
  if (set) CPU_FREE(set);
  t_with_helpers = !started.empty();
  work();
  return static_cast<int>(started.size());
}
#endif

namespace {

// The physical cores of `cpus`: CPUs listed as one core's threads (topology/core_cpus_list, or
// thread_siblings_list on kernels before 5.7) count once, so a core is read once however many
// threads it has. False when the topology cannot be read.
bool count_cores(const CpuList& cpus, const std::string& cpu_root, int* count) {
  CpuList counted;  // the threads of the cores counted so far
  int cores = 0;
  for (int cpu : cpus) {
    if (std::find(counted.begin(), counted.end(), cpu) != counted.end()) continue;
    const std::string base = cpu_root + "/cpu" + std::to_string(cpu) + "/topology/";
    std::string text = read_small_file((base + "core_cpus_list").c_str());
    if (text.empty()) text = read_small_file((base + "thread_siblings_list").c_str());
    Expected<CpuList> threads = parse_cpu_list(text, 1 << 20);
    if (!threads || std::find(threads->begin(), threads->end(), cpu) == threads->end()) {
      return false;
    }
    for (int t : *threads) counted.push_back(t);
    ++cores;
  }
  *count = cores;
  return true;
}

std::string plural(int n, const char* word) {
  return str_cat(n, " ", word, n == 1 ? "" : "s");
}

}  // namespace

int physical_cores_in(const CpuList& cpus, const std::string& cpu_root) {
  int n = 0;
  if (!count_cores(cpus, cpu_root, &n)) n = static_cast<int>(cpus.size());
  return n > 0 ? n : 1;
}

int physical_cores_in_list(int64_t cpu_list_id) {
  static std::mutex mu;
  static std::map<int64_t, int>* cores = new std::map<int64_t, int>();  // never destroyed
  std::lock_guard<std::mutex> lock(mu);
  auto it = cores->find(cpu_list_id);
  if (it != cores->end()) return it->second;
  const int n = physical_cores_in(interned_cpu_list(cpu_list_id));
  cores->emplace(cpu_list_id, n);
  return n;
}

int physical_core_count() {
  static const int count = [] {
    unsigned logical = std::thread::hardware_concurrency();
    CpuList all;
    for (unsigned cpu = 0; cpu < logical; ++cpu) all.push_back(static_cast<int>(cpu));
    return physical_cores_in(all);
  }();
  return count;
}

ThreadDefault choose_default_threads(const CpuList& affinity, int physical_cores,
                                     const CgroupCpuQuota& quota) {
  ThreadDefault d;
  d.threads = physical_cores > 0 ? physical_cores : 1;
  d.reason = str_cat("affinity mask ", plural(static_cast<int>(affinity.size()), "CPU"), " (",
                     cpu_list_text(affinity), "), ", plural(d.threads, "physical core"));
  if (const int cap = quota_thread_cap(quota, &d.reason)) d.threads = std::min(d.threads, cap);
  return d;
}

int quota_thread_cap(const CgroupCpuQuota& quota, std::string* reason) {
  if (quota.cpus <= 0) {
    *reason += "; no cgroup CPU quota";
    return 0;
  }
  const int rounded = std::max(1, static_cast<int>(std::ceil(quota.cpus - 1e-9)));
  char cpus[32];
  std::snprintf(cpus, sizeof cpus, "%g", quota.cpus);
  *reason += str_cat("; cgroup quota ", cpus, " CPUs (", quota.file, "), rounded up to ", rounded);
  return rounded;
}

const ThreadDefault& default_thread_choice() {
  static const ThreadDefault d = [] {
    const CpuList mask = process_cpu_affinity();
    return choose_default_threads(mask, physical_cores_in(mask), process_cgroup_cpu_quota());
  }();
  return d;
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
  return default_thread_choice().threads;
}

}  // namespace tern
