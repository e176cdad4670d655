// The CPU bandwidth quota of the process's cgroup (containers, systemd's CPUQuota=): how many CPUs'
// worth of time the process may use, from cgroup v2's cpu.max or cgroup v1's cpu.cfs_quota_us /
// cpu.cfs_period_us, along the process's cgroup path and every ancestor up to the mount's root.
#pragma once

#include <string>

namespace tern {

struct CgroupCpuQuota {
  double cpus = 0;   // quota / period of the tightest level; 0: no quota
  std::string file;  // the file that set it ("" when none)
};

// Reads the quota under `root` (the cgroup mount point, "/sys/fs/cgroup" for the process) for the
// process whose /proc/<pid>/cgroup text is `self_cgroup`:
//   v2 ("0::/path" lines): ROOT/path/cpu.max, "QUOTA PERIOD" or "max PERIOD" (no quota);
//   v1 ("N:cpu,cpuacct:/path" lines): ROOT/<controllers>/path/cpu.cfs_quota_us and
//      cpu.cfs_period_us (a quota of -1: none), also under ROOT/cpu and ROOT/cpu,cpuacct.
// Each level from the path up to the root is read (a container sees its own cgroup as the root;
// a parent's quota binds its children) and the smallest quota wins. Missing, unreadable or
// malformed files are skipped; nothing here fails.
CgroupCpuQuota cgroup_cpu_quota(const std::string& root, const std::string& self_cgroup);

// This process's quota: /sys/fs/cgroup and /proc/self/cgroup, read once per process (~60 us, at
// its first load; the thread default and the thread budget both ask).
const CgroupCpuQuota& process_cgroup_cpu_quota();

}  // namespace tern
