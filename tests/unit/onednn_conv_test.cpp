// backends/cpu/onednn: oneDNN's Conv kernel against the naive reference in ops/ (random shapes
// with a printed seed), and which implementation it picks: optimized ones for narrow groups,
// taps in padding and plain 1-D / 3-D activations, in every pair of layouts.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "backends/registry.h"
#include "backends_util.h"
#include "core/op_registry.h"
#include "graph_builder.h"
#include "ops/conv.h"
#include "ops/fused_conv.h"
#include "test_util.h"
#include "unit/cpu_kernel_harness.h"

using namespace tern;
using namespace tern_test;
using namespace tern_test::cpu_kernels;

TEST_SUITE("cpu_kernels") {
  TEST_CASE("oneDNN Conv matches the reference over random shapes") {
    if (!tern_onednn_is_available()) {
      MESSAGE("skipped: built without oneDNN");
      return;
    }
    const unsigned seed = std::random_device{}();
    INFO("seed ", seed);
    std::mt19937 rng(seed);
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    for (int trial = 0; trial < 40; ++trial) {
      const int64_t group = pick(0, 2) == 0 ? 1 : pick(1, 3);
      const bool depthwise = pick(0, 3) == 0;
      // (One group over at most 4 channels is conv_stem's: past those here.)
      const int64_t cg = depthwise ? 1 : group == 1 ? pick(5, 8) : pick(1, 4);
      const int64_t mg = depthwise ? 1 : pick(1, 4);
      const int64_t g = depthwise ? pick(2, 8) : group;
      const int64_t k = pick(1, 3), stride = pick(1, 2), dil = pick(1, 2), pad = pick(0, 2);
      const int64_t h = pick(k * dil, 12), w = pick(k * dil, 12);
      Tensor x = random_f32({pick(1, 2), g * cg, h, w}, rng);
      Tensor wt = random_f32({g * mg, cg, k, k}, rng);
      Tensor b = random_f32({g * mg}, rng);
      Attributes a;
      a.set("group", attr_int(g));
      a.set("strides", attr_ints({stride, stride}));
      a.set("dilations", attr_ints({dil, dil}));
      a.set("pads", attr_ints({pad, pad, pad, 0}));
      Prepared p = run_cpu("Conv", a, {&x, &wt, &b}, {false, true, true});
      // (A pointwise one of one group over 16 pixels or more is conv1d_panel's: its pixels in a
      // row.)
      const bool row = g == 1 && k == 1 && stride == 1 && pad == 0 && h * w >= 16;
      CHECK_MESSAGE(p.kernel.rfind(row ? "conv1d_panel" : "onednn", 0) == 0, p.kernel);
      RefContext ref_ctx("Conv", a, {&x, &wt, &b});
      auto params = ops::parse_conv(ref_ctx.ctx).value();
      std::vector<float> ref(static_cast<size_t>(numel(params.y)));
      ops::conv_reference(params, x.data<float>(), wt.data<float>(), b.data<float>(), ref.data());
      check_close(p.outputs[0], ref,
                  "conv " + shape_str(x.shape()) + " w " + shape_str(wt.shape()));
    }
  }

  TEST_CASE("oneDNN Conv: narrow groups and taps in padding run on optimized implementations") {
    if (!tern_onednn_is_available() || std::string(tern_cpu_get_capability()) == "DEFAULT") {
      MESSAGE("skipped: needs oneDNN and AVX2 or better");
      return;
    }
    std::mt19937 rng(91);
    struct Case {
      int64_t c, m, group, k, dil, pad, hw;
      const char* what;
      int64_t pad_end = -1;  // -1: pad
    };
    // Blocked layouts have no direct oneDNN kernel for groups narrower than a block, nor for a
    // dilation whose taps all fall into padding but the centre one (cut to a 1x1 convolution).
    const Case cases[] = {
        {32, 32, 8, 3, 1, 1, 10, "4 channels per group (ResNeXt)"},
        {48, 48, 6, 3, 1, 1, 9, "8 per group (RegNetY)"},
        {48, 96, 2, 3, 1, 1, 8, "24 in, 48 out per group"},
        {48, 48, 24, 3, 1, 1, 8, "2 per group"},
        {32, 64, 32, 3, 1, 1, 8, "depthwise, multiplier 2"},
        {32, 16, 1, 3, 24, 24, 14, "dilation 24 on 14x14: only the centre tap"},
        {32, 16, 1, 3, 12, 12, 14, "dilation 12 on 14x14"},
        {16, 16, 1, 3, 5, 6, 4, "dilation 5 with pad 6 on 4x4: taps cut, pads left"},
        // The trailing taps cut, the first kept: the kernel shrinks with no tap offset.
        {16, 16, 1, 3, 1, 0, 1, "a 1x1 map padded (0, 2) for 3x3", 2},
        {16, 32, 1, 3, 1, 0, 2, "a 2x2 map padded (0, 1) for 3x3", 1},
    };
    for (const Case& cs : cases) {
      Tensor x = random_f32({1, cs.c, cs.hw, cs.hw}, rng);
      Tensor wt = random_f32({cs.m, cs.c / cs.group, cs.k, cs.k}, rng);
      Tensor b = random_f32({cs.m}, rng);
      Attributes a;
      a.set("group", attr_int(cs.group));
      a.set("dilations", attr_ints({cs.dil, cs.dil}));
      const int64_t pe = cs.pad_end < 0 ? cs.pad : cs.pad_end;
      a.set("pads", attr_ints({cs.pad, cs.pad, pe, pe}));
      RefContext ref_ctx("Conv", a, {&x, &wt, &b});
      auto params = ops::parse_conv(ref_ctx.ctx).value();
      std::vector<float> ref(static_cast<size_t>(numel(params.y)));
      ops::conv_reference(params, x.data<float>(), wt.data<float>(), b.data<float>(), ref.data());
      for (int block : {0, 8, 16}) {
        if (block && (cs.c % block || cs.m % block)) continue;
        Tensor xin = block ? to_blocked(x, block) : x;
        Prepared p = run_cpu("Conv", a, {&xin, &wt, &b}, {false, true, true}, block, block);
        CHECK_MESSAGE(p.kernel.rfind("onednn", 0) == 0, cs.what, " block ", block, ": ", p.kernel);
        CHECK_MESSAGE(p.kernel != "onednn(ref)", cs.what, " block ", block);
        std::vector<float> got =
            block ? from_blocked(p.outputs[0], block) : values_f32(p.outputs[0]);
        Comparison c = compare(got.data(), ref.data(), ref.size(), 1e-4, 1e-4);
        CHECK_MESSAGE(c.mismatches == 0, cs.what, " block ", block, ": max abs ", c.max_abs);
      }
    }
  }

  TEST_CASE("oneDNN's depthwise batch-reduce kernel is named as the brgemm family it is") {
    if (!tern_onednn_is_available() || std::string(tern_cpu_get_capability()) != "AVX512") {
      MESSAGE("skipped: oneDNN's brdgmm depthwise kernel needs AVX-512");
      return;
    }
    // ShuffleNetV2's depthwise 3x3 on 58 channels, channels-last: oneDNN's brdgmm_dw, which the
    // profile named plain "onednn" (neither reference nor optimized to a reader).
    std::mt19937 rng(21);
    Tensor x = random_f32({1, 58, 20, 20}, rng);
    Tensor wt = random_f32({58, 1, 3, 3}, rng);
    Tensor b = random_f32({58}, rng);
    Attributes a;
    a.set("group", attr_int(58));
    a.set("pads", attr_ints({1, 1, 1, 1}));
    Tensor want = run_reference("Conv", a, {&x, &wt, &b});
    Tensor xin = to_blocked(x, 58);
    Prepared p = run_cpu("Conv", a, {&xin, &wt, &b}, {false, true, true}, 58, 58);
    CHECK_MESSAGE(p.kernel == "onednn(brgemm)", p.kernel);
    std::vector<float> got = from_blocked(p.outputs[0], 58);
    Comparison c = compare(got.data(), want.data<float>(), got.size(), 1e-4, 1e-4);
    CHECK_MESSAGE(c.mismatches == 0, "max abs ", c.max_abs);
  }

  TEST_CASE("oneDNN Conv between layouts: plain, 8/16-blocked and channels-last, either side") {
    if (!tern_onednn_is_available() || std::string(tern_cpu_get_capability()) == "DEFAULT") {
      MESSAGE("skipped: needs oneDNN and AVX2 or better");
      return;
    }
    std::mt19937 rng(77);
    for (int64_t k : {3, 1}) {
      Tensor x = random_f32({1, 32, 9, 7}, rng);
      Tensor wt = random_f32({24, 32, k, k}, rng);
      Tensor b = random_f32({24}, rng);
      Attributes a;
      a.set("pads", attr_ints({k / 2, k / 2, k / 2, k / 2}));
      RefContext ref_ctx("Conv", a, {&x, &wt, &b});
      auto params = ops::parse_conv(ref_ctx.ctx).value();
      std::vector<float> ref(static_cast<size_t>(numel(params.y)));
      ops::conv_reference(params, x.data<float>(), wt.data<float>(), b.data<float>(), ref.data());
      // Source blocks 0 (plain), 8, 16, 32 (channels-last); destination 0, 8, 24 (channels-last).
      for (int in_block : {0, 8, 16, 32}) {
        for (int out_block : {0, 8, 24}) {
          Tensor xin = in_block ? to_blocked(x, in_block) : x;
          Prepared p =
              run_cpu("Conv", a, {&xin, &wt, &b}, {false, true, true}, in_block, out_block);
          // 1x1 to channels-last from channels-last or plain: Tern's own conv1x1_nhwc goes
          // first; plain to plain: conv1d_panel (its pixels in a row); from 8/16-blocks or plain
          // to 8-blocks on AVX-512: conv1x1_avx512.
          const bool nhwc = k == 1 && (in_block == 32 || in_block == 0) && out_block == 24;
          const bool row = k == 1 && in_block == 0 && out_block == 0;
          const bool blocked = k == 1 && (in_block == 0 || in_block == 8 || in_block == 16) &&
                               out_block == 8 && std::string(tern_cpu_get_capability()) == "AVX512";
          CHECK_MESSAGE(p.kernel.rfind(nhwc      ? "conv1x1_nhwc"
                                       : row     ? "conv1d_panel"
                                       : blocked ? "conv1x1_avx512"
                                                 : "onednn",
                                       0) == 0,
                        p.kernel);
          std::vector<float> got =
              out_block ? from_blocked(p.outputs[0], out_block) : values_f32(p.outputs[0]);
          Comparison c = compare(got.data(), ref.data(), ref.size(), 1e-4, 1e-4);
          CHECK_MESSAGE(c.mismatches == 0, "k ", k, " in block ", in_block, " out block ",
                        out_block, ": max abs ", c.max_abs);
        }
      }
    }
  }

  TEST_CASE("oneDNN Conv on plain 1-D and 3-D activations runs a direct kernel, not im2col") {
    if (!tern_onednn_is_available() || std::string(tern_cpu_get_capability()) == "DEFAULT") {
      MESSAGE("skipped: needs oneDNN and AVX2 or better");
      return;
    }
    struct Case {
      Shape x, w;
      int64_t group;
      const char* what;
    };
    const Case cases[] = {
        {{1, 16, 4, 10, 10}, {32, 16, 3, 3, 3}, 1, "3-D 3x3x3 (R3D)"},
        {{1, 16, 4, 10, 10}, {16, 16, 3, 1, 1}, 1, "3-D 3x1x1 (R(2+1)D's temporal part)"},
        {{1, 24, 50}, {40, 24, 5}, 1, "1-D k5 (audio)"},
        {{1, 24, 50}, {24, 1, 3}, 24, "1-D depthwise"},
    };
    for (const char* cap : {"AVX512", "AVX2"}) {
      FlagRestore restore;
      REQUIRE(tern_flag_set("cpu.max_capability", cap) == TERN_OK);
      for (const Case& cs : cases) {
        Tensor x = random_f32(cs.x, 51u), wt = random_f32(cs.w, 52u),
               b = random_f32({cs.w[0]}, 53u);
        Attributes a;
        a.set("group", attr_int(cs.group));
        std::vector<int64_t> pads(2 * (cs.x.size() - 2));
        for (size_t i = 0; i < cs.x.size() - 2; ++i) {
          pads[i] = pads[i + cs.x.size() - 2] = (cs.w[2 + i] - 1) / 2;
        }
        a.set("pads", attr_ints(pads));
        Prepared p = run_cpu("Conv", a, {&x, &wt, &b}, {false, true, true});
        const std::string what = std::string(cs.what) + " at " + cap;
        CHECK_MESSAGE(p.kernel.rfind("onednn(", 0) == 0, what, ": ", p.kernel);
        // oneDNN 2.6 has a 1-D depthwise direct kernel on AVX-512 only (its ISA is capped once
        // per process, so the flag set here does not say which ran).
        if (cs.group == 1) CHECK_MESSAGE(p.kernel != "onednn(gemm)", what);
        CHECK_MESSAGE(p.kernel != "onednn(ref)", what);
        RefContext ref_ctx("Conv", a, {&x, &wt, &b});
        auto params = ops::parse_conv(ref_ctx.ctx).value();
        std::vector<float> ref(static_cast<size_t>(numel(params.y)));
        ops::conv_reference(params, x.data<float>(), wt.data<float>(), b.data<float>(), ref.data());
        check_close(p.outputs[0], ref, what);
      }
    }
  }

  TEST_CASE("cpu conv_layout: channels-last where channel counts would leave convolutions plain") {
    const Backend* cpu = backends::get("cpu").value();
    FlagValues flags = Flags::global().resolve(nullptr, nullptr);
    if (!tern_onednn_is_available() || std::string(tern_cpu_get_capability()) == "DEFAULT") {
      MESSAGE("skipped: needs oneDNN and AVX2 or better");
      return;
    }
    Node dense{"c", "Conv", "", {}, {0}, {}}, grouped = dense;
    grouped.attrs.set("group", attr_int(4));
    // Grouped convolutions of whole blocks: blocked (16 or 8).
    const int whole = cpu->conv_layout(
        flags, {{&dense, 3, 32, 4096}, {&grouped, 32, 32, 1024}, {&dense, 32, 64, 1024}});
    CHECK((whole == 8 || whole == 16));
    // ShuffleNet-like: most of the work on 58 / 116 channels.
    const int shuffle = cpu->conv_layout(flags, {{&dense, 3, 24, 4096},
                                                 {&grouped, 24, 24, 1024},
                                                 {&dense, 58, 58, 1024},
                                                 {&grouped, 116, 116, 256},
                                                 {&dense, 116, 116, 256}});
    CHECK(shuffle == Backend::kChannelsLast);
    // Squeeze-excite's narrow 1x1 convolutions on one pixel weigh nothing.
    const int se = cpu->conv_layout(
        flags,
        {{&grouped, 32, 32, 4096}, {&dense, 32, 4, 1}, {&dense, 4, 32, 1}, {&dense, 32, 64, 4096}});
    CHECK((se == 8 || se == 16));
  }
}
