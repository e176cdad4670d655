// conv1d_panel: dilated 1-D Conv/FusedConv on plain activations as one panel GEMM per image
// (backends/cpu/kernels/conv1d_panel.cpp), against the reference convolution.
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
  TEST_CASE("conv1d_panel: dilated 1-D FusedConv on plain activations matches the reference") {
    PanelTrials trials;
    if (trials.cap.empty()) return;
    INFO("seed ", trials.seed);
    auto pick = [&](int lo, int hi) { return trials.pick(lo, hi); };
    const std::vector<std::pair<std::vector<std::string>, std::vector<float>>> epilogues = {
        {{}, {}},       {{"Relu"}, {}},           {{"Sigmoid"}, {}},
        {{"Tanh"}, {}}, {{"Clip"}, {0.0f, 6.0f}}, {{"Relu", "Affine"}, {2.0f, 0.5f}}};
    trials.each_isa([&](const char* isa) {
      for (int trial = 0; trial < 40; ++trial) {
        CAPTURE(isa);
        CAPTURE(trial);
        // Dilation 1 (oneDNN's direct kernel keeps it) in one trial of eight.
        const int64_t n = pick(1, 2), c = pick(1, 40), m = pick(1, 70), k = pick(1, 4);
        const int64_t dil = trial % 8 == 0 ? 1 : pick(2, 70), stride = pick(1, 3);
        const int64_t span = dil * (k - 1) + 1;
        const int64_t pb = pick(0, static_cast<int>(span - 1)),
                      pe = pick(0, static_cast<int>(span));
        const int64_t w = std::max<int64_t>(1, span - pb - pe) + pick(0, 150);
        const bool has_bias = pick(0, 2) > 0, has_sum = pick(0, 1) == 1;
        const auto& ep = epilogues[static_cast<size_t>(pick(0, 5))];
        CAPTURE(n);
        CAPTURE(c);
        CAPTURE(m);
        CAPTURE(w);
        CAPTURE(k);
        CAPTURE(dil);
        CAPTURE(stride);
        CAPTURE(pb);
        CAPTURE(pe);
        CAPTURE(has_bias);
        CAPTURE(has_sum);
        Attributes a;
        a.set("dilations", attr_ints({dil}));
        a.set("strides", attr_ints({stride}));
        a.set("pads", attr_ints({pb, pe}));
        a.set("activations", attr_strings(ep.first));
        a.set("activation_params", attr_floats(ep.second));
        const int64_t ow = (w + pb + pe - span) / stride + 1;
        Tensor x = random_f32({n, c, w}, trials.rng), wt = random_f32({m, c, k}, trials.rng);
        Tensor b =
            has_bias ? random_f32({m}, trials.rng) : Tensor::allocate(DType::kFloat32, {m}).value();
        Tensor z = random_f32({n, m, ow}, trials.rng);
        Tensor y = Tensor::allocate(DType::kFloat32, {n, m, ow}).value();
        std::vector<Tensor*> ins = {&x, &wt};
        if (has_bias || has_sum) ins.push_back(has_bias ? &b : nullptr);
        if (has_sum) ins.push_back(&z);
        FlagValues flags = Flags::global().resolve(nullptr, nullptr);
        flags.value[static_cast<size_t>(FlagId::kNumThreads)] = 2;
        auto fc = fused_conv_context(a, ins, 0, 0, &flags);
        OpContext& ctx = fc->ctx;
        REQUIRE(ctx.outputs[0].shape == Shape{n, m, ow});
        auto kernel = backends::get("cpu").value()->prepare(ctx);
        REQUIRE_MESSAGE(kernel.has_value(), kernel.status().message());
        const std::string name = (*kernel)->name();
        // (Undilated: only a pointwise one over a panel's pixels or more.)
        const bool pointwise = k == 1 && stride == 1 && pb == 0 && pe == 0 && ow >= 16;
        CHECK((name.rfind("conv1d_panel", 0) == 0) == (dil > 1 || pointwise));
        KernelArgs args;
        for (Tensor* t : ins) args.inputs.push_back(t);
        args.outputs.push_back(&y);
        Tensor workspace;
        const std::vector<float> two = run_at_two_and_one(**kernel, args, &workspace);
        const std::vector<float> ref = fused_conv_reference(ctx, x, wt, b, has_sum ? &z : nullptr);
        Comparison cmp = compare(two.data(), ref.data(), ref.size(), 1e-4, 1e-4);
        CHECK_MESSAGE(cmp.mismatches == 0, name, ": max abs ", cmp.max_abs);
      }
    });
  }

  TEST_CASE("conv1d_panel: pointwise FusedConv of any rank on plain activations") {
    PanelTrials trials;
    if (trials.cap.empty()) return;
    INFO("seed ", trials.seed);
    auto pick = [&](int lo, int hi) { return trials.pick(lo, hi); };
    const std::vector<Epilogue>& epilogues = fused_epilogues();
    for (int trial = 0; trial < 30; ++trial) {
      CAPTURE(trial);
      // 2-D mostly, 3-D in one trial of three; fewer than 16 pixels in one of six (another
      // kernel's: squeeze-and-excitation's one pixel).
      const bool three = trial % 3 == 2, few = trial % 6 == 5;
      const int64_t n = pick(1, 2), c = pick(1, 70), m = pick(1, 70);
      Shape xs = {n, c}, ws = {m, c}, ys = {n, m};
      const std::vector<int64_t> dims =
          three ? std::vector<int64_t>{pick(1, 3), pick(1, 6), pick(1, 7)}
                : std::vector<int64_t>{pick(1, 13), pick(1, 17)};
      int64_t pixels = 1;
      for (int64_t d : dims) {
        xs.push_back(few ? 1 : d);
        ws.push_back(1);
        ys.push_back(few ? 1 : d);
        pixels *= few ? 1 : d;
      }
      const bool has_sum = pick(0, 1) == 1;
      const auto& ep =
          epilogues[static_cast<size_t>(pick(0, static_cast<int>(epilogues.size()) - 1))];
      CAPTURE(shape_str(xs));
      CAPTURE(m);
      CAPTURE(has_sum);
      Attributes a;
      a.set("activations", attr_strings(ep.first));
      a.set("activation_params", attr_floats(ep.second));
      Tensor x = random_f32(xs, trials.rng), wt = random_f32(ws, trials.rng);
      Tensor b = random_f32({m}, trials.rng), z = random_f32(ys, trials.rng);
      std::vector<Tensor*> ins = {&x, &wt, &b};
      if (has_sum) ins.push_back(&z);
      FlagValues flags = Flags::global().resolve(nullptr, nullptr);
      flags.value[static_cast<size_t>(FlagId::kNumThreads)] = 2;
      auto fc = fused_conv_context(a, ins, 0, 0, &flags);
      OpContext& ctx = fc->ctx;
      auto kernel = backends::get("cpu").value()->prepare(ctx);
      REQUIRE_MESSAGE(kernel.has_value(), kernel.status().message());
      const std::string name = (*kernel)->name();
      CHECK_MESSAGE((name.rfind("conv1d_panel", 0) == 0) == (pixels >= 16), name);
      if (name.rfind("conv1d_panel", 0) != 0) continue;
      Tensor y = Tensor::allocate(DType::kFloat32, ys).value();
      KernelArgs args;
      for (Tensor* t : ins) args.inputs.push_back(t);
      args.outputs.push_back(&y);
      Tensor workspace;
      const std::vector<float> two = run_at_two_and_one(**kernel, args, &workspace);
      const std::vector<float> ref = fused_conv_reference(ctx, x, wt, b, has_sum ? &z : nullptr);
      Comparison cmp = compare(two.data(), ref.data(), ref.size(), 1e-4, 1e-4);
      CHECK_MESSAGE(cmp.mismatches == 0, name, ": max abs ", cmp.max_abs);
    }
  }
}
