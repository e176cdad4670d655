// Ops a real model uses beyond the common set, on what the ONNX node tests leave out:
// DeformConv's CPU kernel against the reference over random shapes (groups, offset groups, mask,
// dilation, stride, padding, offsets that leave the image) and the reference against Conv where
// the offsets are zero; MaxPool's Indices (both storage orders) and MaxUnpool against a plain
// window scan; BatchNormalization's training outputs, ConvInteger's exact sums, QuantizeLinear's
// float32 quotient and TfIdfVectorizer's string pool and weightings against values worked out
// from the spec; and bad inputs, each with its own status.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>

#include "cpu_kernel_harness.h"
#include "graph_builder.h"
#include "ops/common/op_utils.h"

using namespace tern;
using namespace tern_test;
using tern_test::cpu_kernels::run_cpu;
using tern_test::cpu_kernels::run_reference;

namespace {

Tensor random_u8(Shape shape, std::mt19937& rng, DType dtype = DType::kUInt8) {
  Tensor t = Tensor::allocate(dtype, std::move(shape)).value();
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(rng());
  return t;
}

Tensor scalar_of(DType dtype, double v) {
  Tensor t = Tensor::allocate(dtype, {}).value();
  ops::visit_all_numeric(dtype, [&](auto tag) {
    using T = decltype(tag);
    *t.data<T>() = ops::from_double<T>(v);
  });
  return t;
}

Tensor strings(Shape shape, const std::vector<std::string>& v) {
  Tensor t = Tensor::allocate(DType::kString, std::move(shape)).value();
  std::copy(v.begin(), v.end(), t.data<std::string>());
  return t;
}

// MaxPool's Indices worked out by a plain window scan of a [N, C, H, W] tensor: the first
// largest element of each window, as a flat index in row-major or column-major (h fastest)
// order within its plane.
std::vector<int64_t> naive_argmax(const Tensor& x, int64_t k, int64_t s, bool column_major) {
  const Shape& d = x.shape();
  const int64_t oh = (d[2] - k) / s + 1, ow = (d[3] - k) / s + 1, plane = d[2] * d[3];
  std::vector<int64_t> out;
  for (int64_t p = 0; p < d[0] * d[1]; ++p) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        int64_t best_h = i * s, best_w = j * s;
        for (int64_t h = i * s; h < i * s + k; ++h) {
          for (int64_t w = j * s; w < j * s + k; ++w) {
            if (x.data<float>()[p * plane + h * d[3] + w] >
                x.data<float>()[p * plane + best_h * d[3] + best_w]) {
              best_h = h, best_w = w;
            }
          }
        }
        out.push_back(p * plane + (column_major ? best_w * d[2] + best_h : best_h * d[3] + best_w));
      }
    }
  }
  return out;
}

Status status(const SingleOp& op) {
  return op.run().status();
}

Attributes deform_attrs(int64_t group, int64_t offset_group, std::vector<int64_t> strides,
                        std::vector<int64_t> dilations, std::vector<int64_t> pads) {
  Attributes at;
  at.set("group", attr_int(group));
  at.set("offset_group", attr_int(offset_group));
  at.set("strides", attr_ints(std::move(strides)));
  at.set("dilations", attr_ints(std::move(dilations)));
  at.set("pads", attr_ints(std::move(pads)));
  return at;
}

}  // namespace

TEST_SUITE("ops") {
  TEST_CASE("DeformConv's CPU kernel matches the reference over random shapes") {
    const unsigned seed = std::random_device{}();
    CAPTURE(seed);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1, 1);
    int trials = 0;
    while (trials < 40) {
      const int64_t group = 1 + rng() % 3, offset_group = 1 + rng() % 3;
      // Channels a multiple of both: an offset group may span conv groups and the other way.
      const int64_t C = group * offset_group * (1 + rng() % 2), M = group * (1 + rng() % 3);
      const int64_t N = 1 + rng() % 2, H = 1 + rng() % 9, W = 1 + rng() % 9;
      const int64_t kh = 1 + rng() % 3, kw = 1 + rng() % 3;
      auto pick = [&](int64_t n) { return static_cast<int64_t>(rng() % n); };
      const std::vector<int64_t> strides = {1 + pick(2), 1 + pick(2)};
      const std::vector<int64_t> dil = {1 + pick(2), 1 + pick(2)};
      const std::vector<int64_t> pads = {pick(3), pick(3), pick(3), pick(3)};
      const int64_t span_h = H + pads[0] + pads[2] - ((kh - 1) * dil[0] + 1);
      const int64_t span_w = W + pads[1] + pads[3] - ((kw - 1) * dil[1] + 1);
      if (span_h < 0 || span_w < 0) continue;
      ++trials;
      CAPTURE(trials);
      const int64_t oh = span_h / strides[0] + 1, ow = span_w / strides[1] + 1;
      Tensor x = random_f32({N, C, H, W}, rng);
      Tensor w = random_f32({M, C / group, kh, kw}, rng);
      Tensor off = random_f32({N, offset_group * kh * kw * 2, oh, ow}, rng);
      // Offsets up to +-(H + 2): samples partly or wholly outside the image, some on whole pixels.
      const float reach = static_cast<float>(std::max(H, W) + 2);
      for (int64_t i = 0; i < off.numel(); ++i) {
        float& v = off.data<float>()[i];
        v = rng() % 4 == 0 ? std::round(v * reach) : v * reach * 0.5f;
      }
      const bool with_mask = rng() % 2, with_bias = rng() % 2;
      Tensor mask = random_f32({N, offset_group * kh * kw, oh, ow}, rng);
      Tensor bias = random_f32({M}, rng);
      const Attributes at = deform_attrs(group, offset_group, strides, dil, pads);
      CAPTURE(N);
      CAPTURE(C);
      CAPTURE(M);
      CAPTURE(H);
      CAPTURE(W);
      CAPTURE(kh);
      CAPTURE(kw);
      CAPTURE(group);
      CAPTURE(offset_group);
      CAPTURE(with_mask);
      CAPTURE(with_bias);
      const std::vector<Tensor*> ins = {&x, &w, &off, with_bias ? &bias : nullptr,
                                        with_mask ? &mask : nullptr};
      const auto got = run_cpu("DeformConv", at, ins, {false, true, false, true, false});
      CHECK(got.kernel == "deform_im2col_gemm");
      const Tensor want = run_reference("DeformConv", at, ins);
      REQUIRE(got.outputs[0].shape() == want.shape());
      for (int64_t i = 0; i < want.numel(); ++i) {
        CHECK(got.outputs[0].data<float>()[i] ==
              doctest::Approx(want.data<float>()[i]).epsilon(1e-4).scale(1.0));
      }
    }
  }

  TEST_CASE("DeformConv with zero offsets and a mask of ones is Conv") {
    const unsigned seed = std::random_device{}();
    CAPTURE(seed);
    std::mt19937 rng(seed);
    for (int trial = 0; trial < 10; ++trial) {
      const int64_t group = 1 + rng() % 2, C = group * (1 + rng() % 3), M = group * 2;
      const int64_t H = 3 + rng() % 6, W = 3 + rng() % 6;
      Tensor x = random_f32({1, C, H, W}, rng);
      Tensor w = random_f32({M, C / group, 3, 3}, rng);
      Tensor b = random_f32({M}, rng);
      Attributes conv;
      conv.set("group", attr_int(group));
      conv.set("pads", attr_ints({1, 0, 1, 2}));
      conv.set("strides", attr_ints({1, 2}));
      const Tensor want = run_reference("Conv", conv, {&x, &w, &b});
      const Shape& y = want.shape();
      const int64_t og = C % 2 == 0 ? 2 : 1;  // offset groups: one or two
      const Attributes at = deform_attrs(group, og, {1, 2}, {1, 1}, {1, 0, 1, 2});
      Tensor off = Tensor::allocate(DType::kFloat32, {1, og * 9 * 2, y[2], y[3]}).value();
      Tensor ones = Tensor::allocate(DType::kFloat32, {1, og * 9, y[2], y[3]}).value();
      std::fill(ones.data<float>(), ones.data<float>() + ones.numel(), 1.0f);
      for (const bool cpu : {false, true}) {
        const std::vector<Tensor*> ins = {&x, &w, &off, &b, &ones};
        const Tensor got =
            cpu ? run_cpu("DeformConv", at, ins, {false, true, false, true, false}).outputs[0]
                : run_reference("DeformConv", at, ins);
        REQUIRE(got.shape() == y);
        for (int64_t i = 0; i < got.numel(); ++i) {
          CHECK(got.data<float>()[i] ==
                doctest::Approx(want.data<float>()[i]).epsilon(1e-5).scale(1.0));
        }
      }
    }
  }

  TEST_CASE("MaxPool's Indices in both storage orders, and MaxUnpool puts the maxima back") {
    const unsigned seed = std::random_device{}();
    CAPTURE(seed);
    std::mt19937 rng(seed);
    for (int trial = 0; trial < 20; ++trial) {
      const int64_t k = 2, s = 1 + rng() % 2, N = 1 + rng() % 2, C = 1 + rng() % 3;
      // Windows that tile the input, so unpooling gives back its shape.
      const int64_t H = (rng() % 4) * s + k, W = (rng() % 4) * s + k;
      Tensor x = random_f32({N, C, H, W}, rng);
      for (const int64_t order : {0, 1}) {
        Attributes at;
        at.set("kernel_shape", attr_ints({k, k}));
        at.set("strides", attr_ints({s, s}));
        at.set("storage_order", attr_int(order));
        SingleOp pool{"MaxPool", at, {x}, {}, 22};
        pool.outputs = 2;
        auto out = pool.run();
        REQUIRE_MESSAGE(out.has_value(), out.status().message());
        const Tensor& idx = (*out)[1];
        const std::vector<int64_t> want = naive_argmax(x, k, s, order == 1);
        REQUIRE(idx.numel() == static_cast<int64_t>(want.size()));
        CHECK(std::equal(want.begin(), want.end(), idx.data<int64_t>()));
        if (order == 1) continue;
        // Unpooling the maxima at their row-major indices: each max back in place, zeros around;
        // a larger output_shape holds that in its leading corner.
        Attributes un;
        un.set("kernel_shape", attr_ints({k, k}));
        un.set("strides", attr_ints({s, s}));
        for (const int64_t extra : {0, 1, 2}) {
          const int64_t OH = H + extra, OW = W + 2 * extra;
          std::vector<std::optional<Tensor>> shape;
          if (extra > 0) shape.push_back(make_i64({4}, {N, C, OH, OW}));
          auto back = SingleOp{"MaxUnpool", un, {(*out)[0], idx}, shape, 22}.run();
          REQUIRE_MESSAGE(back.has_value(), back.status().message());
          REQUIRE(back->at(0).shape() == Shape{N, C, OH, OW});
          std::vector<float> expect(static_cast<size_t>(N * C * OH * OW), 0.0f);
          for (int64_t i : want) {
            const int64_t plane = i / (H * W), h = i / W % H, w = i % W;
            expect[static_cast<size_t>((plane * OH + h) * OW + w)] = x.data<float>()[i];
          }
          CHECK(values_f32(back->at(0)) == expect);
        }
      }
    }
  }

  TEST_CASE("MaxUnpool's default output shape runs the window backwards") {
    Attributes un;
    un.set("kernel_shape", attr_ints({3}));
    un.set("strides", attr_ints({2}));
    un.set("pads", attr_ints({1, 0}));
    // (2 - 1) * 2 + 3 - 1 = 4 per plane, indices flat over [1, 2, 4].
    auto y = SingleOp{"MaxUnpool",
                      un,
                      {make_f32({1, 2, 2}, {1, 2, 3, 4})},
                      {make_i64({1, 2, 2}, {0, 3, 5, 6})},
                      22}
                 .run();
    REQUIRE_MESSAGE(y.has_value(), y.status().message());
    CHECK(y->at(0).shape() == Shape{1, 2, 4});
    CHECK(values_f32(y->at(0)) == std::vector<float>{1, 0, 0, 2, 0, 3, 4, 0});
  }

  TEST_CASE("BatchNormalization in training mode: batch statistics and running updates") {
    const unsigned seed = std::random_device{}();
    CAPTURE(seed);
    std::mt19937 rng(seed);
    const int64_t N = 3, C = 4, P = 5;
    Tensor x = random_f32({N, C, P}, rng);
    Tensor scale = random_f32({C}, rng), bias = random_f32({C}, rng);
    Tensor mean = random_f32({C}, rng), var = random_f32({C}, rng);
    for (int64_t c = 0; c < C; ++c) var.data<float>()[c] += 1.5f;
    Attributes at;
    at.set("training_mode", attr_int(1));
    at.set("momentum", attr_float(0.8f));
    at.set("epsilon", attr_float(1e-3f));
    SingleOp bn{"BatchNormalization", at, {x, scale, bias, mean, var}, {}, 15};
    bn.outputs = 3;
    auto out = bn.run();
    REQUIRE_MESSAGE(out.has_value(), out.status().message());
    for (int64_t c = 0; c < C; ++c) {
      double sum = 0, sq = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t p = 0; p < P; ++p) sum += x.data<float>()[(n * C + c) * P + p];
      const double m = sum / (N * P);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t p = 0; p < P; ++p) {
          const double d = x.data<float>()[(n * C + c) * P + p] - m;
          sq += d * d;
        }
      const double v = sq / (N * P);  // population variance
      for (int64_t n = 0; n < N; ++n)
        for (int64_t p = 0; p < P; ++p) {
          const int64_t i = (n * C + c) * P + p;
          const double y = (x.data<float>()[i] - m) / std::sqrt(v + 1e-3) * scale.data<float>()[c] +
                           bias.data<float>()[c];
          CHECK((*out)[0].data<float>()[i] == doctest::Approx(y).epsilon(1e-5));
        }
      CHECK((*out)[1].data<float>()[c] ==
            doctest::Approx(mean.data<float>()[c] * 0.8 + m * 0.2).epsilon(1e-5));
      CHECK((*out)[2].data<float>()[c] ==
            doctest::Approx(var.data<float>()[c] * 0.8 + v * 0.2).epsilon(1e-5));
    }
  }

  TEST_CASE("ConvInteger sums exactly past float32's 2^24, with per-channel weight zero points") {
    const unsigned seed = std::random_device{}();
    CAPTURE(seed);
    std::mt19937 rng(seed);
    // 32 channels * 3 * 3 taps of up to 255 * 255: sums up to 18.7 million, odd ones included.
    const int64_t C = 32, M = 3, H = 4, W = 5;
    for (const DType wtype : {DType::kUInt8, DType::kInt8}) {
      Tensor x = random_u8({1, C, H, W}, rng);
      Tensor w = random_u8({M, C, 3, 3}, rng, wtype);
      if (wtype == DType::kUInt8) {
        // All but the last channel at 255: output channel 0's sums reach 254 * 255 * 31 * 9.
        std::fill(x.data<uint8_t>(), x.data<uint8_t>() + x.numel() - H * W, uint8_t{255});
        std::fill(w.data<uint8_t>(), w.data<uint8_t>() + w.numel() / M, uint8_t{255});
      }
      Tensor wz = Tensor::allocate(wtype, {M}).value();
      for (int64_t m = 0; m < M; ++m) wz.data<uint8_t>()[m] = static_cast<uint8_t>(m * 3);
      Attributes at;
      at.set("pads", attr_ints({1, 1, 1, 1}));
      auto out = SingleOp{"ConvInteger", at, {x, w}, {scalar_of(DType::kUInt8, 1), wz}, 10}.run();
      REQUIRE_MESSAGE(out.has_value(), out.status().message());
      const Tensor& y = (*out)[0];
      REQUIRE(y.shape() == Shape{1, M, H, W});
      REQUIRE(y.dtype() == DType::kInt32);
      int64_t largest = 0;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t i = 0; i < H; ++i)
          for (int64_t j = 0; j < W; ++j) {
            int64_t acc = 0;
            for (int64_t c = 0; c < C; ++c)
              for (int64_t a = 0; a < 3; ++a)
                for (int64_t b = 0; b < 3; ++b) {
                  const int64_t ih = i + a - 1, iw = j + b - 1;
                  if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                  const int64_t xv = x.data<uint8_t>()[(c * H + ih) * W + iw] - 1;
                  const int64_t wi = ((m * C + c) * 3 + a) * 3 + b;
                  const int64_t wv = wtype == DType::kInt8 ? w.data<int8_t>()[wi] - int8_t(m * 3)
                                                           : w.data<uint8_t>()[wi] - m * 3;
                  acc += xv * wv;
                }
            largest = std::max(largest, std::abs(acc));
            CHECK(y.data<int32_t>()[(m * H + i) * W + j] == acc);
          }
      if (wtype == DType::kUInt8) CHECK(largest > (int64_t{1} << 24));
    }
  }

  TEST_CASE("QuantizeLinear divides float32 by float32: 0.5 / (5 / 255) is a tie at 25.5") {
    const float scale = 5.0f / 255.0f;
    REQUIRE(0.5f / scale == 25.5f);  // (in double the quotient is just below 25.5)
    REQUIRE(0.5 / static_cast<double>(scale) < 25.5);
    auto out = SingleOp{"QuantizeLinear",
                        {},
                        {make_f32({3}, {0.5f, 1.5f * scale, -0.5f})},
                        {make_f32({}, {scale}), scalar_of(DType::kUInt8, 153)},
                        13}
                   .run();
    REQUIRE_MESSAGE(out.has_value(), out.status().message());
    // rint(25.5) = 26 (half to even), rint(1.5) = 2, rint(-25.5) = -26.
    const uint8_t* q = (*out)[0].data<uint8_t>();
    CHECK(q[0] == 179);
    CHECK(q[1] == 155);
    CHECK(q[2] == 127);
  }

  TEST_CASE("TfIdfVectorizer over a string pool: skip-grams, TF, IDF and TFIDF with weights") {
    // Pool: unigrams a b c (ids 1-3), bigrams (a b), (b c) (ids 4, 5); columns id - 1.
    // Row 0 "a b a c b": unigrams a 2, b 2, c 1; bigrams at skip 0: ab; at skip 1 (items two
    // apart): (a a), (b c), (a b) -> ab 2, bc 1. Row 1 "c c x y z": c 2, no bigram.
    Attributes at;
    at.set("min_gram_length", attr_int(1));
    at.set("max_gram_length", attr_int(2));
    at.set("max_skip_count", attr_int(1));
    at.set("ngram_counts", attr_ints({0, 3}));
    at.set("ngram_indexes", attr_ints({0, 1, 2, 3, 4}));
    at.set("pool_strings", attr_strings({"a", "b", "c", "a", "b", "b", "c"}));
    at.set("weights", attr_floats({0.5f, 1, 2, 3, 4}));
    const Tensor x = strings({2, 5}, {"a", "b", "a", "c", "b", "c", "c", "x", "y", "z"});
    const std::vector<std::pair<std::string, std::vector<float>>> cases = {
        {"TF", {2, 2, 1, 2, 1, 0, 0, 2, 0, 0}},
        {"IDF", {0.5f, 1, 2, 3, 4, 0, 0, 2, 0, 0}},
        {"TFIDF", {1, 2, 2, 6, 4, 0, 0, 4, 0, 0}},
    };
    for (const auto& c : cases) {
      const std::string& mode = c.first;
      const std::vector<float>& want = c.second;
      CAPTURE(mode);
      at.set("mode", attr_string(mode));
      auto out = SingleOp{"TfIdfVectorizer", at, {x}, {}, 9}.run();
      REQUIRE_MESSAGE(out.has_value(), out.status().message());
      CHECK((*out)[0].shape() == Shape{2, 5});
      CHECK(values_f32((*out)[0]) == want);
    }
    // Bigrams only (min_gram_length 2): the unigram columns stay 0.
    at.set("mode", attr_string("TF"));
    at.set("min_gram_length", attr_int(2));
    auto out =
        SingleOp{"TfIdfVectorizer", at, {strings({5}, {"a", "b", "a", "c", "b"})}, {}, 9}.run();
    REQUIRE_MESSAGE(out.has_value(), out.status().message());
    CHECK(values_f32((*out)[0]) == std::vector<float>{0, 0, 0, 2, 1});
  }
}

TEST_SUITE("bad_input") {
  TEST_CASE("RegexFullMatch: a bad pattern is refused, or the op where libtern has no exceptions") {
    Attributes at;
    Attribute pattern;
    pattern.kind = Attribute::Kind::kString;
    pattern.s = "(unclosed";
    at.set("pattern", pattern);
    Status s = status({"RegexFullMatch", at, {strings({2}, {"a", "(unclosed"})}, {}, 20});
    CHECK(s.code() == Code::kUnsupported);
    if (!dtype_built(DType::kString)) {
      // (The minimal build's default types leave strings out, and the string ops with them.)
      CHECK(s.message().find("RegexFullMatch") != std::string::npos);
      return;
    }
#if defined(TERN_LIBRARY_NO_EXCEPTIONS)
    // (TERN_MINIMAL: std::regex reports a bad pattern only by throwing.)
    CHECK(s.message().find("left out of builds without C++ exceptions") != std::string::npos);
#else
    CHECK(s.message().find("is not a supported regex") != std::string::npos);
    pattern.s = "a+";
    at.set("pattern", pattern);
    CHECK(status({"RegexFullMatch", at, {strings({2}, {"aa", "ab"})}, {}, 20}).is_ok());
#endif
  }

  TEST_CASE("ArgMax and ArgMin over an empty axis: refused, not read out of bounds") {
    std::mt19937 rng(3);
    for (const char* op : {"ArgMax", "ArgMin"}) {
      CAPTURE(op);
      Attributes at;
      at.set("axis", attr_int(1));
      const Status s = status({op, at, {random_f32({3, 0, 2}, rng)}, {}, 13});
      CHECK(s.code() == Code::kInvalidArgument);
      CHECK(s.message().find("empty axis 1") != std::string::npos);
      // Nothing to choose for: an empty output, as the input.
      auto out = SingleOp{op, at, {random_f32({0, 0, 2}, rng)}, {}, 13}.run();
      REQUIRE_MESSAGE(out.has_value(), out.status().message());
      CHECK(out->at(0).shape() == Shape{0, 1, 2});
    }
  }

  TEST_CASE("DeformConv rejects offsets, masks and weights that do not fit, and other ranks") {
    std::mt19937 rng(7);
    const Tensor x = random_f32({1, 4, 5, 5}, rng), w = random_f32({2, 4, 3, 3}, rng);
    const Tensor off = random_f32({1, 18, 3, 3}, rng);
    Attributes at;
    at.set("kernel_shape", attr_ints({3, 3}));
    // Offsets for another output size, a mask of the wrong size, weights for other channels,
    // offset_group not dividing the channels, 3-D input, integer input.
    Status s = status({"DeformConv", at, {x, w, random_f32({1, 18, 4, 3}, rng)}, {}, 22});
    CHECK(s.code() == Code::kInvalidArgument);
    CHECK(s.message().find("offset") != std::string::npos);
    s = status({"DeformConv",
                at,
                {x, w, off, random_f32({2}, rng), random_f32({1, 8, 3, 3}, rng)},
                {},
                22});
    CHECK(s.code() == Code::kInvalidArgument);
    CHECK(s.message().find("mask") != std::string::npos);
    CHECK(status({"DeformConv", at, {x, random_f32({2, 3, 3, 3}, rng), off}, {}, 22}).code() ==
          Code::kInvalidArgument);
    Attributes og3 = at;
    og3.set("offset_group", attr_int(3));
    CHECK(status({"DeformConv", og3, {x, w, random_f32({1, 54, 3, 3}, rng)}, {}, 22}).code() ==
          Code::kInvalidArgument);
    Attributes k3 = at;
    k3.set("kernel_shape", attr_ints({3, 3, 3}));
    CHECK(status({"DeformConv",
                  k3,
                  {random_f32({1, 4, 5, 5, 5}, rng), random_f32({2, 4, 3, 3, 3}, rng),
                   random_f32({1, 81, 3, 3, 3}, rng)},
                  {},
                  22})
              .code() == Code::kUnsupported);
    CHECK(status({"DeformConv",
                  at,
                  {make_i64({1, 4, 5, 5}, std::vector<int64_t>(100, 1)), w, off},
                  {},
                  22})
              .code() == Code::kUnsupported);
  }

  TEST_CASE("MaxUnpool and MaxPool reject bad indices, output shapes and storage orders") {
    std::mt19937 rng(7);
    const Tensor x = random_f32({1, 4, 5, 5}, rng);
    // MaxUnpool: an index past the output, indices of another shape, an output_shape of the
    // wrong rank or too small.
    Attributes un;
    un.set("kernel_shape", attr_ints({2, 2}));
    un.set("strides", attr_ints({2, 2}));
    const Tensor v = make_f32({1, 1, 1, 2}, {1, 2});
    const Status s = status({"MaxUnpool", un, {v, make_i64({1, 1, 1, 2}, {0, 8})}, {}, 22});
    CHECK(s.code() == Code::kInvalidArgument);
    CHECK(s.message().find("index 8") != std::string::npos);
    CHECK(status({"MaxUnpool", un, {v, make_i64({1, 1, 2, 1}, {0, 1})}, {}, 22}).code() ==
          Code::kInvalidArgument);
    CHECK(
        status({"MaxUnpool", un, {v, make_i64({1, 1, 1, 2}, {0, 1})}, {make_i64({2}, {2, 4})}, 22})
            .code() == Code::kInvalidArgument);
    // An output_shape smaller than the unpooled [1, 1, 2, 4].
    CHECK(status({"MaxUnpool",
                  un,
                  {v, make_i64({1, 1, 1, 2}, {0, 1})},
                  {make_i64({4}, {1, 1, 2, 3})},
                  22})
              .code() == Code::kInvalidArgument);
    // MaxPool: storage_order 2.
    Attributes mp;
    mp.set("kernel_shape", attr_ints({2, 2}));
    mp.set("storage_order", attr_int(2));
    CHECK(status({"MaxPool", mp, {x}, {}, 22}).code() == Code::kInvalidModel);
  }

  TEST_CASE("ConvInteger rejects float inputs and zero points of the wrong size") {
    std::mt19937 rng(7);
    const Tensor x = random_f32({1, 4, 5, 5}, rng), w = random_f32({2, 4, 3, 3}, rng);
    // ConvInteger: float input; a w_zero_point of the wrong length.
    CHECK(status({"ConvInteger", {}, {x, w}, {}, 10}).code() == Code::kUnsupported);
    const Tensor xq = random_u8({1, 4, 5, 5}, rng), wq = random_u8({2, 4, 3, 3}, rng);
    CHECK(status(
              {"ConvInteger", {}, {xq, wq}, {scalar_of(DType::kUInt8, 0), random_u8({3}, rng)}, 10})
              .code() == Code::kInvalidArgument);
    // No output channels (a division by zero before).
    CHECK(status({"ConvInteger", {}, {xq, random_u8({0, 4, 3, 3}, rng)}, {}, 10}).code() ==
          Code::kInvalidArgument);
  }

  TEST_CASE("TfIdfVectorizer rejects unknown modes, pools of the other type and rank 3") {
    // TfIdfVectorizer: unknown mode; an integer input with a string pool; rank 3.
    Attributes tf;
    tf.set("mode", attr_string("BM25"));
    tf.set("min_gram_length", attr_int(1));
    tf.set("max_gram_length", attr_int(1));
    tf.set("ngram_counts", attr_ints({0}));
    tf.set("ngram_indexes", attr_ints({0, 1}));
    tf.set("pool_strings", attr_strings({"a", "b"}));
    const Tensor words = strings({2}, {"a", "c"});
    CHECK(status({"TfIdfVectorizer", tf, {words}, {}, 9}).code() == Code::kInvalidModel);
    tf.set("mode", attr_string("TF"));
    CHECK(status({"TfIdfVectorizer", tf, {make_i64({2}, {1, 2})}, {}, 9}).code() ==
          Code::kInvalidArgument);
    CHECK(status({"TfIdfVectorizer", tf, {strings({1, 1, 2}, {"a", "b"})}, {}, 9}).code() ==
          Code::kInvalidArgument);
    // A huge max_skip_count runs as long as the row allows (it hung, then overflowed, before);
    // ngram_indexes past 2^40 are refused.
    tf.set("max_skip_count", attr_int(std::numeric_limits<int64_t>::max()));
    CHECK(status({"TfIdfVectorizer", tf, {words}, {}, 9}).is_ok());
    tf.set("ngram_indexes", attr_ints({0, int64_t{1} << 50}));
    CHECK(status({"TfIdfVectorizer", tf, {words}, {}, 9}).code() == Code::kInvalidModel);
  }

  TEST_CASE("MelWeightMatrix rejects edges outside the spectrum") {
    // MelWeightMatrix: an upper edge above the Nyquist frequency leaves the spectrum.
    const Status s = status(
        {"MelWeightMatrix",
         {},
         {},
         {scalar_of(DType::kInt32, 8), scalar_of(DType::kInt32, 16), scalar_of(DType::kInt32, 8000),
          scalar_of(DType::kFloat32, 0), scalar_of(DType::kFloat32, 20000)},
         17});
    CHECK(s.code() == Code::kInvalidArgument);
    CHECK(s.message().find("outside") != std::string::npos);
  }

  TEST_CASE("BatchNormalization refuses opset 9's training outputs") {
    std::mt19937 rng(7);
    const Tensor x = random_f32({1, 4, 5, 5}, rng);
    // BatchNormalization: opset 9's five-output training form.
    Tensor c4 = random_f32({4}, rng);
    SingleOp bn{"BatchNormalization", {}, {x, c4, c4, c4, c4}, {}, 9};
    bn.outputs = 5;
    CHECK(status(bn).code() == Code::kUnsupported);
  }
}
