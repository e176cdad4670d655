// global_mean: GlobalAveragePool on plain, 8/16-blocked and channels-last activations
// (backends/cpu/kernels/global_avg_pool.cpp), against the reference pooling.
#include <doctest/doctest.h>

#include <random>
#include <string>

#include "c_api.h"
#include "unit/cpu_kernel_harness.h"

using namespace tern;
using namespace tern_test;
using namespace tern_test::cpu_kernels;

TEST_SUITE("cpu_kernels") {
  TEST_CASE("global_mean: GlobalAveragePool in every layout matches the reference") {
    PanelTrials trials;
    if (trials.cap.empty()) return;
    INFO("seed ", trials.seed);
    auto pick = [&](int lo, int hi) { return trials.pick(lo, hi); };
    for (int trial = 0; trial < 40; ++trial) {
      CAPTURE(trial);
      // 4-D in the four layouts; plain 3-D and 5-D in one trial of four.
      const bool other_rank = trial % 4 == 3;
      const int64_t n = pick(1, 3), c = pick(1, 90);
      Shape xs = {n, c};
      if (other_rank && trial % 8 == 3) {
        xs.push_back(pick(1, 200));
      } else if (other_rank) {
        xs.insert(xs.end(), {pick(1, 4), pick(1, 9), pick(1, 9)});
      } else {
        xs.insert(xs.end(), {pick(1, 15), pick(1, 15)});
      }
      const int64_t layouts[] = {0, 8, 16, c};
      const int64_t block = other_rank ? 0 : layouts[pick(0, 3)];
      CAPTURE(shape_str(xs));
      CAPTURE(block);
      Tensor x = random_f32(xs, trials.rng);
      // Blocked inputs take whole blocks: channels padded (the padding holds garbage here, which
      // must not reach the means).
      Tensor xin = x;
      if (block == 8 || block == 16) {
        const int64_t cp = (c + block - 1) / block * block;
        Tensor padded = random_f32({n, cp, xs[2], xs[3]}, trials.rng);
        const int64_t hw = xs[2] * xs[3];
        for (int64_t i = 0; i < n; ++i)
          for (int64_t k = 0; k < c; ++k)
            for (int64_t p = 0; p < hw; ++p)
              padded.data<float>()[((i * (cp / block) + k / block) * hw + p) * block + k % block] =
                  x.data<float>()[(i * c + k) * hw + p];
        xin = padded;
      } else if (block == c) {
        xin = to_blocked(x, c);
      }
      Attributes none;
      auto k = inferred("GlobalAveragePool", none, {&x}, {false}, static_cast<int>(block));
      auto kernel = backends::get("cpu").value()->prepare(k->ctx);
      REQUIRE_MESSAGE(kernel.has_value(), kernel.status().message());
      CHECK(std::string((*kernel)->name()) == "global_mean");
      const Tensor one = run_kernel(**kernel, k->ctx, {&xin}, 1);
      const Tensor two = run_kernel(**kernel, k->ctx, {&xin}, 2);
      CHECK(std::memcmp(one.raw(), two.raw(), static_cast<size_t>(one.numel()) * 4) == 0);
      const Tensor want = run_reference("GlobalAveragePool", none, {&x});
      check_close(one, std::vector<float>(want.data<float>(), want.data<float>() + want.numel()),
                  "GlobalAveragePool " + shape_str(xs));
    }
  }
}
