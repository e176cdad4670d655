// oneDNN's Winograd convolutions (cpu.conv.winograd): Tern's weight packing against oneDNN's own
// reorder into the layouts they choose, and which convolutions take them, from which layouts;
// 3-D convolutions one frame deep, which run as 2-D ones (Winograd among them).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <set>
#include <vector>

#if defined(TERN_HAVE_ONEDNN)
#include <dnnl.hpp>

#include "backends/cpu/onednn/winograd.h"
#endif
#include "c_api.h"
#include "ops/conv.h"
#include "unit/cpu_kernel_harness.h"

using namespace tern;
using namespace tern_test;
using namespace tern_test::cpu_kernels;

namespace {

// Whether oneDNN's Winograd kernels run here (AVX-512); says so when they do not.
bool winograd_cpu() {
  if (tern_onednn_is_available() && std::string(tern_cpu_get_capability()) == "AVX512") return true;
  MESSAGE("skipped: oneDNN's Winograd kernels need AVX-512");
  return false;
}

}  // namespace

TEST_SUITE("cpu_kernels") {
#if defined(TERN_HAVE_ONEDNN)
  TEST_CASE("Winograd weight packing matches oneDNN's reorder in every layout it picks") {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream stream(eng);
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    int packed = 0;
    std::set<int> formats;
    // (input channels, output channels, map): F(2x2,3x3) and F(4x4,3x3) kernels, channel counts
    // that are not whole blocks (padded with zeros), one block, many.
    const int cases[][3] = {{64, 64, 56},  {128, 128, 28}, {256, 256, 14},
                            {512, 512, 7}, {16, 16, 80},   {24, 40, 20},
                            {96, 96, 40},  {3, 32, 64},    {64, 128, 56}};
    for (const auto& c : cases) {
      const int ic = c[0], oc = c[1], h = c[2];
      CAPTURE(ic);
      CAPTURE(oc);
      CAPTURE(h);
      dnnl::memory::desc src({1, ic, h, h}, dt::f32, tag::nChw16c);
      dnnl::memory::desc dst({1, oc, h, h}, dt::f32, tag::nChw16c);
      dnnl::memory::desc any({oc, ic, 3, 3}, dt::f32, tag::any);
      std::optional<dnnl::convolution_forward::primitive_desc> pd;
      try {
        auto d = dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                 dnnl::algorithm::convolution_winograd, src, any,
                                                 dst, {1, 1}, {1, 1}, {1, 1});
        pd.emplace(d, eng);
      } catch (const dnnl::error&) {
        continue;  // no Winograd kernel on this CPU / for this shape
      }
      const dnnl::memory::desc wd = pd->weights_desc();
      if (wd.data.format_kind != dnnl_format_kind_wino) continue;
      std::vector<float> w(static_cast<size_t>(oc) * ic * 9);
      for (float& v : w) v = dist(rng);
      dnnl::memory::desc plain({oc, ic, 3, 3}, dt::f32, tag::oihw);
      dnnl::memory from(plain, eng, w.data());
      std::vector<float> want(wd.get_size() / sizeof(float) + 1, 0.0f);
      std::vector<float> got(want.size(), 7.0f);
      dnnl::memory to(wd, eng, want.data());
      dnnl::reorder(from, to).execute(stream, from, to);
      stream.wait();
      REQUIRE(tern::onednn::pack_winograd_weights(wd.data.format_desc.wino_desc, w.data(), oc, ic,
                                                  got.data()));
      float worst = 0, scale = 0;
      for (size_t i = 0; i + 1 < want.size(); ++i) {
        worst = std::max(worst, std::fabs(got[i] - want[i]));
        scale = std::max(scale, std::fabs(want[i]));
      }
      CHECK(worst <= 1e-6f * scale);
      CHECK(got.back() == 7.0f);  // nothing written past the layout's size
      ++packed;
      formats.insert(static_cast<int>(wd.data.format_desc.wino_desc.wino_format));
    }
    if (packed == 0) MESSAGE("skipped: oneDNN has no Winograd kernel on this CPU");
    // Which layouts oneDNN picks depends on the CPU (3 on the AVX-512 EPYC this was written on, 2
    // on a Sapphire Rapids): each one picked was checked above.
    if (packed > 0) MESSAGE("Winograd layouts checked: ", formats.size());
  }
#endif

  TEST_CASE("oneDNN Conv: Winograd for 3x3 stride-1 float32, from blocked and channels-last") {
    if (!winograd_cpu()) return;
    std::mt19937 rng(5);
    struct Case {
      int64_t c, m, hw, stride, block;
      bool wino;
      const char* what;
    };
    const Case cases[] = {
        {64, 64, 12, 1, 64, true, "channels-last, 64 channels: reordered to blocks"},
        {64, 96, 7, 1, 16, false, "16-blocked, 7x7 map: direct"},
        {32, 48, 20, 1, 16, true, "16-blocked, 20x20 map"},
        {32, 32, 20, 1, 32, true, "channels-last, 32 channels: reordered to blocks"},
        {16, 64, 14, 1, 16, true, "16 -> 64 channels, one block"},
        {12, 32, 20, 1, 12, false, "channels-last under 16 channels: direct"},
        {64, 64, 12, 2, 64, false, "stride 2: direct"},
        {64, 64, 16, 1, 16, true, "16-blocked, 16x16 map"},
    };
    for (const Case& cs : cases) {
      for (bool residual : {false, true}) {
        Tensor x = random_f32({1, cs.c, cs.hw, cs.hw}, rng);
        Tensor wt = random_f32({cs.m, cs.c, 3, 3}, rng);
        Tensor b = random_f32({cs.m}, rng);
        Attributes a;
        a.set("pads", attr_ints({1, 1, 1, 1}));
        a.set("strides", attr_ints({cs.stride, cs.stride}));
        RefContext ref_ctx("Conv", a, {&x, &wt, &b});
        auto params = ops::parse_conv(ref_ctx.ctx).value();
        std::vector<float> ref(static_cast<size_t>(numel(params.y)));
        ops::conv_reference(params, x.data<float>(), wt.data<float>(), b.data<float>(), ref.data());
        const int out_block = cs.block == cs.c ? static_cast<int>(cs.m) : 16;
        Tensor z = random_f32(params.y, rng);
        Tensor xin = to_blocked(x, cs.block);
        std::vector<Tensor*> ins = {&xin, &wt, &b};
        std::vector<bool> constant = {false, true, true};
        if (residual) {
          ins.push_back(&z);  // plain: the kernel reorders it into its destination
          constant.push_back(false);
          for (size_t i = 0; i < ref.size(); ++i) ref[i] += z.data<float>()[i];
        }
        Prepared p = run_cpu(residual ? "FusedConv" : "Conv", a, ins, constant,
                             static_cast<int>(cs.block), out_block);
        CHECK_MESSAGE((p.kernel.find("wino") != std::string::npos) == cs.wino, std::string(cs.what),
                      " residual ", residual, ": ", p.kernel);
        std::vector<float> got = from_blocked(p.outputs[0], out_block);
        Comparison c = compare(got.data(), ref.data(), ref.size(), 1e-4, 1e-4);
        CHECK_MESSAGE(c.mismatches == 0, std::string(cs.what), " residual ", residual, ": max abs ",
                      c.max_abs);
      }
    }
  }

  TEST_CASE("oneDNN Conv: Winograd with activations its kernels decline, run after it") {
    if (!winograd_cpu()) return;
    // SiLU, Sigmoid, Tanh and HardSwish (after an Affine) on a 48 -> 64 3x3 at 16x16 in 16-channel
    // blocks, with and without a residual: Winograd, the steps applied to its output in order.
    std::mt19937 rng(9);
    struct Act {
      std::vector<std::string> names;
      std::vector<float> params;
    };
    const Act acts[] = {{{"Swish"}, {1.0f}},
                        {{"Sigmoid"}, {}},
                        {{"Affine", "Tanh"}, {0.5f, -0.25f}},
                        {{"HardSwish"}, {}}};
    for (const Act& act : acts) {
      for (bool residual : {false, true}) {
        CAPTURE(act.names[0]);
        CAPTURE(residual);
        Tensor x = random_f32({1, 48, 16, 16}, rng);
        Tensor wt = random_f32({64, 48, 3, 3}, rng);
        Tensor b = random_f32({64}, rng);
        Attributes a;
        a.set("pads", attr_ints({1, 1, 1, 1}));
        a.set("activations", attr_strings(act.names));
        if (!act.params.empty()) a.set("activation_params", attr_floats(act.params));
        RefContext ref_ctx("Conv", a, {&x, &wt, &b});
        auto params = ops::parse_conv(ref_ctx.ctx).value();
        std::vector<float> ref(static_cast<size_t>(numel(params.y)));
        ops::conv_reference(params, x.data<float>(), wt.data<float>(), b.data<float>(), ref.data());
        Tensor z = random_f32(params.y, rng);
        if (residual) {
          for (size_t i = 0; i < ref.size(); ++i) ref[i] += z.data<float>()[i];
        }
        size_t p_at = 0;
        for (const std::string& n : act.names) {
          for (float& v : ref) {
            if (n == "Swish") v = v / (1.0f + std::exp(-act.params[0] * v));
            if (n == "Sigmoid") v = 1.0f / (1.0f + std::exp(-v));
            if (n == "Affine") v = v * act.params[p_at] + act.params[p_at + 1];
            if (n == "Tanh") v = std::tanh(v);
            if (n == "HardSwish") v = v * std::min(1.0f, std::max(0.0f, v / 6.0f + 0.5f));
          }
          if (n == "Affine") p_at += 2;
        }
        Tensor xin = to_blocked(x, 16);
        std::vector<Tensor*> ins = {&xin, &wt, &b};
        std::vector<bool> constant = {false, true, true};
        if (residual) {
          ins.push_back(&z);
          constant.push_back(false);
        }
        Prepared p = run_cpu("FusedConv", a, ins, constant, 16, 16);
        CHECK_MESSAGE(p.kernel.find("wino") != std::string::npos, p.kernel);
        std::vector<float> got = from_blocked(p.outputs[0], 16);
        Comparison c = compare(got.data(), ref.data(), ref.size(), 1e-4, 1e-4);
        CHECK_MESSAGE(c.mismatches == 0, "max abs ", c.max_abs);
      }
    }
  }

  TEST_CASE("oneDNN Conv: 3-D convolutions one frame deep run as 2-D ones over their frames") {
    if (!tern_onednn_is_available() || std::string(tern_cpu_get_capability()) == "DEFAULT") {
      MESSAGE("skipped: oneDNN's direct convolutions need AVX2 or AVX-512");
      return;
    }
    const bool avx512 = std::string(tern_cpu_get_capability()) == "AVX512";
    std::mt19937 rng(6);
    struct Case {
      Shape x;
      int64_t m;
      std::vector<int64_t> kernel, strides, pads;
      bool framewise, wino;
      const char* what;
    };
    // Winograd on AVX-512 for frames of 12x12 and more in 16-channel blocks.
    const Case cases[] = {
        {{2, 16, 3, 14, 14}, 32, {1, 3, 3}, {1, 1, 1}, {0, 1, 1, 0, 1, 1}, true, avx512, "2 clips"},
        {{1, 20, 2, 9, 11}, 24, {1, 3, 3}, {1, 2, 2}, {0, 1, 0, 0, 1, 1}, true, false, "20 -> 24"},
        {{1, 64, 4, 16, 16}, 64, {1, 3, 3}, {1, 1, 1}, {0, 1, 1, 0, 1, 1}, true, avx512, "64"},
        {{1, 16, 4, 8, 8}, 16, {3, 1, 1}, {1, 1, 1}, {1, 0, 0, 1, 0, 0}, false, false, "3x1x1"},
        // Frames of padding only: with a residual and Relu, oneDNN's 3-D kernel crashed.
        {{1, 16, 4, 8, 8}, 16, {1, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}, false, false, "pad 1"},
    };
    for (const Case& cs : cases) {
      for (bool fused : {false, true}) {
        Tensor x = random_f32(cs.x, rng);
        Tensor wt = random_f32({cs.m, cs.x[1], cs.kernel[0], cs.kernel[1], cs.kernel[2]}, rng);
        Tensor b = random_f32({cs.m}, rng);
        Attributes a;
        a.set("pads", attr_ints(cs.pads));
        a.set("strides", attr_ints(cs.strides));
        RefContext ref_ctx("Conv", a, {&x, &wt, &b});
        auto params = ops::parse_conv(ref_ctx.ctx).value();
        std::vector<float> ref(static_cast<size_t>(numel(params.y)));
        ops::conv_reference(params, x.data<float>(), wt.data<float>(), b.data<float>(), ref.data());
        Tensor z = random_f32(params.y, rng);
        std::vector<Tensor*> ins = {&x, &wt, &b};
        std::vector<bool> constant = {false, true, true};
        if (fused) {  // + a residual, then Relu
          a.set("activations", attr_strings({"Relu"}));
          ins.push_back(&z);
          constant.push_back(false);
          for (size_t i = 0; i < ref.size(); ++i) {
            ref[i] = std::max(0.0f, ref[i] + z.data<float>()[i]);
          }
        }
        Prepared p = run_cpu(fused ? "FusedConv" : "Conv", a, ins, constant);
        CHECK_MESSAGE((p.kernel.find("framewise") != std::string::npos) == cs.framewise,
                      std::string(cs.what), ": ", p.kernel);
        CHECK_MESSAGE((p.kernel.find("winograd") != std::string::npos) == cs.wino,
                      std::string(cs.what), ": ", p.kernel);
        Comparison c = compare(p.outputs[0].data<float>(), ref.data(), ref.size(), 1e-4, 1e-4);
        CHECK_MESSAGE(c.mismatches == 0, std::string(cs.what), " fused ", fused, ": max abs ",
                      c.max_abs);
      }
    }
  }

  TEST_CASE("Framewise convolutions in a session: same-shaped layers keep their own weights") {
    if (!tern_onednn_is_available() || std::string(tern_cpu_get_capability()) == "DEFAULT") {
      MESSAGE("skipped: oneDNN's direct convolutions need AVX2 or AVX-512");
      return;
    }
    // x [1, 16, D, H, W] -> Conv 1x3x3 (w1) -> Relu -> Conv 1x3x3 (w2): two layers of one shape,
    // run for several clip sizes (plans of their own; the weights packed once, each layer's own).
    GraphMaker m;
    m.g.opset = 13;
    const int x = m.g.add_value(
        "x", ValueType{DType::kFloat32,
                       true,
                       {Dim{1, ""}, Dim{16, ""}, Dim{-1, "d"}, Dim{-1, "h"}, Dim{-1, "w"}}});
    m.g.inputs = {x};
    std::mt19937 rng(8);
    const Tensor w1 = random_f32({16, 16, 1, 3, 3}, rng), w2 = random_f32({16, 16, 1, 3, 3}, rng);
    Attributes pads;
    pads.set("pads", attr_ints({0, 1, 1, 0, 1, 1}));
    const int h1 = m.node("Relu", {m.node("Conv", {x, m.constant("w1", w1)}, pads)});
    const int y = m.node("Conv", {h1, m.constant("w2", w2)}, pads);
    m.g.values[static_cast<size_t>(y)].name = "y";
    m.g.outputs = {y};
    SessionConfig cfg;
    cfg.backends.push_back(backends::get("cpu").value());
    auto session = Session::create(Model::create(m.g, nullptr, "framewise").value(), cfg).value();
    // 14x14 frames run Winograd (on AVX-512), 9x12 ones direct: one packed copy per layout, and a
    // new plan of a layout met before packs nothing more.
    size_t packed = 0;
    const Shape shapes[] = {
        {1, 16, 3, 14, 14}, {1, 16, 2, 9, 12}, {1, 16, 4, 14, 14}, {1, 16, 3, 9, 12}};
    for (size_t i = 0; i < 4; ++i) {
      CAPTURE(i);
      Tensor in = random_f32(shapes[i], rng);
      std::vector<Tensor> out;
      REQUIRE(session->run({"x"}, {&in}, {"y"}, &out).is_ok());
      bool framewise = false;
      for (const PlanStep& st : session->last_plan()->steps) {
        framewise =
            framewise || std::string(st.kernel->name()).find("framewise") != std::string::npos;
      }
      CHECK(framewise);
      // The reference: both convolutions, Relu between.
      Attributes a;
      a.set("pads", attr_ints({0, 1, 1, 0, 1, 1}));
      RefContext c1("Conv", a, {&in, &w1});
      auto p = ops::parse_conv(c1.ctx).value();
      Tensor mid = Tensor::allocate(DType::kFloat32, p.y).value();
      ops::conv_reference(p, in.data<float>(), w1.data<float>(), nullptr, mid.data<float>());
      for (int64_t j = 0; j < mid.numel(); ++j) {
        mid.data<float>()[j] = std::max(0.0f, mid.data<float>()[j]);
      }
      std::vector<float> ref(static_cast<size_t>(numel(p.y)));
      ops::conv_reference(p, mid.data<float>(), w2.data<float>(), nullptr, ref.data());
      Comparison c = compare(out[0].data<float>(), ref.data(), ref.size(), 1e-4, 1e-4);
      CHECK_MESSAGE(c.mismatches == 0, "max abs ", c.max_abs);
      if (i < 2) packed = session->memory().packed_weight_bytes;
      CHECK(session->memory().packed_weight_bytes == packed);
    }
    CHECK(packed > 0);
  }
}
