// Ops in the form of opsets 7-10: Upsample (scales attribute at 7, input at 9) and Pad's `value`
// attribute (before 11), against naive loops written here from ONNX's definitions.
#include <doctest/doctest.h>

#include <cmath>

#include "graph_builder.h"

using namespace tern;
using namespace tern_test;

namespace {

std::vector<float> iota_f32(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f - 1.0f;
  return v;
}

// Upsample of an [H, W] plane (asymmetric: output o reads source o / scale), as ONNX defines it.
std::vector<float> naive_upsample(const std::vector<float>& x, int64_t H, int64_t W, double sh,
                                  double sw, bool linear) {
  const auto OH = static_cast<int64_t>(std::floor(static_cast<double>(H) * sh));
  const auto OW = static_cast<int64_t>(std::floor(static_cast<double>(W) * sw));
  std::vector<float> y;
  auto at = [&](int64_t i, int64_t j) {
    return static_cast<double>(x[static_cast<size_t>(i * W + j)]);
  };
  for (int64_t i = 0; i < OH; ++i) {
    for (int64_t j = 0; j < OW; ++j) {
      const double ci = static_cast<double>(i) / sh, cj = static_cast<double>(j) / sw;
      const int64_t i0 = std::min<int64_t>(static_cast<int64_t>(ci), H - 1);
      const int64_t j0 = std::min<int64_t>(static_cast<int64_t>(cj), W - 1);
      if (!linear) {
        y.push_back(static_cast<float>(at(i0, j0)));
        continue;
      }
      const int64_t i1 = std::min(i0 + 1, H - 1), j1 = std::min(j0 + 1, W - 1);
      const double wi = i1 == i0 ? 0 : ci - static_cast<double>(i0);
      const double wj = j1 == j0 ? 0 : cj - static_cast<double>(j0);
      const double top = at(i0, j0) * (1 - wj) + at(i0, j1) * wj;
      const double bot = at(i1, j0) * (1 - wj) + at(i1, j1) * wj;
      y.push_back(static_cast<float>(top * (1 - wi) + bot * wi));
    }
  }
  return y;
}

void check_close(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CHECK_MESSAGE(std::fabs(got[i] - want[i]) <= 1e-5f + 1e-5f * std::fabs(want[i]), "element ", i,
                  ": ", got[i], " vs ", want[i]);
  }
}

Attribute floats_attr(std::vector<float> v) {
  Attribute a;
  a.kind = Attribute::Kind::kFloats;
  a.floats = std::move(v);
  return a;
}

}  // namespace

TEST_SUITE("ops") {
  TEST_CASE("Upsample opset 7 (scales attribute) and 9 (scales input): nearest and linear") {
    const int64_t H = 3, W = 4;
    const std::vector<float> x = iota_f32(H * W);
    struct Case {
      double sh, sw;
      bool linear;
    };
    for (const Case c : {Case{2, 3, false}, Case{1.5, 2.5, false}, Case{2, 2, true},
                         Case{1.7, 1, true}, Case{1, 1, false}}) {
      CAPTURE(c.sh);
      CAPTURE(c.sw);
      CAPTURE(c.linear);
      const std::vector<float> want = naive_upsample(x, H, W, c.sh, c.sw, c.linear);
      const auto fh = static_cast<float>(c.sh), fw = static_cast<float>(c.sw);
      Attributes a;
      a.set("mode", attr_string(c.linear ? "linear" : "nearest"));
      SingleOp v9{"Upsample", a, {make_f32({1, 1, H, W}, x)}, {make_f32({4}, {1, 1, fh, fw})}};
      v9.opset = 9;
      auto y9 = v9.run();
      REQUIRE_MESSAGE(y9.has_value(), y9.status().message());
      check_close(values_f32((*y9)[0]), want);
      a.set("scales", floats_attr({1, 1, fh, fw}));
      SingleOp v7{"Upsample", a, {make_f32({1, 1, H, W}, x)}, {}};
      v7.opset = 7;
      auto y7 = v7.run();
      REQUIRE_MESSAGE(y7.has_value(), y7.status().message());
      check_close(values_f32((*y7)[0]), want);
    }
  }

  TEST_CASE("Upsample refuses scales below 1, a scale count off the rank, and opset 10") {
    Attributes a;
    a.set("scales", floats_attr({1, 0.5f}));
    SingleOp down{"Upsample", a, {make_f32({2, 2}, {1, 2, 3, 4})}, {}};
    down.opset = 7;
    CHECK(down.run().status().code() == Code::kInvalidModel);
    a.set("scales", floats_attr({2}));
    SingleOp rank{"Upsample", a, {make_f32({2, 2}, {1, 2, 3, 4})}, {}};
    rank.opset = 8;
    CHECK(rank.run().status().code() == Code::kInvalidModel);
    SingleOp v10{"Upsample", {}, {make_f32({2, 2}, {1, 2, 3, 4})}, {make_f32({2}, {2, 2})}};
    v10.opset = 10;
    const Status s = v10.run().status();
    CHECK(s.code() == Code::kUnsupported);
    CHECK_MESSAGE(s.message().find("Resize") != std::string::npos, s.message());
  }

  TEST_CASE("Pad before opset 11: constant mode fills with the value attribute") {
    const std::vector<float> x = iota_f32(6);
    Attributes a;
    a.set("pads", attr_ints({1, 0, 0, 2}));  // [2, 3] -> [3, 5]: a row above, two columns right
    a.set("value", attr_float(2.5f));
    SingleOp pad{"Pad", a, {make_f32({2, 3}, x)}, {}};
    pad.opset = 10;
    auto y = pad.run();
    REQUIRE_MESSAGE(y.has_value(), y.status().message());
    std::vector<float> want;
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t j = 0; j < 5; ++j) {
        const bool inside = i >= 1 && j < 3;
        want.push_back(inside ? x[static_cast<size_t>((i - 1) * 3 + j)] : 2.5f);
      }
    }
    check_close(values_f32((*y)[0]), want);
    // Other modes ignore the value; opset 2's Pad reads it the same way.
    a.set("mode", attr_string("edge"));
    SingleOp edge{"Pad", a, {make_f32({2, 3}, x)}, {}};
    edge.opset = 7;
    auto e = edge.run();
    REQUIRE_MESSAGE(e.has_value(), e.status().message());
    CHECK(values_f32((*e)[0])[0] == x[0]);
    CHECK(values_f32((*e)[0])[4] == x[2]);
  }
}
