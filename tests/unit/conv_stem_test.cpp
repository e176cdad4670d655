// conv_stem: Conv/FusedConv over a few input channels of plain activations as panel GEMMs over
// gathered patches (backends/cpu/kernels/conv_stem.cpp), against the reference convolution, in
// every output layout the planner gives it.
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
  TEST_CASE("conv_stem: FusedConv over few input channels matches the reference in each layout") {
    PanelTrials trials;
    if (trials.cap.empty()) return;
    INFO("seed ", trials.seed);
    auto pick = [&](int lo, int hi) { return trials.pick(lo, hi); };
    const std::vector<Epilogue>& epilogues = fused_epilogues();
    trials.each_isa([&](const char* isa) {
      for (int trial = 0; trial < 40; ++trial) {
        CAPTURE(isa);
        CAPTURE(trial);
        // Mostly 2-D; 1-D (a waveform) and 3-D (a clip) in one trial of four each.
        const int spatial = trial % 4 == 1 ? 1 : trial % 4 == 3 ? 3 : 2;
        const int64_t n = pick(1, 2), ic = pick(1, 4), oc = pick(1, 70);
        std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end, in;
        for (int d = 0; d < spatial; ++d) {
          const int64_t k = pick(1, spatial == 3 ? 3 : 7), dil = pick(1, 2);
          const int64_t span = dil * (k - 1) + 1;
          kernel.push_back(k);
          dilations.push_back(dil);
          strides.push_back(pick(1, 3));
          pads_begin.push_back(pick(0, static_cast<int>(k - 1)));
          pads_end.push_back(pick(0, static_cast<int>(k - 1)));
          const int64_t least = std::max<int64_t>(1, span - pads_begin.back() - pads_end.back());
          in.push_back(least + pick(0, spatial == 3 ? 6 : spatial == 2 ? 20 : 90));
        }
        std::vector<int64_t> pads = pads_begin;
        pads.insert(pads.end(), pads_end.begin(), pads_end.end());
        const bool has_bias = pick(0, 2) > 0;
        const auto& ep =
            epilogues[static_cast<size_t>(pick(0, static_cast<int>(epilogues.size()) - 1))];
        // The output's layout: plain, channels-last, or blocks of 8 or 16.
        const int64_t layouts[] = {0, oc, 8, 16};
        const int64_t block = layouts[pick(0, 3)];
        CAPTURE(spatial);
        CAPTURE(n);
        CAPTURE(ic);
        CAPTURE(oc);
        CAPTURE(block);
        CAPTURE(has_bias);
        Attributes a;
        a.set("kernel_shape", attr_ints(kernel));
        a.set("strides", attr_ints(strides));
        a.set("dilations", attr_ints(dilations));
        a.set("pads", attr_ints(pads));
        a.set("activations", attr_strings(ep.first));
        a.set("activation_params", attr_floats(ep.second));
        Shape xs = {n, ic}, ws = {oc, ic};
        xs.insert(xs.end(), in.begin(), in.end());
        ws.insert(ws.end(), kernel.begin(), kernel.end());
        Tensor x = random_f32(xs, trials.rng), wt = random_f32(ws, trials.rng);
        Tensor b = has_bias ? random_f32({oc}, trials.rng)
                            : Tensor::allocate(DType::kFloat32, {oc}).value();
        std::vector<Tensor*> ins = {&x, &wt};
        if (has_bias) ins.push_back(&b);
        FlagValues flags = Flags::global().resolve(nullptr, nullptr);
        flags.value[static_cast<size_t>(FlagId::kNumThreads)] = 2;
        auto fc = fused_conv_context(a, ins, 0, static_cast<int>(block), &flags);
        OpContext& ctx = fc->ctx;
        const Shape ys = ctx.outputs[0].shape;
        CAPTURE(shape_str(x.shape()));
        CAPTURE(shape_str(ys));
        auto made = backends::get("cpu").value()->prepare(ctx);
        REQUIRE_MESSAGE(made.has_value(), made.status().message());
        const Kernel& kernel_ref = **made;
        const std::string name = kernel_ref.name();
        // (Plain outputs of a dilated 1-D one, or of a pointwise one over 16 pixels or more, may
        // go to conv1d_panel, registered alike.)
        int64_t out_pixels = 1;
        for (size_t d = 2; d < ys.size(); ++d) out_pixels *= ys[d];
        const bool pointwise =
            std::all_of(kernel.begin(), kernel.end(), [](int64_t k) { return k == 1; }) &&
            std::all_of(strides.begin(), strides.end(), [](int64_t s) { return s == 1; }) &&
            std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; }) &&
            out_pixels >= 16;
        const bool stem = name.rfind("conv_stem", 0) == 0;
        const bool panel_1d = block == 0 && ((spatial == 1 && dilations[0] > 1) || pointwise) &&
                              name.rfind("conv1d_panel", 0) == 0;
        CHECK_MESSAGE((stem || panel_1d), name);
        if (!stem) continue;
        // The output with its blocks' padding, poisoned so that an unwritten element shows.
        Shape padded = ys;
        if (block > 0) padded[1] = (oc + block - 1) / block * block;
        Tensor y = Tensor::allocate(DType::kFloat32, padded).value();
        KernelArgs args;
        for (Tensor* t : ins) args.inputs.push_back(t);
        args.outputs.push_back(&y);
        const int64_t ws_floats = static_cast<int64_t>(kernel_ref.workspace_bytes() / 4) + 1;
        Tensor workspace = Tensor::allocate(DType::kFloat32, {ws_floats}).value();
        args.workspace = workspace.raw();
        const float nan = std::numeric_limits<float>::quiet_NaN();
        auto poison = [&] {
          std::fill_n(workspace.data<float>(), ws_floats, nan);
          std::fill_n(y.data<float>(), y.numel(), nan);
        };
        poison();
        REQUIRE(kernel_ref.run(args, ExecContext{2}).is_ok());
        const std::vector<float> two(y.data<float>(), y.data<float>() + y.numel());
        poison();
        REQUIRE(kernel_ref.run(args, ExecContext{1}).is_ok());
        CHECK(std::memcmp(two.data(), y.raw(), two.size() * 4) == 0);  // thread-independent
        int64_t padding_nonzero = 0;
        const std::vector<float> got = from_layout(y, block, oc, &padding_nonzero);
        CHECK(padding_nonzero == 0);
        const std::vector<float> ref = fused_conv_reference(ctx, x, wt, b, nullptr);
        REQUIRE(got.size() == ref.size());
        Comparison cmp = compare(got.data(), ref.data(), ref.size(), 1e-4, 1e-4);
        CHECK_MESSAGE(cmp.mismatches == 0, name, ": max abs ", cmp.max_abs);
        // A second kernel finds the packed weights (as a saved optimized model carries them) and
        // uses them in place, with the same result.
        check_packed_weights_reused(kernel_ref, ctx, args, two);
      }
    });
  }

  TEST_CASE("conv_stem: declines what it does not compute") {
    PanelTrials trials;
    if (trials.cap.empty()) return;
    std::mt19937 rng(7);
    FlagValues flags = Flags::global().resolve(nullptr, nullptr);
    auto kernel_for = [&](int64_t ic, int x_block, bool residual, int64_t group,
                          int out_block = 16) {
      Attributes a;
      a.set("kernel_shape", attr_ints({3, 3}));
      a.set("pads", attr_ints({1, 1, 1, 1}));
      a.set("group", attr_int(group));
      a.set("activations", attr_strings({}));
      a.set("activation_params", attr_floats({}));
      Tensor x = random_f32({1, ic, 12, 12}, rng), w = random_f32({16, ic / group, 3, 3}, rng);
      Tensor b = random_f32({16}, rng), z = random_f32({1, 16, 12, 12}, rng);
      std::vector<Tensor*> ins = {&x, &w, &b};
      if (residual) ins.push_back(&z);
      auto fc = fused_conv_context(a, ins, x_block, out_block, &flags);
      auto k = backends::get("cpu").value()->prepare(fc->ctx);
      REQUIRE_MESSAGE(k.has_value(), k.status().message());
      return std::string((*k)->name());
    };
    CHECK(kernel_for(3, 0, false, 1).rfind("conv_stem", 0) == 0);
    CHECK(kernel_for(4, 0, false, 1).rfind("conv_stem", 0) == 0);
    CHECK(kernel_for(5, 0, false, 1).rfind("conv_stem", 0) != 0);   // past an image's channels
    CHECK(kernel_for(4, 0, true, 1).rfind("conv_stem", 0) != 0);    // a residual
    CHECK(kernel_for(4, 0, false, 2).rfind("conv_stem", 0) != 0);   // two groups
    CHECK(kernel_for(3, 16, false, 1).rfind("conv_stem", 0) != 0);  // a blocked input
  }
}
