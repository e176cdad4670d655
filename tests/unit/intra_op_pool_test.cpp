// Tern's own intra-op pool (core/intra_op_pool.h), which parallel_for uses in builds without
// OpenMP: every chunk runs once, slots are per thread, exceptions reach the caller, nested regions
// run serially, concurrent callers share the pool, and idle threads stop using CPU.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "backends_util.h"
#include "core/intra_op_pool.h"

using namespace tern_test;

namespace {

struct Counts {
  std::vector<std::atomic<int>> runs;
  std::vector<std::atomic<int>> in_slot;  // calls running with each slot now
  std::atomic<int> slot_clash{0}, bad_slot{0};
  int threads;
  Counts(size_t chunks, int t) : runs(chunks), in_slot(static_cast<size_t>(t)), threads(t) {}
};

void count_chunk(void* p, int64_t c, int slot) {
  auto& k = *static_cast<Counts*>(p);
  if (slot < 0 || slot >= k.threads) {
    ++k.bad_slot;
    return;
  }
  if (k.in_slot[static_cast<size_t>(slot)].fetch_add(1) != 0) ++k.slot_clash;
  volatile double x = 0;
  for (int i = 0; i < 2000; ++i) x = x + i * 0.5;
  ++k.runs[static_cast<size_t>(c)];
  k.in_slot[static_cast<size_t>(slot)].fetch_sub(1);
}

}  // namespace

TEST_SUITE("concurrency") {
  TEST_CASE("intra-op pool: each chunk once, slots per thread, from several callers at once") {
    auto check = [](int64_t chunks, int threads) {
      Counts k(static_cast<size_t>(chunks), threads);
      IntraOpPool::global().run(chunks, threads, count_chunk, &k);
      for (int64_t c = 0; c < chunks; ++c) REQUIRE(k.runs[static_cast<size_t>(c)].load() == 1);
      CHECK(k.slot_clash.load() == 0);
      CHECK(k.bad_slot.load() == 0);
    };
    check(1, 4);
    check(7, 2);
    check(1000, 3);
    std::vector<std::thread> callers;
    for (int i = 0; i < 4; ++i) {
      callers.emplace_back([&] {
        for (int r = 0; r < 50; ++r) check(64, 2);
      });
    }
    for (auto& t : callers) t.join();
    CHECK(IntraOpPool::global().size() >= 1);
  }

  TEST_CASE("intra-op pool: a chunk's exception reaches the caller; nested regions run serially") {
    struct Ctx {
      std::atomic<int> ran{0};
    } ctx;
    auto throwing = [](void* p, int64_t c, int) {
      ++static_cast<Ctx*>(p)->ran;
      if (c == 5) throw std::runtime_error("chunk 5");
    };
#if !defined(TERN_LIBRARY_NO_EXCEPTIONS)  // (TERN_MINIMAL: an exception there ends the process)
    CHECK_THROWS_WITH(IntraOpPool::global().run(16, 2, throwing, &ctx), "chunk 5");
    CHECK(ctx.ran.load() == 16);  // the others still ran
#else
    (void)throwing;
#endif
    struct Nested {
      std::atomic<int> inner{0};
      std::atomic<int> not_serial{0};
    } nested;
    auto outer = [](void* p, int64_t, int) {
      auto& n = *static_cast<Nested*>(p);
      if (!in_intra_op_region()) ++n.not_serial;
      auto inner = [](void* q, int64_t, int slot) {
        auto& m = *static_cast<Nested*>(q);
        if (slot != 0) ++m.not_serial;  // ran on the calling thread only
        ++m.inner;
      };
      IntraOpPool::global().run(4, 2, inner, p);
    };
    IntraOpPool::global().run(8, 2, outer, &nested);
    CHECK(nested.inner.load() == 32);
    CHECK(nested.not_serial.load() == 0);
    CHECK_FALSE(in_intra_op_region());
  }

  TEST_CASE("intra-op pool: idle threads stop using CPU within cpu.spin_us") {
    FlagRestore restore;
    REQUIRE(tern_flag_set("cpu.spin_us", "2000") == TERN_OK);
    Counts k(256, 2);
    IntraOpPool::global().run(256, 2, count_chunk, &k);
    // 10 ms after the region: the spin (2 ms) is over and the pool sleeps.
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const double c0 = process_cpu_ms();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const double idle = process_cpu_ms() - c0;
    MESSAGE("CPU time of the process while idle for 100 ms: ", idle, " ms");
    CHECK(idle < 10);
  }
}
