// Process-wide thread defaults.
#pragma once

namespace tern {

// Physical cores of this machine (logical CPUs when the topology cannot be read).
int physical_core_count();
// Intra-op default: MKL_NUM_THREADS, else OMP_NUM_THREADS, else the physical core count.
int default_num_threads();

}  // namespace tern
