// conv_small_nhwc: convolutions of at most 16 output pixels per image and at least 2^20 weights on
// channels-last activations (backends/cpu/kernels/conv_small_nhwc.cpp), against the reference
// convolution; and the shapes it leaves to other kernels.
#include <doctest/doctest.h>

#include <cstring>
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

namespace {

struct Case {
  int64_t n, ic, oc, h, w, k;  // k x k kernel
  int64_t stride, pad, dilation;
  const char* what;
};

}  // namespace

TEST_SUITE("cpu_kernels") {
  TEST_CASE("conv_small_nhwc: small maps with large weights match the reference") {
    if (std::string(tern_cpu_get_capability()) != "AVX512") {
      MESSAGE("skipped: the CPU lacks AVX-512");
      return;
    }
    const unsigned seed = std::random_device{}();
    INFO("seed ", seed);
    std::mt19937 rng(seed);
    const Case cases[] = {
        {1, 384, 320, 4, 4, 3, 1, 1, 1, "ResNet's layer4 3x3 on 4x4 (16 pixels)"},
        {2, 384, 336, 8, 8, 3, 2, 1, 1, "the strided 3x3 into it, two images"},
        {1, 1024, 1040, 7, 7, 1, 2, 0, 1, "a strided 1x1 downsample (1x1 kernel, 4x4 out)"},
        {1, 416, 288, 3, 5, 3, 1, 1, 2, "dilation 2 on 3x5: taps in the padding"},
        {1, 256, 512, 2, 2, 3, 1, 1, 1, "2x2: most taps in the padding"},
        {1, 1200, 912, 1, 1, 1, 1, 1, 1, "1x1 map padded by 1 (9 pixels, 1 tap)"},
    };
    const std::vector<std::pair<std::vector<std::string>, std::vector<float>>> epilogues = {
        {{}, {}}, {{"Relu"}, {}}, {{"Clip"}, {0.0f, 6.0f}}, {{"Relu", "Affine"}, {2.0f, 0.5f}}};
    int trial = 0;
    for (const Case& cs : cases) {
      for (bool has_sum : {false, true}) {
        CAPTURE(cs.what);
        CAPTURE(has_sum);
        const auto& ep = epilogues[static_cast<size_t>(trial++ % epilogues.size())];
        Tensor x = random_f32({cs.n, cs.ic, cs.h, cs.w}, rng);
        Tensor wt = random_f32({cs.oc, cs.ic, cs.k, cs.k}, rng);
        Tensor b = random_f32({cs.oc}, rng);
        Attributes a;
        a.set("activations", attr_strings(ep.first));
        a.set("activation_params", attr_floats(ep.second));
        a.set("strides", attr_ints({cs.stride, cs.stride}));
        a.set("pads", attr_ints({cs.pad, cs.pad, cs.pad, cs.pad}));
        a.set("dilations", attr_ints({cs.dilation, cs.dilation}));
        Tensor xl = to_blocked(x, cs.ic);
        std::vector<Tensor*> ins = {&xl, &wt, &b};
        FlagValues flags = Flags::global().resolve(nullptr, nullptr);
        flags.value[static_cast<size_t>(FlagId::kNumThreads)] = 2;
        auto probe =
            fused_conv_context(a, ins, static_cast<int>(cs.ic), static_cast<int>(cs.oc), &flags);
        const Shape y_shape = probe->ctx.outputs[0].shape;
        Tensor z = random_f32(y_shape, rng);
        Tensor zl = to_blocked(z, cs.oc);
        if (has_sum) ins.push_back(&zl);
        auto fc =
            fused_conv_context(a, ins, static_cast<int>(cs.ic), static_cast<int>(cs.oc), &flags);
        OpContext& ctx = fc->ctx;
        auto kernel = backends::get("cpu").value()->prepare(ctx);
        REQUIRE_MESSAGE(kernel.has_value(), kernel.status().message());
        CHECK(std::string((*kernel)->name()) == "conv_small_nhwc.avx512");
        Tensor yl = Tensor::allocate(DType::kFloat32, y_shape).value();
        std::vector<float> workspace((*kernel)->workspace_bytes() / sizeof(float) + 16);
        KernelArgs args;
        for (Tensor* t : ins) args.inputs.push_back(t);
        args.outputs.push_back(&yl);
        args.workspace = workspace.data();
        REQUIRE((*kernel)->run(args, ExecContext{2}).is_ok());
        const std::vector<float> two(yl.data<float>(), yl.data<float>() + yl.numel());
        REQUIRE((*kernel)->run(args, ExecContext{1}).is_ok());
        CHECK(std::memcmp(two.data(), yl.raw(), two.size() * 4) == 0);  // thread-independent
        const std::vector<float> ref = fused_conv_reference(ctx, x, wt, b, has_sum ? &z : nullptr);
        const std::vector<float> got = from_blocked(yl, cs.oc);
        // Sums of up to 9 * 1200 products of values in [-1, 1]: float error well under 1e-3.
        Comparison c = compare(got.data(), ref.data(), ref.size(), 1e-3, 1e-4);
        CHECK_MESSAGE(c.mismatches == 0, "max abs ", c.max_abs);
        check_packed_weights_reused(**kernel, ctx, args, two);
      }
    }
  }

  TEST_CASE(
      "conv_small_nhwc: larger maps, small weights, pointwise and plain layouts go elsewhere") {
    if (std::string(tern_cpu_get_capability()) != "AVX512") {
      MESSAGE("skipped: the CPU lacks AVX-512");
      return;
    }
    std::mt19937 rng(3);
    struct Other {
      Shape x, w;
      int64_t stride;
      bool channels_last;
      const char* what;
    };
    const Other others[] = {
        {{1, 512, 7, 7}, {512, 512, 3, 3}, 1, true, "49 pixels: oneDNN's kernel is faster there"},
        {{1, 64, 4, 4}, {64, 64, 3, 3}, 1, true, "37k weights"},
        {{1, 1024, 4, 4}, {1024, 1024, 1, 1}, 1, true, "pointwise: conv1x1_nhwc's"},
        {{1, 512, 4, 4}, {512, 512, 3, 3}, 1, false, "16-blocked, not channels-last"},
    };
    for (const Other& o : others) {
      CAPTURE(o.what);
      Tensor x = random_f32(o.x, rng), wt = random_f32(o.w, rng), b = random_f32({o.w[0]}, rng);
      Attributes a;
      const int64_t pad = o.w[2] / 2;
      a.set("pads", attr_ints({pad, pad, pad, pad}));
      a.set("strides", attr_ints({o.stride, o.stride}));
      const int block = o.channels_last ? static_cast<int>(o.x[1]) : 16;
      Tensor xl = to_blocked(x, block);
      std::vector<Tensor*> ins = {&xl, &wt, &b};
      auto fc = fused_conv_context(a, ins, block, o.channels_last ? static_cast<int>(o.w[0]) : 16);
      auto kernel = backends::get("cpu").value()->prepare(fc->ctx);
      REQUIRE_MESSAGE(kernel.has_value(), kernel.status().message());
      CHECK(std::string((*kernel)->name()).rfind("conv_small_nhwc", 0) != 0);
    }
  }
}
