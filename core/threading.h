// Process-wide thread defaults: how many intra-op (and inter-op) threads Tern uses when nothing
// sets them, from the CPUs this process may use.
#pragma once

#include <functional>
#include <string>

#include "core/cgroup_cpu.h"
#include "core/cpu_set.h"

namespace tern {

// Starts fn(arg) on a detached thread; false when none can be made. Never throws (std::thread
// reports a failure by throwing, which builds without exceptions cannot catch).
bool start_detached_thread(void (*fn)(void*), void* arg) noexcept;

#if !defined(TERN_MINIMAL)  // (what it serves, oneDNN's kernels, is not in minimal builds)
// Runs `work` on the calling thread and, at once, on up to `helpers` short-lived threads, and
// returns when every call has returned: the number of helpers that ran (0 when none could start,
// or when the calling thread may use one CPU only). Each helper starts on a CPU of the caller's
// mask other than the one the caller runs on, then may run anywhere in that mask: a new thread
// that the scheduler queues behind its busy creator waits for the next scheduler tick before it
// is moved (3.9 ms measured on this project's 2-vCPU machines), where one placed elsewhere starts
// within 0.1 ms. `work` must be safe to run on several threads at once, and must not throw on a
// helper (the helpers are joined however the caller's call returns).
int run_with_helpers(int helpers, const std::function<void()>& work);
// Whether the calling thread is one of run_with_helpers' helpers.
bool on_helper_thread() noexcept;
// Whether it is a helper, or a caller of run_with_helpers while its helpers run: a parallel region
// started there would only contend with them.
bool beside_helpers() noexcept;
#endif

// Physical cores of this machine (logical CPUs when the topology cannot be read).
int physical_core_count();
// Physical cores among `cpus` (hyper-threads of one core count once): sysfs topology, else the
// number of CPUs. `cpu_root` is sysfs's CPU directory (tests give a fake one); each core's
// thread list is read once.
int physical_cores_in(const CpuList& cpus, const std::string& cpu_root = "/sys/devices/system/cpu");

// physical_cores_in for an interned CPU list (a "cpu.affinity" value), kept per list: runs ask at
// each start.
int physical_cores_in_list(int64_t cpu_list_id);

// The cgroup CPU quota as a thread cap: the quota rounded up, at least 1 (0 when there is no
// quota), and "; cgroup quota 1.5 CPUs (FILE), rounded up to 2" or "; no cgroup CPU quota" appended
// to *reason.
int quota_thread_cap(const CgroupCpuQuota& quota, std::string* reason);

// The default thread count and why.
struct ThreadDefault {
  int threads = 1;
  // "affinity mask 1 CPU (0), 1 physical core; no cgroup CPU quota"
  std::string reason;
};
// min(physical cores within the affinity mask, ceil(cgroup CPU quota)), at least 1. The quota is
// rounded up: 1.5 CPUs' worth of time spread over 2 threads keeps the whole quota usable, where 1
// thread would leave half a CPU idle (Go's and the JVM's container defaults round up too).
ThreadDefault choose_default_threads(const CpuList& affinity, int physical_cores,
                                     const CgroupCpuQuota& quota);
// choose_default_threads for this process (sched_getaffinity, sysfs, /proc/self/cgroup), computed
// once, at first use, like PyTorch's defaults.
const ThreadDefault& default_thread_choice();
// Intra-op default: MKL_NUM_THREADS, else OMP_NUM_THREADS, else default_thread_choice().
int default_num_threads();

}  // namespace tern
