// CPU sets: the CPU list text of the "cpu.affinity" flag ("0-3,8"), the affinity masks of the
// process and of the calling thread (sched_getaffinity / sched_setaffinity), and the interning
// that lets a CPU list travel as a flag's int64 value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tern {

// Sorted, without repeats.
using CpuList = std::vector<int>;

// Parses "0-3,8" (items N or N-M, N <= M, separated by commas; "" or "none" is the empty list).
// INVALID_ARGUMENT naming the bad item: a missing bound ("0-"), a non-number ("a"), a backwards
// range ("3-1"), an empty item (",,"), or a CPU >= cpu_count (CPUs the machine does not have).
Expected<CpuList> parse_cpu_list(std::string_view text, int cpu_count);
// "0-3,8" (ranges where CPUs are consecutive); "none" for the empty list.
std::string cpu_list_text(const CpuList& cpus);

// The CPUs this machine has (configured, online or not): what a CPU list may name.
int configured_cpu_count();
// The CPUs the process may run on: the calling thread's mask (as taskset sets it for the process
// at its start), or, where OMP_PROC_BIND has bound the initial thread to one OpenMP place, the
// CPUs of all the places; every configured CPU when the mask cannot be read.
CpuList process_cpu_affinity();
// The calling thread's mask (empty when it cannot be read).
CpuList thread_cpu_affinity();
// Sets the calling thread's mask; false (errno kept) when the kernel refuses it, for instance when
// none of the CPUs is allowed to the process's cpuset. An empty list is refused.
bool set_thread_cpu_affinity(const CpuList& cpus);

// Pins the calling thread to `cpus` for its lifetime and restores the thread's previous mask after;
// an empty list does nothing. For threads that serve several sessions (the inter-op pool).
class ScopedThreadAffinity {
 public:
  explicit ScopedThreadAffinity(const CpuList& cpus);
  ~ScopedThreadAffinity();
  ScopedThreadAffinity(const ScopedThreadAffinity&) = delete;
  ScopedThreadAffinity& operator=(const ScopedThreadAffinity&) = delete;

 private:
  CpuList saved_;
  bool pinned_ = false;
};

// CPU lists as flag values: each distinct list gets a small id, stable for the process (0 is the
// empty list), so a FlagValues stays an array of int64 that compares cheaply.
int64_t intern_cpu_list(const CpuList& cpus);
// The list of an id from intern_cpu_list (the empty list for an unknown id).
CpuList interned_cpu_list(int64_t id);
// Whether id came from intern_cpu_list.
bool is_interned_cpu_list(int64_t id);

}  // namespace tern
