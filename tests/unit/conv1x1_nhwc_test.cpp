// conv1x1_nhwc: pointwise Conv/FusedConv on channels-last activations as one panel GEMM
// (backends/cpu/kernels/conv1x1_nhwc.cpp), against the reference convolution.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "c_api.h"
#include "ops/conv.h"
#include "ops/fused_conv.h"
#include "unit/cpu_kernel_harness.h"

using namespace tern;
using namespace tern_test;
using namespace tern_test::cpu_kernels;

TEST_SUITE("cpu_kernels") {
  TEST_CASE(
      "conv1x1_nhwc: pointwise FusedConv on channels-last activations matches the reference") {
    PanelTrials trials;
    if (trials.cap.empty()) return;
    INFO("seed ", trials.seed);
    auto pick = [&](int lo, int hi) { return trials.pick(lo, hi); };
    const std::vector<Epilogue>& epilogues = fused_epilogues();
    trials.each_isa([&](const char* isa) {
      for (int trial = 0; trial < 30; ++trial) {
        const int64_t n = pick(1, 2), ic = pick(1, 70), oc = pick(1, 70), h = pick(1, 12),
                      w = pick(1, 12);
        const bool has_sum = pick(0, 1) == 1;
        const auto& ep =
            epilogues[static_cast<size_t>(pick(0, static_cast<int>(epilogues.size()) - 1))];
        CAPTURE(isa);
        CAPTURE(trial);
        CAPTURE(ic);
        CAPTURE(oc);
        Tensor x = random_f32({n, ic, h, w}, trials.rng),
               wt = random_f32({oc, ic, 1, 1}, trials.rng);
        Tensor b = random_f32({oc}, trials.rng), z = random_f32({n, oc, h, w}, trials.rng);
        Attributes a;
        a.set("activations", attr_strings(ep.first));
        a.set("activation_params", attr_floats(ep.second));
        // The input channels-last, or plain in one trial of three (transposed by the kernel).
        const bool plain_in = pick(0, 2) == 0;
        CAPTURE(plain_in);
        Tensor xl = plain_in ? x : to_blocked(x, ic), zl = to_blocked(z, oc);
        Tensor yl = Tensor::allocate(DType::kFloat32, {n, oc, h, w}).value();
        std::vector<Tensor*> ins = {&xl, &wt, &b};
        if (has_sum) ins.push_back(&zl);
        FlagValues flags = Flags::global().resolve(nullptr, nullptr);
        flags.value[static_cast<size_t>(FlagId::kNumThreads)] = 2;
        auto fc = fused_conv_context(a, ins, plain_in ? 0 : static_cast<int>(ic),
                                     static_cast<int>(oc), &flags);
        OpContext& ctx = fc->ctx;
        auto kernel = backends::get("cpu").value()->prepare(ctx);
        REQUIRE_MESSAGE(kernel.has_value(), kernel.status().message());
        const std::string name = (*kernel)->name();
        // (One channel in or out, or 8 or 16 on both sides: channels-last is also the 16- or
        // 8-blocked layout, which another kernel may take first.)
        const auto block_like = [](int64_t ch) { return ch == 8 || ch == 16; };
        const bool own_layout = ic > 1 && oc > 1 && !(block_like(ic) && block_like(oc));
        if (own_layout || (plain_in && h * w > 1)) {
          CHECK_MESSAGE(name.rfind("conv1x1_nhwc", 0) == 0, name);
        }
        KernelArgs args;
        for (Tensor* t : ins) args.inputs.push_back(t);
        args.outputs.push_back(&yl);
        Tensor workspace;  // (the plain input transposed)
        const std::vector<float> two = run_at_two_and_one(**kernel, args, &workspace);
        const std::vector<float> ref = fused_conv_reference(ctx, x, wt, b, has_sum ? &z : nullptr);
        const std::vector<float> got = from_blocked(yl, oc);
        Comparison c = compare(got.data(), ref.data(), ref.size(), 1e-4, 1e-4);
        CHECK_MESSAGE(c.mismatches == 0, shape_str(x.shape()), " -> ", oc, " sum ", has_sum, " (",
                      name, "): max abs ", c.max_abs);
        // A second kernel finds the packed weights (as a saved optimized model carries them) and
        // uses them in place, with the same result.
        check_packed_weights_reused(**kernel, ctx, args, two);
        // At one thread a residual goes to oneDNN's kernel on AVX2 only: on AVX-512 the kernel
        // (and so the packed layout) is the one of every thread count.
        if (has_sum && own_layout && tern_onednn_is_available()) {
          flags.value[static_cast<size_t>(FlagId::kNumThreads)] = 1;
          auto one = backends::get("cpu").value()->prepare(ctx);
          REQUIRE(one.has_value());
          const bool own = std::string((*one)->name()).rfind("conv1x1_nhwc", 0) == 0;
          CHECK(own == (std::string(isa) == "AVX512"));
        }
      }
    });
  }

  TEST_CASE("conv1x1_nhwc: plain activations of one pixel per image (squeeze-and-excitation)") {
    PanelTrials trials;
    if (trials.cap.empty()) return;
    INFO("seed ", trials.seed);
    auto pick = [&](int lo, int hi) { return trials.pick(lo, hi); };
    for (int trial = 0; trial < 20; ++trial) {
      // One pixel: NCHW is NHWC, so the kernel takes the plain layout; more pixels: it must not.
      const int64_t n = pick(1, 3), ic = pick(2, 300), oc = pick(2, 300);
      const bool one = trial % 4 != 3;
      const int64_t h = one ? 1 : pick(2, 5), w = one ? 1 : pick(1, 5);
      const bool has_sum = pick(0, 1) == 1;
      CAPTURE(trial);
      CAPTURE(ic);
      CAPTURE(oc);
      Tensor x = random_f32({n, ic, h, w}, trials.rng), wt = random_f32({oc, ic, 1, 1}, trials.rng);
      Tensor b = random_f32({oc}, trials.rng), z = random_f32({n, oc, h, w}, trials.rng);
      Attributes a;
      a.set("activations", attr_strings({"Sigmoid"}));
      a.set("activation_params", attr_floats({}));
      Tensor y = Tensor::allocate(DType::kFloat32, {n, oc, h, w}).value();
      std::vector<Tensor*> ins = {&x, &wt, &b};
      if (has_sum) ins.push_back(&z);
      FlagValues flags = Flags::global().resolve(nullptr, nullptr);
      flags.value[static_cast<size_t>(FlagId::kNumThreads)] = 2;
      auto fc = fused_conv_context(a, ins, 0, 0, &flags);
      OpContext& ctx = fc->ctx;
      auto kernel = backends::get("cpu").value()->prepare(ctx);
      REQUIRE_MESSAGE(kernel.has_value(), kernel.status().message());
      const std::string name = (*kernel)->name();
      // One pixel: an own kernel (this one, or the blocked one where it takes plain input), no
      // oneDNN primitive. More pixels: never this kernel.
      if (!one) {
        CHECK_MESSAGE(name.rfind("conv1x1_nhwc", 0) != 0, name);
        continue;  // (another kernel, with its own workspace: not run here)
      }
      CHECK_MESSAGE(name.rfind("conv1x1_", 0) == 0, name);
      KernelArgs args;
      for (Tensor* t : ins) args.inputs.push_back(t);
      args.outputs.push_back(&y);
      REQUIRE((*kernel)->run(args, ExecContext{2}).is_ok());
      const std::vector<float> ref = fused_conv_reference(ctx, x, wt, b, has_sum ? &z : nullptr);
      Comparison c = compare(y.data<float>(), ref.data(), ref.size(), 1e-4, 1e-4);
      CHECK_MESSAGE(c.mismatches == 0, shape_str(x.shape()), " -> ", oc, " sum ", has_sum, " (",
                    name, "): max abs ", c.max_abs);
    }
  }
}
