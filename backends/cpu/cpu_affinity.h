// The "cpu.affinity" flag on the CPU backend: pins the calling thread's intra-op team (its OpenMP
// threads, the calling thread included) to the run's CPU list for the run, and unpins the team
// when a later run on that thread has no list.
#pragma once

#include <string>
#include <vector>

#include "core/cpu_set.h"
#include "core/flags.h"

namespace tern {

// At the start of a run on the calling thread (CpuBackend::begin_run). With a list: the calling
// thread's mask is saved and it and the `num_threads` OpenMP threads of its team are pinned to the
// list (the team only when the list or a larger team than last time asks for it, so repeated runs
// pay one sched_setaffinity of the calling thread). Without one, the workers of a team pinned by
// an earlier run get back the masks they had before (OpenMP's places under OMP_PROC_BIND);
// otherwise nothing is done. Runs nested in a run (control
// flow bodies) leave the outer run's pinning alone. A refusal by the kernel (a CPU outside the
// process's cpuset) leaves the masks as they were and is reported by cpu_affinity_report().
void begin_run_affinity(const FlagValues& flags);
// At the end of the run: the calling thread's own mask back.
void end_run_affinity();

// One line for tern_parallel_info: the latest pinning and whether the kernel took it.
std::string cpu_affinity_report();

// For tests: the mask of each thread of an OpenMP team of `threads` started on the calling thread
// (one entry, the calling thread's, without OpenMP).
std::vector<CpuList> team_cpu_affinity(int threads);

}  // namespace tern
