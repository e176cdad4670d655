// The process-wide thread budget (core/thread_budget.h) and the adaptive thread count
// (core/thread_tuner.h): grants share the budget across calling threads, nested runs take
// nothing more, the wait policy honours deadlines, many calling threads keep no more cores busy
// than the budget, and the tuner moves to fewer threads while they are faster and back after.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

#include "backends_util.h"
#include "core/cpu_idle.h"
#include "core/memory_budget.h"
#include "core/progress.h"
#include "core/run_control.h"
#include "core/run_homes.h"
#include "core/thread_budget.h"
#include "core/thread_tuner.h"

using namespace tern_test;

namespace {

// Acquires on a thread of its own (grants are per calling thread) and holds until released.
struct HeldGrant {
  std::promise<void> release;
  std::thread thread;
  int threads = 0;
  explicit HeldGrant(int want) {
    std::promise<int> got;
    auto granted = got.get_future();
    auto until = release.get_future();
    thread = std::thread([want, &got, until = std::move(until)]() mutable {
      Status waited;
      ThreadBudget::Grant g = ThreadBudget::global().acquire(want, false, nullptr, &waited);
      got.set_value(g.threads());
      until.wait();
    });
    threads = granted.get();
  }
  ~HeldGrant() {
    release.set_value();
    thread.join();
  }
};

#if defined(TERN_HAVE_OPENMP)
// The threads this process has now (/proc/self/task). Only the OpenMP tests count them.
int process_threads() {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task"))
    n += !e.is_directory() ? 0 : 1;
  return n;
}
#endif

// MatMuls then a Conv: OpenBLAS under Tern's split and oneDNN in one run.
std::unique_ptr<Session> matmul_conv_session(int* out_id) {
  Builder b;
  int x = b.input("x", {128, 256});
  int w = b.constant("w", random_f32({256, 256}, 1, -0.1f, 0.1f));
  int h = b.node("MatMul", {b.node("MatMul", {x, w}), w});
  int img = b.node("Reshape", {h, b.constant("r", make_i64({4}, {1, 8, 64, 64}))});
  Attribute p;
  p.kind = Attribute::Kind::kInts;
  p.ints = {1, 1, 1, 1};
  *out_id = b.node("Conv", {img, b.constant("k", random_f32({8, 8, 3, 3}, 2))}, attrs1("pads", p));
  return b.session({*out_id});
}

// The matmul_conv session at 2 threads with adaptive threads off and `flag` set to `value`, its
// input and its output's name (the caller holds a FlagRestore).
struct TwoThreadRun {
  std::unique_ptr<Session> s;
  Tensor x;
  std::string out;
};
TwoThreadRun two_thread_matmul_conv(const char* flag, const char* value) {
  REQUIRE(tern_set_num_threads(2) == TERN_OK);
  REQUIRE(tern_flag_set("cpu.adaptive_threads", "0") == TERN_OK);
  REQUIRE(tern_flag_set(flag, value) == TERN_OK);
  int y = 0;
  TwoThreadRun r;
  r.s = matmul_conv_session(&y);
  r.x = random_f32({128, 256}, 3);
  r.out = r.s->model().graph().value_name(y);
  return r;
}

}  // namespace

TEST_SUITE("concurrency") {
  TEST_CASE("thread budget: grants share it across calling threads; nested runs take nothing") {
    FlagRestore restore;
    REQUIRE(tern_flag_set("cpu.thread_budget", "3") == TERN_OK);
    CHECK(ThreadBudget::global().capacity() == 3);
    const int before = ThreadBudget::global().stats().in_use;
    REQUIRE(before == 0);
    {
      HeldGrant a(2);
      CHECK(a.threads == 2);
      HeldGrant b(2);
      CHECK(b.threads == 1);  // one left
      HeldGrant c(2);
      CHECK(c.threads == 1);  // none left: its calling thread alone
      CHECK(ThreadBudget::global().stats().in_use == 4);
      // On this thread: an outer grant, then a nested one that takes nothing more.
    }
    CHECK(ThreadBudget::global().stats().in_use == 0);
    {
      Status waited;
      ThreadBudget::Grant outer = ThreadBudget::global().acquire(2, false, nullptr, &waited);
      CHECK(outer.threads() == 2);
      ThreadBudget::Grant nested = ThreadBudget::global().acquire(3, false, nullptr, &waited);
      CHECK(nested.threads() == 2);  // the outer grant's threads, not more
      CHECK(ThreadBudget::global().stats().in_use == 2);
      outer.shrink_to(1);
      CHECK(ThreadBudget::global().stats().in_use == 1);
      CHECK(outer.try_grow(5) == 2);  // inter-op workers: what is free
      CHECK(outer.threads() == 1);
      CHECK(ThreadBudget::global().stats().in_use == 3);
    }
    CHECK(ThreadBudget::global().stats().in_use == 0);
  }

  TEST_CASE("thread budget: the wait policy waits for a free thread, within the deadline") {
    FlagRestore restore;
    REQUIRE(tern_flag_set("cpu.thread_budget", "1") == TERN_OK);
    int y = 0;
    auto s = matmul_conv_session(&y);
    Tensor xin = random_f32({128, 256}, 3);
    const std::string out = s->model().graph().value_name(y);
    FlagOverrides wait;
    REQUIRE(wait.set("cpu.thread_budget_wait", "1", FlagScope::kRun).is_ok());
    {
      HeldGrant hold(1);  // the whole budget
      const auto t0 = RunControl::Clock::now();
      RunControl control(nullptr, 30, t0);
      std::vector<Tensor> res;
      Status st = s->run({"x"}, {&xin}, {out}, &res, &wait, nullptr, &control);
      CHECK(st.code() == Code::kDeadlineExceeded);
      MESSAGE(st.message());
      CHECK(st.message().find("cpu.thread_budget") != std::string::npos);
      // Without the wait policy the run goes ahead on its own thread.
      run(*s, {"x"}, {&xin}, out);
    }
    run(*s, {"x"}, {&xin}, out, &wait);  // free again: no wait
    CHECK(ThreadBudget::global().stats().in_use == 0);
  }

  TEST_CASE("thread budget: 8 calling threads keep at most the budget's cores busy") {
    if (std::thread::hardware_concurrency() < 2) return;
    FlagRestore restore;
    REQUIRE(tern_set_num_threads(2) == TERN_OK);
    REQUIRE(tern_flag_set("cpu.adaptive_threads", "0") == TERN_OK);
    int y = 0;
    auto s = matmul_conv_session(&y);
    Tensor xin = random_f32({128, 256}, 3);
    const std::string out = s->model().graph().value_name(y);
    REQUIRE(tern_flag_set("cpu.thread_budget", "1") == TERN_OK);
    const Tensor want = run(*s, {"x"}, {&xin}, out)[0];  // 1 thread: the budget
    FlagOverrides wait;
    REQUIRE(wait.set("cpu.thread_budget_wait", "1", FlagScope::kRun).is_ok());
    std::atomic<bool> stop{false};
    std::atomic<int> runs{0}, wrong{0}, failed{0};
    std::vector<std::thread> callers;
    const double c0 = process_cpu_ms();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 8; ++i) {
      callers.emplace_back([&] {
        while (!stop.load()) {
          std::vector<Tensor> res;
          Status st = s->run({"x"}, {&xin}, {out}, &res, &wait);
          if (!st.is_ok()) {
            ++failed;
          } else if (!bitwise_equal(res[0], want)) {
            ++wrong;
          }
          ++runs;
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    stop = true;
    for (auto& t : callers) t.join();
    const double wall =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const double busy = (process_cpu_ms() - c0) / wall;
    MESSAGE("budget 1, 8 calling threads: ", runs.load(), " runs, busy cores ", busy);
    CHECK(failed.load() == 0);
    CHECK(wrong.load() == 0);  // every run used the 1-thread plan's kernels
    CHECK(runs.load() > 8);
    // Without the budget: 8 threads on every core there is. What a calling thread does outside
    // its run (checking inputs, the test's comparison) is not the budget's; under the sanitizers
    // (the clang builds) that part is many times slower.
#if defined(__clang__)
    CHECK(busy < 1.7);
#else
    CHECK(busy < 1.3);
#endif
    CHECK(ThreadBudget::global().stats().in_use == 0);
    CHECK(ThreadBudget::global().stats().waited > 0);
  }

  TEST_CASE("cpu.spin_us 0: nothing spins after a run returns") {
    if (std::thread::hardware_concurrency() < 2) return;
#if defined(__clang__)
    // The clang (sanitizer) builds load LLVM's libomp beside the libgomp Debian's oneDNN links:
    // the release of a run's team reaches libomp's threads, not the libgomp team oneDNN ran on.
    MESSAGE("skipped: two OpenMP runtimes in this build");
    return;
#endif
    FlagRestore restore;
    TwoThreadRun r = two_thread_matmul_conv("cpu.spin_us", "0");
    std::unique_ptr<Session>& s = r.s;
    const Tensor& xin = r.x;
    const std::string& out = r.out;
    double idle = 1e9;
    for (int round = 0; round < 3; ++round) {  // the least of three: other tests' threads may spin
      run(*s, {"x"}, {&xin}, out);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      const double c0 = process_cpu_ms();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      idle = std::min(idle, process_cpu_ms() - c0);
    }
    MESSAGE("CPU time of the process 1-21 ms after a 2-thread run: ", idle, " ms");
    CHECK(idle < 3);              // libgomp's default spin would keep a core busy for milliseconds
    run(*s, {"x"}, {&xin}, out);  // the next run starts its workers again
  }

  TEST_CASE("a plan for another thread count reuses packed weights only on an optimized kernel") {
    // GoogLeNet's 10x10 convolutions: planned at 2 threads, then at 1 (the budget or the tuner
    // gave fewer), oneDNN took the 2-thread plan's packed weight layout only with its reference
    // kernel (1.4 s a run instead of 13 ms).
    FlagRestore restore;
    Builder b;
    int x = b.input("x", {1, 144, 10, 10});
    Attribute p;
    p.kind = Attribute::Kind::kInts;
    p.ints = {1, 1, 1, 1};
    int y = b.node("Conv", {x, b.constant("w", random_f32({288, 144, 3, 3}, 5, -0.1f, 0.1f))},
                   attrs1("pads", p));
    int z = b.node("Conv", {y, b.constant("w1", random_f32({192, 288, 1, 1}, 6, -0.1f, 0.1f))});
    auto s = b.session({z});
    Tensor xin = random_f32({1, 144, 10, 10}, 7);
    const std::string out = s->model().graph().value_name(z);
    std::vector<Tensor> results;
    for (int threads : {2, 1}) {
      FlagOverrides f;
      f.set(FlagId::kNumThreads, threads);
      f.set(FlagId::kCpuAdaptiveThreads, 0);
      for (const std::string& k : kernels(*s, {{1, 144, 10, 10}}, &f)) {
        CHECK_MESSAGE(k.rfind("onednn(ref)", 0) != 0, "threads=", threads, ": ", k);
      }
      results.push_back(run(*s, {"x"}, {&xin}, out, &f)[0]);
    }
    CHECK(max_abs_diff(results[0], results[1]) < 1e-3f);
  }

  TEST_CASE("run homes: a body runs on a home, with its status, exception and memory budget") {
    const std::thread::id caller = std::this_thread::get_id();
    std::thread::id ran_on;
    bool home_inside = false, nested_in_place = false;
    auto budget = std::make_shared<MemoryBudget>(1000);
    BudgetScope scope(budget);
    // Progress reports reach the caller's sink on the caller's thread (the C API promises it).
    std::vector<std::thread::id> reported_on;
    const ProgressSink sink = [&](const char*, size_t, size_t) {
      reported_on.push_back(std::this_thread::get_id());
    };
    ProgressScope progress(&sink);
    const Status st = RunHomes::global().run([&]() -> Status {
      ran_on = std::this_thread::get_id();
      home_inside = RunHomes::on_home();
      // A run nested in a run on a home runs in place.
      const std::thread::id outer = std::this_thread::get_id();
      (void)RunHomes::global().run([&]() -> Status {
        nested_in_place = std::this_thread::get_id() == outer;
        return Status::ok();
      });
      if (MemoryBudget::current() != budget) return internal_error("no budget scope on the home");
      for (size_t i = 0; i <= 3; ++i) report_progress("prepare kernels", i, 3);
      return invalid_argument("from the home");
    });
    CHECK(RunHomes::global().started() >= 1);
    CHECK(ran_on != caller);
    CHECK(home_inside);
    CHECK_FALSE(RunHomes::on_home());
    CHECK(nested_in_place);
    REQUIRE(reported_on.size() == 4);
    for (const std::thread::id& id : reported_on) CHECK(id == caller);
    CHECK(st.code() == Code::kInvalidArgument);
    CHECK(st.message() == "from the home");
#if !defined(TERN_LIBRARY_NO_EXCEPTIONS)  // (TERN_MINIMAL: an exception there ends the process)
    CHECK_THROWS_AS(RunHomes::global().run([]() -> Status { throw std::runtime_error("thrown"); }),
                    std::runtime_error);
#endif
    // The home that threw serves the next run.
    CHECK(RunHomes::global().run([] { return Status::ok(); }).is_ok());
  }

  TEST_CASE("run homes: application threads share the homes' OpenMP teams, not one each") {
#if !defined(TERN_HAVE_OPENMP)
    MESSAGE("no OpenMP in this build: runs stay on their thread, nothing to share");
#else
    if (std::thread::hardware_concurrency() < 2) return;
    FlagRestore restore;
    TwoThreadRun r = two_thread_matmul_conv("cpu.thread_budget", "2");
    std::unique_ptr<Session>& s = r.s;
    const Tensor& xin = r.x;
    const std::string& out = r.out;
    const Tensor want = run(*s, {"x"}, {&xin}, out)[0];
    // Six application threads, one after another, each running the session with 2 threads and
    // then staying alive: with a team per calling thread the process would gain a team thread
    // for each; on the homes it gains none past the first.
    const int before = process_threads();
    std::vector<std::thread> callers;
    std::vector<std::promise<void> > release(6);
    std::atomic<int> wrong{0};
    for (int i = 0; i < 6; ++i) {
      std::promise<void> ran;
      auto ran_f = ran.get_future();
      callers.emplace_back([&, i, ran = std::move(ran)]() mutable {
        if (!bitwise_equal(run(*s, {"x"}, {&xin}, out)[0], want)) ++wrong;
        ran.set_value();
        release[static_cast<size_t>(i)].get_future().wait();
      });
      ran_f.wait();
    }
    const int grown = process_threads() - before;
    for (auto& done : release) done.set_value();
    for (auto& t : callers) t.join();
    MESSAGE("threads gained with 6 live application threads that ran at 2 threads: ", grown);
    CHECK(wrong.load() == 0);
    CHECK(grown <= 6 + 2);  // the callers, and at most a home and its team thread more
#endif
  }

  TEST_CASE("weights are packed on one thread: a session made off the homes starts no team") {
#if !defined(TERN_HAVE_OPENMP)
    MESSAGE("no OpenMP in this build");
#elif defined(__clang__)
    // The clang (sanitizer) builds load LLVM's libomp beside the libgomp Debian's oneDNN links:
    // the thread count Tern sets reaches libomp, not the libgomp team oneDNN reorders on.
    MESSAGE("skipped: two OpenMP runtimes in this build");
#else
    if (std::thread::hardware_concurrency() < 2) return;
    // A team's idle workers spin through the rest of the creation, contending with it for the
    // cores. On a thread of its own (which has no team yet) and off the homes, the creation must
    // leave the thread count as it was; the first run then starts the team.
    FlagRestore restore;
    REQUIRE(tern_flag_set("cpu.run_homes", "0") == TERN_OK);
    // Made once here first: threads that libraries start (and end) on their first use are not
    // counted below.
    two_thread_matmul_conv("cpu.spin_us", "200");
    int made = -1, ran = -1;
    bool failed = false;
    std::thread([&] {
      try {  // (a failed REQUIRE throws: reported below, not out of the thread)
        TwoThreadRun r;
        const int before = process_threads();
        r = two_thread_matmul_conv("cpu.spin_us", "200");
        made = process_threads() - before;
        run(*r.s, {"x"}, {&r.x}, r.out);
        ran = process_threads() - before;
      } catch (...) {
        failed = true;
      }
    }).join();
    REQUIRE_FALSE(failed);
    CHECK(made == 0);
    CHECK(ran >= 1);  // the run's team: what the check above would have seen
#endif
  }

  TEST_CASE(
      "small constants are folded on one thread: a session made off the homes starts no team") {
#if !defined(TERN_HAVE_OPENMP)
    MESSAGE("no OpenMP in this build");
#elif defined(__clang__)
    MESSAGE("skipped: two OpenMP runtimes in this build");  // as in the test above
#else
    if (std::thread::hardware_concurrency() < 2) return;
    // Two constants of 256 KiB added at creation (as a model's masks and tables are): a parallel
    // Add would give the creating thread its team, whose worker spins through the creation.
    FlagRestore restore;
    REQUIRE(tern_flag_set("cpu.run_homes", "0") == TERN_OK);
    REQUIRE(tern_set_num_threads(2) == TERN_OK);
    REQUIRE(tern_flag_set("cpu.adaptive_threads", "0") == TERN_OK);
    int y = 0;
    auto make = [&y] {
      Builder b;
      const int x = b.input("x", {64, 1024});
      const int c = b.node("Add", {b.constant("a", random_f32({64, 1024}, 4)),
                                   b.constant("b", random_f32({64, 1024}, 5))});
      y = b.node("Add", {x, c});
      return b.session({y});
    };
    make();  // threads that libraries start on their first use are not counted below
    const Tensor x = random_f32({64, 1024}, 6);
    int made = -1, ran = -1;
    bool failed = false;
    std::thread([&] {
      try {
        const int before = process_threads();
        auto s = make();
        made = process_threads() - before;
        run(*s, {"x"}, {&x}, s->model().graph().value_name(y));
        ran = process_threads() - before;
      } catch (...) {
        failed = true;
      }
    }).join();
    REQUIRE_FALSE(failed);
    CHECK(made == 0);
    CHECK(ran >= 1);  // the same Add in the run starts the team: what the check above would see
#endif
  }

  TEST_CASE("adaptive threads: fewer while faster, back when the cores come free") {
    // No idle readings (as where /proc/stat cannot be read): tries are made by count alone.
    auto unknown = [] { return IdleCpuMeter::Reading{}; };
    ThreadTuner t(unknown);
    const std::vector<Shape> shapes = {{1, 3}};
    // Contended from the start: 4 threads take 10 ms, the calling thread on its core for 6 of
    // them; 2 take 6 ms (5 on the core), 1 takes 8.
    auto contended = [](int threads) { return threads == 4 ? 10.0 : threads == 2 ? 6.0 : 8.0; };
    auto cpu = [](int threads) { return threads == 4 ? 6.0 : threads == 2 ? 5.0 : 8.0; };
    int at2 = 0;
    for (int i = 0; i < 400; ++i) {
      const int c = t.choose(shapes, 4);
      REQUIRE((c == 4 || c == 2 || c == 1));
      if (i >= 300 && c == 2) ++at2;
      t.record(shapes, 4, c, contended(c), cpu(c));
    }
    CHECK(at2 >= 90);  // settled on 2, probing now and then
    CHECK(t.levels(shapes).front().threads == 2);
    // The cores come free: 4 threads take 3 ms.
    int at4 = 0;
    for (int i = 0; i < 1500; ++i) {
      const int c = t.choose(shapes, 4);
      if (i >= 1400 && c == 4) ++at4;
      t.record(shapes, 4, c, c == 4 ? 3.0 : contended(c), c == 4 ? 3.0 : cpu(c));
    }
    CHECK(at4 >= 90);
    CHECK(t.levels(shapes).front().threads == 4);
    // Uncontended at the count asked for, with the calling thread on its core: no probes at all
    // (a probe at a new count plans for it).
    ThreadTuner quiet(unknown);
    for (int i = 0; i < 300; ++i) {
      const int c = quiet.choose(shapes, 2);
      REQUIRE(c == 2);
      quiet.record(shapes, 2, c, 4.0 + (i % 7) * 0.1, 4.0);
    }
    // Contention begins: runs take 3x as long, the calling thread on its core a third of them.
    int at1 = 0;
    for (int i = 0; i < 40; ++i) {
      const int c = quiet.choose(shapes, 2);
      if (i >= 10 && c == 1) ++at1;
      quiet.record(shapes, 2, c, c == 2 ? 12.0 : 5.0, c == 2 ? 4.0 : 5.0);
    }
    CHECK(at1 >= 26);  // moved to 1 thread within a few runs (a try of 2 takes two runs)
    CHECK(t.choose(shapes, 1) == 1);  // one thread asked: nothing to choose
    // A different num_threads starts over.
    CHECK(t.choose(shapes, 2) == 2);
  }

  TEST_CASE("adaptive threads: a try of more threads is measured after a run that wakes them") {
    // After runs at fewer threads the extra workers sleep, and the first run back at more wakes
    // them at every parallel region: 2 threads take 3 ms warm, 9 ms in that first run; 1 takes 5.
    auto unknown = [] { return IdleCpuMeter::Reading{}; };
    ThreadTuner t(unknown);
    const std::vector<Shape> shapes = {{4, 2}};
    int last = 2, at2 = 0;
    auto ms = [&](int threads) { return threads == 1 ? 5.0 : last == 1 ? 9.0 : 3.0; };
    // A contended stretch sends the session to 1 thread.
    for (int i = 0; i < 20; ++i) {
      const int c = t.choose(shapes, 2);
      t.record(shapes, 2, c, c == 2 ? 12.0 : 5.0, c == 2 ? 4.0 : 5.0);
      last = c;
    }
    REQUIRE(t.levels(shapes).front().threads == 1);
    // The contention is gone: the session goes back to 2 threads.
    for (int i = 0; i < 300; ++i) {
      const int c = t.choose(shapes, 2);
      if (i >= 200 && c == 2) ++at2;
      t.record(shapes, 2, c, ms(c), ms(c));
      last = c;
    }
    CHECK(at2 >= 95);
    CHECK(t.levels(shapes).front().threads == 2);
  }

  TEST_CASE("adaptive threads: one slow run does not send the session to fewer threads") {
    // 2 threads take 0.8 ms, 1 takes 1.35 (SqueezeNet on 2 cores); the first runs are slower
    // (page faults), and every 40th run at 2 threads takes 2.7 (a vCPU preempted once): each such
    // run sets off a try of 1 thread, which must not be taken.
    auto unknown = [] { return IdleCpuMeter::Reading{}; };
    ThreadTuner t(unknown);
    const std::vector<Shape> shapes = {{1, 3, 160, 160}};
    int at1 = 0, runs_at2 = 0;
    for (int i = 0; i < 400; ++i) {
      const int c = t.choose(shapes, 2);
      double ms = 1.35;
      if (c == 2) {
        ++runs_at2;
        ms = runs_at2 == 2 ? 3.0 : runs_at2 == 3 ? 1.5 : runs_at2 % 40 == 0 ? 2.7 : 0.8;
      }
      if (i >= 100 && c == 1) ++at1;
      t.record(shapes, 2, c, ms, ms);
    }
    MESSAGE("runs at 1 thread of the last 300: ", at1);
    CHECK(at1 <= 30);  // the tries only: a run or two each
    CHECK(t.levels(shapes).front().threads == 2);
  }

  TEST_CASE("adaptive threads: fewer threads at once while other processes hold the CPUs") {
    // Two CPUs; another process keeps `others` threads busy. The kernel shares the CPUs between
    // the runnable threads: this process's last run's threads and the other's.
    int others = 1, last = 2;
    ThreadTuner t([&] {
      IdleCpuMeter::Reading r{true, true};
      const int runnable = last + others;
      r.own_cpus = runnable <= 2 ? last : 2.0 * last / runnable;
      r.idle_cpus = runnable <= 2 ? 2.0 - runnable : 0.0;
      return r;
    });
    const std::vector<Shape> shapes = {{2, 5}};
    // 2 threads sharing a core with the other process wait at every parallel region.
    auto ms = [&](int threads) { return threads == 2 ? (others > 0 ? 30.0 : 4.0) : 8.0; };
    auto cpu = [&](int threads) { return threads == 2 && others > 0 ? 8.0 : ms(threads); };
    auto loop = [&](int runs, int from, int* at2) {
      for (int i = 0; i < runs; ++i) {
        const int c = t.choose(shapes, 2);
        if (i >= from && c == 2) ++*at2;
        t.record(shapes, 2, c, ms(c), cpu(c));
        last = c;
      }
    };
    int at2 = 0;
    loop(400, 0, &at2);
    CHECK(at2 == 0);                // contended from the start: 1 thread from the first run
    CHECK(t.yields() == 1);         // one move
    CHECK(t.skipped_probes() > 0);  // no try of 2 while they cannot fit
    others = 0;                     // the other core comes free: back to 2, and there it stays
    int later2 = 0;
    loop(400, 300, &later2);
    CHECK(later2 == 100);
    others = 1;  // contention again: the next run moves
    int contended2 = 0;
    loop(50, 0, &contended2);
    CHECK(contended2 == 0);
    CHECK(t.yields() == 2);
    // Busy cores of this process's own (other sessions, other application threads) are not
    // contention: with nothing idle but all of it used by the process, 2 threads stay.
    ThreadTuner own([] { return IdleCpuMeter::Reading{true, true, 0.0, 2.0}; });
    for (int i = 0; i < 100; ++i) {
      REQUIRE(own.choose(shapes, 2) == 2);
      own.record(shapes, 2, 2, 4.0, 4.0);
    }
    CHECK(own.yields() == 0);
  }

  TEST_CASE("adaptive threads in a session: every run recorded at the count it ran, results kept") {
    // The test binary runs with adaptive threads off (tests/test_main.cpp); here a session turns
    // them on. Which counts it uses depends on this machine's load at the time, so the check is
    // the wiring: each successful run is recorded at a level of 2 or 1 thread, and every run's
    // output matches the 1-thread run's to float rounding.
    FlagRestore restore;
    REQUIRE(tern_set_num_threads(1) == TERN_OK);
    int y = 0;
    std::unique_ptr<Session> one = matmul_conv_session(&y);
    const Tensor x = random_f32({128, 256}, 3);
    const std::string out = one->model().graph().value_name(y);
    const Tensor ref = run(*one, {"x"}, {&x}, out)[0];
    REQUIRE(tern_set_num_threads(2) == TERN_OK);
    REQUIRE(tern_flag_set("cpu.adaptive_threads", "1") == TERN_OK);
    std::unique_ptr<Session> s = matmul_conv_session(&y);
    constexpr int kRuns = 24;
    for (int i = 0; i < kRuns; ++i) {
      const Tensor got = run(*s, {"x"}, {&x}, out)[0];
      REQUIRE(max_abs_diff(got, ref) < 1e-3f);
    }
    const std::vector<ThreadTuner::LevelStats> levels = s->thread_tuner().levels({{128, 256}});
    REQUIRE(levels.size() == 2);
    int64_t recorded = 0;
    for (const ThreadTuner::LevelStats& l : levels) {
      CHECK((l.threads == 2 || l.threads == 1));
      recorded += l.runs;
    }
    CHECK(recorded == kRuns);
  }

  TEST_CASE("idle CPU readings: /proc/stat's per-CPU idle and iowait of the process's CPUs") {
    const std::string stat =
        "cpu  100 0 50 9000 20 0 0 0 0 0\n"
        "cpu0 50 0 25 4000 10 0 0 0 0 0\n"
        "cpu1 50 0 25 5000 10 0 0 0 0 0\n"
        "cpu12 1 2 3 700 7\n"
        "intr 12345 0 0\n";
    CHECK(idle_jiffies_of(stat, {0}) == 4010);
    CHECK(idle_jiffies_of(stat, {0, 1}) == 9020);
    CHECK(idle_jiffies_of(stat, {1, 12}) == 5010 + 707);
    CHECK(idle_jiffies_of(stat, {3}) == -1);  // none of them listed
    CHECK(idle_jiffies_of("", {0}) == -1);
    CHECK(idle_jiffies_of("cpu0 garbage\n", {0}) == -1);
    // The real counters: a first reading starts the window, one too soon is not ready, and a
    // ready one lies between 0 and the process's CPUs.
    IdleCpuMeter m;
    const IdleCpuMeter::Reading first = m.read(50);
    if (!first.known) {
      MESSAGE("/proc/stat cannot be read here: the real-counter part skips");
      return;
    }
    CHECK_FALSE(first.ready);
    CHECK_FALSE(m.read(50).ready);
    // This thread busy for 80 ms: the process's own CPUs count it.
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(80);
    volatile uint64_t spins = 0;
    while (std::chrono::steady_clock::now() < until) spins = spins + 1;
    const IdleCpuMeter::Reading r = m.read(50);
    const double cpus = static_cast<double>(process_cpu_affinity().size());
    CHECK(r.ready);
    CHECK(r.idle_cpus >= 0);
    CHECK(r.idle_cpus <= cpus + 0.5);
    CHECK(r.own_cpus > 0.05);  // a busy thread gets some of a CPU even on a loaded machine
    CHECK(r.own_cpus <= cpus + 0.5);
    CHECK(r.free_cpus() <= cpus + 0.5);
  }
}
