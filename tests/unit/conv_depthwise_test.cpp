// conv_depthwise: depthwise Conv/FusedConv over activations in channel blocks of 8 or 16
// (backends/cpu/kernels/conv_depthwise.cpp), against the reference convolution: its square
// kernels' tiles and its general ones, 1-D to 3-D, both instruction sets.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "c_api.h"
#include "ops/conv.h"
#include "ops/fused_conv.h"
#include "unit/cpu_kernel_harness.h"

using namespace tern;
using namespace tern_test;
using namespace tern_test::cpu_kernels;

TEST_SUITE("cpu_kernels") {
  TEST_CASE("conv_depthwise: depthwise FusedConv matches the reference in blocks of 8 and 16") {
    PanelTrials trials;
    if (trials.cap.empty()) return;
    INFO("seed ", trials.seed);
    auto pick = [&](int lo, int hi) { return trials.pick(lo, hi); };
    const std::vector<Epilogue>& epilogues = fused_epilogues();
    trials.each_isa([&](const char* isa) {
      for (int trial = 0; trial < 60; ++trial) {
        CAPTURE(isa);
        CAPTURE(trial);
        // Mostly 2-D; 1-D and 3-D in one trial of five each. Half the 2-D ones (and half the 3-D
        // ones, one deep) are square kernels of 3 or 5 at stride 1 or 2 (dilated along the row at
        // stride 1) over rows of 8 pixels or more: the square kernels' tiles. Eight-lane tiles
        // (AVX2, blocks of 8) leave rows under 8 pixels and dilated ones to oneDNN: the others'
        // rows are mostly undilated, and 8 pixels or more in one trial of two.
        const int spatial = trial % 5 == 1 ? 1 : trial % 5 == 3 ? 3 : 2;
        const bool square = (spatial == 2 && trial % 2 == 0) || (spatial == 3 && trial % 10 == 3);
        const int64_t n = pick(1, 2), c = pick(2, 70);
        const int64_t block = pick(0, 1) ? 16 : 8;
        const bool eight = block == 8 || std::string(isa) == "AVX2";
        std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end, in;
        const int64_t k2 = pick(0, 1) ? 5 : 3, s2 = pick(1, 2);
        const int64_t d2 = s2 == 1 ? pick(1, 2) : 1;
        for (int d = 0; d < spatial; ++d) {
          // (A 3-D square one is one deep.)
          const int64_t k =
              square ? (spatial == 3 && d == 0 ? 1 : k2) : pick(1, spatial == 3 ? 3 : 7);
          const bool row = d == spatial - 1;
          const int64_t dil = square                           ? (row ? d2 : pick(1, 2))
                              : eight && row && pick(0, 3) > 0 ? 1
                                                               : pick(1, 3);
          const int64_t span = dil * (k - 1) + 1;
          kernel.push_back(k);
          dilations.push_back(dil);
          strides.push_back(square ? (row ? s2 : pick(1, 2)) : pick(1, 3));
          pads_begin.push_back(pick(0, static_cast<int>(k - 1)));
          pads_end.push_back(pick(0, static_cast<int>(k - 1)));
          const int64_t least = std::max<int64_t>(1, span - pads_begin.back() - pads_end.back());
          const int64_t s = strides.back();
          const int64_t more = row && (square || pick(0, 1)) ? 8 * s * dil : 0;
          in.push_back(least + more + pick(0, spatial == 3 ? 5 : spatial == 2 ? 18 : 60));
        }
        std::vector<int64_t> pads = pads_begin;
        pads.insert(pads.end(), pads_end.begin(), pads_end.end());
        const bool has_bias = pick(0, 2) > 0;
        const auto& ep =
            epilogues[static_cast<size_t>(pick(0, static_cast<int>(epilogues.size()) - 1))];
        CAPTURE(spatial);
        CAPTURE(n);
        CAPTURE(c);
        CAPTURE(block);
        CAPTURE(has_bias);
        Attributes a;
        a.set("kernel_shape", attr_ints(kernel));
        a.set("strides", attr_ints(strides));
        a.set("dilations", attr_ints(dilations));
        a.set("pads", attr_ints(pads));
        a.set("group", attr_int(c));
        a.set("activations", attr_strings(ep.first));
        a.set("activation_params", attr_floats(ep.second));
        Shape xs = {n, c}, ws = {c, 1};
        xs.insert(xs.end(), in.begin(), in.end());
        ws.insert(ws.end(), kernel.begin(), kernel.end());
        Tensor x = random_f32(xs, trials.rng), wt = random_f32(ws, trials.rng);
        Tensor b =
            has_bias ? random_f32({c}, trials.rng) : Tensor::allocate(DType::kFloat32, {c}).value();
        std::vector<Tensor*> ins = {&x, &wt};
        if (has_bias) ins.push_back(&b);
        FlagValues flags = Flags::global().resolve(nullptr, nullptr);
        flags.value[static_cast<size_t>(FlagId::kNumThreads)] = 2;
        auto fc =
            fused_conv_context(a, ins, static_cast<int>(block), static_cast<int>(block), &flags);
        OpContext& ctx = fc->ctx;
        const Shape ys = ctx.outputs[0].shape;
        CAPTURE(shape_str(x.shape()));
        CAPTURE(shape_str(ys));
        auto made = backends::get("cpu").value()->prepare(ctx);
        REQUIRE_MESSAGE(made.has_value(), made.status().message());
        const Kernel& kernel_ref = **made;
        const bool ours = std::string(kernel_ref.name()).rfind("conv_depthwise", 0) == 0;
        if (eight && (dilations.back() > 1 || ys.back() < 8)) {
          CHECK_MESSAGE(!ours, kernel_ref.name());
          continue;
        }
        REQUIRE_MESSAGE(ours, kernel_ref.name());
        // The input and output with their blocks' padding; the output poisoned (NaN) so that an
        // unwritten element shows.
        Tensor xb = to_layout(x, block);
        Shape padded = ys;
        padded[1] = (c + block - 1) / block * block;
        Tensor y = Tensor::allocate(DType::kFloat32, padded).value();
        std::fill_n(y.data<float>(), y.numel(), std::numeric_limits<float>::quiet_NaN());
        KernelArgs args;
        args.inputs = {&xb, &wt};
        if (has_bias) args.inputs.push_back(&b);
        args.outputs.push_back(&y);
        Tensor workspace;
        const std::vector<float> two = run_at_two_and_one(kernel_ref, args, &workspace);
        int64_t padding_nonzero = 0;
        const std::vector<float> got = from_layout(y, block, c, &padding_nonzero);
        CHECK(padding_nonzero == 0);
        const std::vector<float> ref = fused_conv_reference(ctx, x, wt, b, nullptr);
        REQUIRE(got.size() == ref.size());
        Comparison cmp = compare(got.data(), ref.data(), ref.size(), 1e-4, 1e-4);
        CHECK_MESSAGE(cmp.mismatches == 0, kernel_ref.name(), ": max abs ", cmp.max_abs);
        // A second kernel finds the packed weights (as a saved optimized model carries them) and
        // uses them in place, with the same result.
        check_packed_weights_reused(kernel_ref, ctx, args, two);
      }
    });
  }

  TEST_CASE("conv_depthwise: declines what it does not compute") {
    PanelTrials trials;
    if (trials.cap.empty()) return;
    std::mt19937 rng(11);
    FlagValues flags = Flags::global().resolve(nullptr, nullptr);
    auto kernel_for = [&](int64_t c, int64_t m, int block, int out_block, bool residual) {
      Attributes a;
      a.set("kernel_shape", attr_ints({3, 3}));
      a.set("pads", attr_ints({1, 1, 1, 1}));
      a.set("group", attr_int(c));
      a.set("activations", attr_strings({}));
      a.set("activation_params", attr_floats({}));
      Tensor x = random_f32({1, c, 12, 12}, rng), w = random_f32({m, 1, 3, 3}, rng);
      Tensor b = random_f32({m}, rng), z = random_f32({1, m, 12, 12}, rng);
      std::vector<Tensor*> ins = {&x, &w, &b};
      if (residual) ins.push_back(&z);
      auto fc = fused_conv_context(a, ins, block, out_block, &flags);
      auto k = backends::get("cpu").value()->prepare(fc->ctx);
      REQUIRE_MESSAGE(k.has_value(), k.status().message());
      return std::string((*k)->name());
    };
    auto ours = [](const std::string& name) { return name.rfind("conv_depthwise", 0) == 0; };
    CHECK(ours(kernel_for(32, 32, 16, 16, false)));
    CHECK(ours(kernel_for(24, 24, 8, 8, false)));
    CHECK(ours(kernel_for(16, 16, 16, 16, false)));   // one block: channels-last's bytes
    CHECK(!ours(kernel_for(32, 64, 16, 16, false)));  // two output channels a group
    CHECK(!ours(kernel_for(32, 32, 16, 16, true)));   // a residual
    CHECK(!ours(kernel_for(32, 32, 0, 0, false)));    // plain activations
    CHECK(!ours(kernel_for(32, 32, 8, 16, false)));   // blocks that differ
  }
}
