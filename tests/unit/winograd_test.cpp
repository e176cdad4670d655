// Tern's Winograd weight packing (backends/cpu/onednn/winograd.h) against oneDNN's own reorder
// into the layouts its Winograd convolutions choose.
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
    // AVX-512: F(4x4,3x3)'s layout and at least two of F(2x2,3x3)'s were checked.
    if (packed > 0) CHECK(formats.size() >= 3);
  }
#endif
}
