// `tern bench MODEL --threads 1,2 --interop 1,2 --concurrency 1,4,8`: the cross product of thread
// counts, inter-op counts and application threads, one row per combination, llama-bench style.
#pragma once

#include <string>
#include <vector>

#include "tools/tern/cli_util.h"

namespace tern_cli {

struct SweepOptions {
  // 0 in threads/interop: the process default (the row shows the count it resolved to).
  std::vector<int> threads{0}, interop{0}, concurrency{1};
  int runs = 50, warmup = 5;  // per application thread
  std::string format = "md";  // md | csv | json
  bool progress = false;
};

// For each (threads, interop) one session of setup's model; for each concurrency N, N application
// threads run that session in a loop: `warmup` runs each, then, all starting together, `runs` timed
// runs each. A row: p50/p90 of all N x runs latencies, throughput (runs / wall time), busy cores
// (process CPU time / wall time over the timed runs) and peak RSS over the combination (the peak
// is reset before each where the kernel allows; otherwise it is the process's since its start,
// and the output says so). Returns the exit code.
int run_sweep(const RunSetup& setup, const SweepOptions& options);

}  // namespace tern_cli
