// Where threads may run: CPU list parsing ("0-3,8") and its refusals, the cgroup CPU quota read
// from simulated cgroup v1/v2 trees, the default thread count derived from the affinity mask and
// the quota (also under `taskset -c 0` in a child process), and the "cpu.affinity" flag pinning a
// run's OpenMP team.
#include <doctest/doctest.h>
#include <sched.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include "backends/cpu/cpu_affinity.h"
#include "backends_util.h"
#include "c_api.h"
#include "core/cgroup_cpu.h"
#include "core/cpu_set.h"
#include "core/run_homes.h"
#include "core/threading.h"

using namespace tern;
using namespace tern_test;

namespace {

// A scratch cgroup tree under the temporary directory, removed at the end.
struct FakeCgroup {
  std::filesystem::path root;
  FakeCgroup() {
    root =
        std::filesystem::temp_directory_path() / ("tern_cgroup_test_" + std::to_string(getpid()));
    std::filesystem::remove_all(root);
    std::filesystem::create_directories(root);
  }
  ~FakeCgroup() { std::filesystem::remove_all(root); }
  void write(const std::string& rel, const std::string& text) {
    const std::filesystem::path p = root / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  CgroupCpuQuota quota(const std::string& self_cgroup) const {
    return cgroup_cpu_quota(root.string(), self_cgroup);
  }
};

CpuList range(int n) {
  CpuList l;
  for (int i = 0; i < n; ++i) l.push_back(i);
  return l;
}

bool taskset_available() {
  return std::system("taskset -c 0 true >/dev/null 2>&1") == 0;
}

}  // namespace

TEST_SUITE("core") {
  TEST_CASE("CPU lists: parsing, canonical text, and named refusals") {
    auto ok = [](const char* text, int cpus) {
      auto l = parse_cpu_list(text, cpus);
      REQUIRE_MESSAGE(l.has_value(), text, ": ", l.status().message());
      return *l;
    };
    CHECK(ok("0-3,8", 16) == CpuList{0, 1, 2, 3, 8});
    CHECK(ok(" 8,0-1,1 ", 16) == CpuList{0, 1, 8});  // sorted, repeats dropped
    CHECK(ok("5", 6) == CpuList{5});
    CHECK(ok("", 4).empty());
    CHECK(ok("none", 4).empty());
    CHECK(cpu_list_text({0, 1, 2, 3, 8}) == "0-3,8");
    CHECK(cpu_list_text({1, 3, 4}) == "1,3-4");
    CHECK(cpu_list_text({}) == "none");
    struct Bad {
      const char* text;
      const char* why;
    };
    for (const Bad& b : {Bad{"0-", "a range with no end"}, Bad{"a", "not a CPU number"},
                         Bad{"3-1", "a range that runs backwards"}, Bad{"0,,1", "an empty item"},
                         Bad{"1,", "an empty item"}, Bad{"-1", "not a CPU number"},
                         Bad{"0-x", "not a CPU number"}, Bad{"99999999999", "not a CPU number"},
                         Bad{"4", "CPU 4 does not exist: this machine has CPUs 0-3"},
                         Bad{"2-7", "CPU 7 does not exist"}}) {
      auto l = parse_cpu_list(b.text, 4);
      INFO(b.text);
      REQUIRE(!l.has_value());
      CHECK(l.status().code() == Code::kInvalidArgument);
      CHECK(l.status().message().find(b.why) != std::string::npos);
    }
  }

  TEST_CASE("cgroup CPU quota: v2 cpu.max, v1 cfs files, ancestors, malformed files") {
    FakeCgroup cg;
    // v2: 1.5 CPUs' worth of time.
    cg.write("app.slice/svc/cpu.max", "150000 100000\n");
    CgroupCpuQuota q = cg.quota("0::/app.slice/svc\n");
    CHECK(q.cpus == doctest::Approx(1.5));
    CHECK(q.file == (cg.root / "app.slice/svc/cpu.max").string());
    // Rounded up: 2 threads share the 1.5 CPUs; fewer physical cores still win.
    CHECK(choose_default_threads(range(8), 8, q).threads == 2);
    CHECK(choose_default_threads(range(8), 8, q).reason.find("cgroup quota 1.5 CPUs") !=
          std::string::npos);
    CHECK(choose_default_threads(range(2), 1, q).threads == 1);
    // "max": no quota.
    cg.write("app.slice/svc/cpu.max", "max 100000\n");
    CHECK(cg.quota("0::/app.slice/svc\n").cpus == 0);
    CHECK(choose_default_threads(range(8), 8, cg.quota("0::/app.slice/svc\n")).threads == 8);
    // A parent's quota binds the child; the tightest level wins.
    cg.write("app.slice/cpu.max", "300000 100000");
    cg.write("app.slice/svc/cpu.max", "400000 100000");
    CHECK(cg.quota("0::/app.slice/svc").cpus == doctest::Approx(3.0));
    // A container sees its own cgroup as the root ("0::/"): the root's file counts; half a CPU
    // rounds up to 1 thread.
    cg.write("cpu.max", "50000 100000");
    CHECK(cg.quota("0::/\n").cpus == doctest::Approx(0.5));
    CHECK(choose_default_threads(range(4), 4, cg.quota("0::/")).threads == 1);
    std::filesystem::remove(cg.root / "cpu.max");

    // v1: the cpu controller's mount, under its own name or the joint one.
    cg.write("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "200000\n");
    cg.write("cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
    const std::string v1 = "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/\n";
    CHECK(cg.quota(v1).cpus == doctest::Approx(2.0));
    cg.write("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n");  // no quota
    CHECK(cg.quota(v1).cpus == 0);
    cg.write("cpu/svc/cpu.cfs_quota_us", "250000");  // mounted as "cpu" only
    cg.write("cpu/svc/cpu.cfs_period_us", "100000");
    CHECK(cg.quota("3:cpu:/svc").cpus == doctest::Approx(2.5));
    CHECK(cg.quota("3:cpuacct:/svc").cpus == 0);  // not the cpu controller

    // Malformed files and lines are ignored: no quota, no crash.
    for (const char* bad : {"", "abc def", "150000", "-5 100000", "100000 0", "100000 -1",
                            "1e5 100000", "150000 100000 7", "\x01\xff\xfe", "max"}) {
      INFO("cpu.max = '", bad, "'");
      cg.write("app.slice/svc/cpu.max", bad);
      cg.write("app.slice/cpu.max", bad);
      CHECK(cg.quota("0::/app.slice/svc").cpus == 0);
    }
    for (const char* bad : {"abc", "12x", "", "100000 100000"}) {
      INFO("cfs_quota_us = '", bad, "'");
      cg.write("cpu/svc/cpu.cfs_quota_us", bad);
      CHECK(cg.quota("3:cpu:/svc").cpus == 0);
    }
    for (const char* bad : {"garbage", "::", "0::", "0::relative/path", ":::", "7:cpu"}) {
      CHECK(cg.quota(bad).cpus == 0);
    }
    CHECK(cgroup_cpu_quota((cg.root / "missing").string(), "0::/x\n4:cpu:/y").cpus == 0);
  }

  TEST_CASE("default threads: physical cores within the affinity mask, capped by the quota") {
    const CgroupCpuQuota none;
    ThreadDefault d = choose_default_threads({0}, 1, none);
    CHECK(d.threads == 1);
    CHECK(d.reason == "affinity mask 1 CPU (0), 1 physical core; no cgroup CPU quota");
    CHECK(choose_default_threads({0, 1, 2, 3}, 2, none).threads == 2);  // 2 cores, 2 threads each
    CHECK(choose_default_threads({0, 1, 2, 3}, 4, CgroupCpuQuota{2.0, "f"}).threads == 2);
    CHECK(choose_default_threads({0, 1, 2, 3}, 4, CgroupCpuQuota{2.01, "f"}).threads == 3);
    // This process: never more than the CPUs of its mask.
    const ThreadDefault& self = default_thread_choice();
    CHECK(self.threads >= 1);
    CHECK(self.threads <= static_cast<int>(process_cpu_affinity().size()));
    CHECK(physical_cores_in(process_cpu_affinity()) >= 1);
  }

  TEST_CASE("physical cores: a core's threads count once, from sysfs's thread lists") {
    FakeCgroup sys;  // a scratch directory standing for /sys/devices/system/cpu
    const std::string root = sys.root.string();
    // Two cores of two threads each (0,2 and 1,3, as x86 numbers them); core_cpus_list first.
    sys.write("cpu0/topology/core_cpus_list", "0,2\n");
    sys.write("cpu2/topology/core_cpus_list", "0,2\n");
    sys.write("cpu1/topology/core_cpus_list", "1,3\n");
    sys.write("cpu3/topology/core_cpus_list", "1,3\n");
    CHECK(physical_cores_in({0, 1, 2, 3}, root) == 2);
    CHECK(physical_cores_in({0, 2}, root) == 1);  // both threads of one core
    CHECK(physical_cores_in({2, 3}, root) == 2);  // one thread of each
    // Kernels before 5.7 only have thread_siblings_list ("0-1": a range).
    sys.write("cpu4/topology/thread_siblings_list", "4-5\n");
    sys.write("cpu5/topology/thread_siblings_list", "4-5\n");
    CHECK(physical_cores_in({0, 4, 5}, root) == 2);
    // Unreadable or inconsistent topology: every CPU counts (the list must name its own CPU).
    CHECK(physical_cores_in({0, 6}, root) == 2);  // cpu6 has no topology
    sys.write("cpu7/topology/core_cpus_list", "0,2\n");
    CHECK(physical_cores_in({0, 2, 7}, root) == 3);
    sys.write("cpu8/topology/core_cpus_list", "garbage\n");
    CHECK(physical_cores_in({8}, root) == 1);
    // This machine: the same count as distinct (package, core id) pairs, where sysfs has them.
    const CpuList mine = process_cpu_affinity();
    std::set<std::pair<int, int>> pairs;
    for (int cpu : mine) {
      const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
      std::ifstream core(base + "core_id"), pkg(base + "physical_package_id");
      int c = -1, p = -1;
      if (!(core >> c) || !(pkg >> p)) {
        pairs.clear();
        break;
      }
      pairs.insert({p, c});
    }
    if (pairs.empty()) {
      MESSAGE("this machine's sysfs has no core ids: its own count is not compared");
    } else {
      CHECK(physical_cores_in(mine) == static_cast<int>(pairs.size()));
    }
  }

  TEST_CASE("ScopedThreadAffinity pins a thread and gives its mask back") {
    const CpuList all = process_cpu_affinity();
    if (all.size() < 2) {
      MESSAGE("pinning skipped: this process may use one CPU only");
      return;
    }
    std::thread([&] {
      const CpuList before = thread_cpu_affinity();
      {
        ScopedThreadAffinity pin({all[1]});
        CHECK(thread_cpu_affinity() == CpuList{all[1]});
        CHECK(sched_getcpu() == all[1]);
      }
      CHECK(thread_cpu_affinity() == before);
    }).join();
  }
}

TEST_SUITE("backends") {
  TEST_CASE("cpu.affinity: the flag, its refusals, and a run's OpenMP team pinned to it") {
    FlagRestore restore;
    CHECK(flag("cpu.affinity") == "none");
    for (const char* bad : {"0-", "a", "3-1", "100000"}) {
      INFO(bad);
      CHECK(tern_flag_set("cpu.affinity", bad) == TERN_ERR_INVALID_ARGUMENT);
      CHECK(std::string(tern_last_error()).find("flag 'cpu.affinity': CPU list") !=
            std::string::npos);
    }
    tern_session_options* o = nullptr;
    REQUIRE(tern_session_options_create(&o) == TERN_OK);
    CHECK(tern_session_options_set_flag(o, "cpu.affinity", "3-1") == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_session_options_set_flag(o, "cpu.affinity", "0") == TERN_OK);
    tern_session_options_destroy(o);
    // Pinned, a default num_threads shrinks to the list's physical cores; a set one stays.
    // (Earlier tests may have set the global value, which then stays.)
    FlagOverrides pinned;
    pinned.set(FlagId::kCpuAffinity, intern_cpu_list({0}));
    const bool global_default = Flags::global().source(FlagId::kNumThreads) == FlagSource::kDefault;
    CHECK(Flags::global().resolve(&pinned, nullptr)[FlagId::kNumThreads] ==
          (global_default ? 1 : Flags::global().get(FlagId::kNumThreads)));
    pinned.set(FlagId::kNumThreads, 2);
    CHECK(Flags::global().resolve(&pinned, nullptr)[FlagId::kNumThreads] == 2);
    REQUIRE(tern_flag_set("cpu.affinity", "0") == TERN_OK);
    CHECK(flag("cpu.affinity") == "0");
    REQUIRE(tern_flag_set("cpu.affinity", "none") == TERN_OK);

    const CpuList all = process_cpu_affinity();
    if (all.size() < 2 || !tern_openmp_is_available()) {
      MESSAGE("team pinning skipped: needs OpenMP and two CPUs for this process");
      return;
    }
    // A run with cpu.affinity = the process's first CPU. Runs of several threads execute on a run
    // home (core/run_homes.h), whose OpenMP team is the one pinned: the team is read there (the
    // first idle home, the one that ran).
    auto home_team = [] {
      std::vector<CpuList> team;
      REQUIRE(RunHomes::global()
                  .run([&] {
                    team = team_cpu_affinity(2);
                    return Status::ok();
                  })
                  .is_ok());
      return team;
    };
    std::thread([&] {
      CpuList own;
      REQUIRE(RunHomes::global()
                  .run([&] {
                    own = thread_cpu_affinity();
                    return Status::ok();
                  })
                  .is_ok());
      auto run = [](int64_t affinity) {
        SingleOp relu;
        relu.op = "Relu";
        relu.runtime = {make_f32({4096}, std::vector<float>(4096, -1.f))};
        relu.flags = {{FlagId::kNumThreads, 2}, {FlagId::kCpuAffinity, affinity}};
        auto out = relu.run();
        REQUIRE(out.has_value());
        CHECK(out->at(0).data<float>()[0] == 0.f);
      };
      run(intern_cpu_list({all[0]}));
      // The team's worker kept the list; the thread that ran has its own mask back.
      std::vector<CpuList> team = home_team();
      REQUIRE(team.size() == 2);
      CHECK(team[0] == own);
      CHECK(team[1] == CpuList{all[0]});
      CHECK(cpu_affinity_report().find("latest team pinned to " + std::to_string(all[0])) !=
            std::string::npos);
      // A later run without a list gives the worker the calling thread's mask back.
      run(0);
      team = home_team();
      CHECK(team[1] == own);
    }).join();
  }

  TEST_CASE("default threads in child processes: OMP_PROC_BIND, taskset -c 0; TERN_CPU_AFFINITY") {
    // OMP_PROC_BIND binds the initial thread to one place before main(): the default still counts
    // every place's CPUs.
#if defined(__clang__)
    // The clang (sanitizer) builds load LLVM's libomp beside the libgomp Debian's oneDNN links:
    // libgomp's constructor binds the initial thread to one CPU before libomp computes its places
    // from that narrowed mask, so the places no longer tell the process's CPUs.
    MESSAGE("skipped the OMP_PROC_BIND part: two OpenMP runtimes in this build");
#else
    Cli bound =
        run_cli("env -u MKL_NUM_THREADS -u OMP_NUM_THREADS OMP_PROC_BIND=true", "info --flags");
    CHECK(flag_row(bound.out, "num_threads").at(1) ==
          std::to_string(default_thread_choice().threads));
#endif
    // The environment variable of the affinity flag, and its refusal.
    Cli e = run_cli("TERN_CPU_AFFINITY=0", "info --flags");
    CHECK(flag_row(e.out, "cpu.affinity").at(1) == "0");
    CHECK(flag_row(e.out, "cpu.affinity").at(2) == "environment");
    Cli bad = run_cli("TERN_CPU_AFFINITY=3-1", "info --flags");
    CHECK(flag_row(bad.out, "cpu.affinity").at(1) == "none");
    // --cpus with the default thread count: one thread per physical core of the list.
    Cli one = run_cli("env -u MKL_NUM_THREADS -u OMP_NUM_THREADS",
                      "bench " + std::string(TERN_SOURCE_DIR) +
                          "/tests/fuzz/corpus/tern_loader/conv.tern --cpus 0 --runs 2 "
                          "--no-kernel-report --no-progress");
    INFO(one.out);
    CHECK(one.out.find(", threads 1, 2 runs") != std::string::npos);
    if (!taskset_available()) {
      MESSAGE("taskset (util-linux) not found: skipped");
      return;
    }
    Cli r = run_cli("env -u MKL_NUM_THREADS -u OMP_NUM_THREADS taskset -c 0", "info --parallel");
    INFO(r.out);
    CHECK(r.code == 0);
    CHECK(r.out.find("intra-op threads (tern_get_num_threads): 1  [source: default: affinity "
                     "mask 1 CPU (0), 1 physical core") != std::string::npos);
    CHECK(r.out.find("default threads: 1 (affinity mask 1 CPU (0)") != std::string::npos);
    Cli f = run_cli("env -u MKL_NUM_THREADS -u OMP_NUM_THREADS taskset -c 0", "info --flags");
    CHECK(flag_row(f.out, "num_threads").at(1) == "1");
    CHECK(flag_row(f.out, "num_interop_threads").at(1) == "1");
  }
}
