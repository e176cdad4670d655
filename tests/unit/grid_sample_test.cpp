// GridSample: the CPU kernel against the reference in ops/ over random inputs (seed printed) for
// every mode x padding x align_corners with 1, 2 and 3 spatial dims, grid points far outside
// [-1, 1], on the edges and halfway between elements, and NaNs in X; an identity grid reproduces
// X (an independent check of the geometry); float64 and float16 through the reference; bad
// shapes refused.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>

#include "core/half.h"
#include "cpu_kernel_harness.h"
#include "graph_builder.h"
#include "test_util.h"

using namespace tern;
using namespace tern_test;
using namespace tern_test::cpu_kernels;

namespace {

const char* const kModes[] = {"linear", "nearest", "cubic"};
const char* const kPaddings[] = {"zeros", "border", "reflection"};

Attributes grid_attrs(const std::string& mode, const std::string& padding, bool align) {
  Attributes at;
  at.set("mode", attr_string(mode));
  at.set("padding_mode", attr_string(padding));
  at.set("align_corners", attr_int(align ? 1 : 0));
  return at;
}

// Grid values: mostly in [-1.2, 1.2], some far outside, some exactly on the ends, halfway
// between elements (where nearest rounds) or on element centres.
float grid_value(std::mt19937& rng, int64_t size, bool align) {
  std::uniform_real_distribution<float> u(-1.2f, 1.2f);
  const unsigned kind = rng() % 10;
  if (kind < 5) return u(rng);
  if (kind == 5) return u(rng) * 8;                     // well outside
  if (kind == 6) return (rng() % 2 ? 1 : -1) * 3.5e6f;  // far outside
  if (kind == 7) return rng() % 2 ? 1.0f : -1.0f;
  // An element centre (kind 8) or halfway between two (kind 9), in normalized form.
  const auto i =
      static_cast<float>(static_cast<int64_t>(rng() % (size + 4)) - 2) + (kind == 9 ? 0.5f : 0.0f);
  const auto n = static_cast<float>(size);
  return align ? (n > 1 ? 2 * i / (n - 1) - 1 : 0.0f) : (2 * i + 1) / n - 1;
}

}  // namespace

TEST_SUITE("ops") {
  TEST_CASE("GridSample's CPU kernel matches the reference: modes, paddings, align_corners, 1-3d") {
    const unsigned seed = std::random_device{}();
    CAPTURE(seed);
    std::mt19937 rng(seed);
    for (int spatial = 1; spatial <= 3; ++spatial) {
      for (const char* mode : kModes) {
        for (const char* padding : kPaddings) {
          for (bool align : {false, true}) {
            for (int trial = 0; trial < 3; ++trial) {
              CAPTURE(spatial);
              CAPTURE(mode);
              CAPTURE(padding);
              CAPTURE(align);
              CAPTURE(trial);
              const int64_t N = 1 + rng() % 2, C = 1 + rng() % 5;
              Shape xs = {N, C}, gs = {N};
              for (int d = 0; d < spatial; ++d) {
                xs.push_back(1 + rng() % (spatial == 3 ? 5 : 9));   // sizes of 1 included
                gs.push_back(1 + rng() % (spatial == 3 ? 6 : 23));  // > 256 points in 2-D
              }
              gs.push_back(spatial);
              Tensor x = random_f32(xs, rng);
              if (trial ==
                  2) {  // NaNs: the kernel's padded taps read only what the reference reads
                for (int k = 0; k < 3; ++k) {
                  x.data<float>()[rng() % x.numel()] = std::numeric_limits<float>::quiet_NaN();
                }
              }
              Tensor grid = Tensor::allocate(DType::kFloat32, gs).value();
              for (int64_t i = 0; i < grid.numel(); ++i) {
                const int64_t dim = spatial - 1 - i % spatial;  // grid lists x (last dim) first
                grid.data<float>()[i] = grid_value(rng, xs[2 + dim], align);
              }
              const Attributes at = grid_attrs(mode, padding, align);
              const Prepared got = run_cpu("GridSample", at, {&x, &grid}, {false, false});
              CHECK(got.kernel == "grid_sample");
              const Tensor want = run_reference("GridSample", at, {&x, &grid});
              REQUIRE(got.outputs[0].shape() == want.shape());
              for (int64_t i = 0; i < want.numel(); ++i) {
                const float g = got.outputs[0].data<float>()[i], w = want.data<float>()[i];
                CAPTURE(i);
                if (std::isnan(w)) {
                  CHECK(std::isnan(g));
                } else {
                  CHECK(g == doctest::Approx(w).epsilon(1e-5).scale(1.0));
                }
              }
            }
          }
        }
      }
    }
  }

  TEST_CASE("GridSample with an identity grid reproduces X in every mode and padding") {
    const unsigned seed = std::random_device{}();
    CAPTURE(seed);
    std::mt19937 rng(seed);
    for (int spatial = 2; spatial <= 3; ++spatial) {
      for (const char* mode : kModes) {
        for (const char* padding : kPaddings) {
          for (bool align : {false, true}) {
            CAPTURE(spatial);
            CAPTURE(mode);
            CAPTURE(padding);
            CAPTURE(align);
            Shape xs = {1, 3}, gs = {1};
            for (int d = 0; d < spatial; ++d) {
              xs.push_back(2 + rng() % 6);
              gs.push_back(xs.back());
            }
            gs.push_back(spatial);
            Tensor x = random_f32(xs, rng);
            Tensor grid = Tensor::allocate(DType::kFloat32, gs).value();
            const int64_t points = grid.numel() / spatial;
            for (int64_t pt = 0; pt < points; ++pt) {
              for (int64_t d = spatial - 1, rest = pt; d >= 0; --d) {
                const int64_t size = xs[static_cast<size_t>(2 + d)];
                const auto i = static_cast<double>(rest % size), n = static_cast<double>(size);
                rest /= size;
                grid.data<float>()[pt * spatial + (spatial - 1 - d)] =
                    static_cast<float>(align ? 2 * i / (n - 1) - 1 : (2 * i + 1) / n - 1);
              }
            }
            const Attributes at = grid_attrs(mode, padding, align);
            for (const Tensor& y :
                 {run_cpu("GridSample", at, {&x, &grid}, {false, false}).outputs[0],
                  run_reference("GridSample", at, {&x, &grid})}) {
              REQUIRE(y.shape() == x.shape());
              check_close(y, values_f32(x), "identity grid");
            }
          }
        }
      }
    }
  }

  TEST_CASE("GridSample runs float64 and float16 through the reference, agreeing with float32") {
    std::mt19937 rng(7);
    Tensor x = random_f32({1, 2, 5, 6}, rng), grid = random_f32({1, 4, 3, 2}, rng);
    auto convert = [](const Tensor& t, DType dt) {
      Tensor d = Tensor::allocate(dt, t.shape()).value();
      for (int64_t i = 0; i < t.numel(); ++i) {
        const float v = t.data<float>()[i];
        if (dt == DType::kFloat64) d.data<double>()[i] = v;
        if (dt == DType::kFloat16) d.data<uint16_t>()[i] = float_to_half(v);
      }
      return d;
    };
    for (const char* mode : kModes) {
      // float16 rounds X, the grid (to 2^-11 relative) and Y: a few 1e-3 at values up to ~1.
      for (const auto& case_dt :
           {std::pair{DType::kFloat64, 1e-5}, std::pair{DType::kFloat16, 1e-2}}) {
        const DType dt = case_dt.first;
        const double tol = case_dt.second;
        CAPTURE(mode);
        CAPTURE(dtype_name(dt));
        const Attributes at = grid_attrs(mode, "reflection", false);
        SingleOp f32{"GridSample", at, {x, grid}, {}, 22};
        SingleOp other{"GridSample", at, {convert(x, dt), convert(grid, dt)}, {}, 22};
        auto a = f32.run();
        auto b = other.run();
        REQUIRE_MESSAGE(a.has_value(), a.status().message());
        REQUIRE_MESSAGE(b.has_value(), b.status().message());
        REQUIRE((*b)[0].dtype() == dt);
        for (int64_t i = 0; i < (*a)[0].numel(); ++i) {
          CHECK((*a)[0].data<float>()[i] ==
                doctest::Approx((*b)[0].float_at(i)).epsilon(tol).scale(1.0));
        }
      }
    }
  }
}

TEST_SUITE("bad_input") {
  TEST_CASE("GridSample rejects a grid of the wrong rank or last dim, and unknown modes") {
    std::mt19937 rng(3);
    struct Case {
      Shape x, grid;
      std::string mode, padding;
      Code code;
      const char* message;
    };
    const Case cases[] = {
        {{1, 2, 4, 4}, {1, 3, 3}, "linear", "zeros", Code::kInvalidArgument, "grid"},
        {{1, 2, 4, 4}, {1, 3, 3, 3}, "linear", "zeros", Code::kInvalidArgument, "grid"},
        {{1, 2, 4, 4, 4}, {1, 3, 3, 3, 2}, "linear", "zeros", Code::kInvalidArgument, "grid"},
        {{2, 2, 4, 4}, {1, 3, 3, 2}, "linear", "zeros", Code::kInvalidArgument, "grid"},
        {{1, 2}, {1, 2}, "linear", "zeros", Code::kInvalidArgument, "spatial"},
        {{1, 2, 0, 4}, {1, 3, 3, 2}, "linear", "zeros", Code::kInvalidArgument, "at least 1"},
        {{1, 2, 4, 4}, {1, 3, 3, 2}, "area", "zeros", Code::kInvalidModel, "mode 'area'"},
        {{1, 2, 4, 4}, {1, 3, 3, 2}, "linear", "wrap", Code::kInvalidModel, "padding_mode 'wrap'"},
    };
    for (const Case& c : cases) {
      CAPTURE(c.message);
      SingleOp op{"GridSample",
                  grid_attrs(c.mode, c.padding, false),
                  {random_f32(c.x, rng), random_f32(c.grid, rng)},
                  {},
                  22};
      auto out = op.run();
      REQUIRE_FALSE(out.has_value());
      CHECK(out.status().code() == c.code);
      CHECK(out.status().message().find(c.message) != std::string::npos);
    }
  }
}
