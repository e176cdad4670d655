// Resize: the CPU backend's kernels (two-tap separable, one pass per axis) against the reference
// kernel over random plans (every mode, coordinate mode, antialias, exclude_outside, axes,
// tf_crop_and_resize, ranks 1-5, float32/float16/uint8/int8), and the antialiasing filters
// against a plain evaluation of the stretched kernel over every input index (no footprint
// arithmetic). Malformed scales, sizes and attributes are refused by name.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "cpu_kernel_harness.h"
#include "graph_builder.h"
#include "ops/common/op_utils.h"

using namespace tern;
using namespace tern_test;
using namespace tern_test::cpu_kernels;

namespace {

Tensor random_tensor(DType dt, const Shape& shape, std::mt19937& rng) {
  Tensor t = Tensor::allocate(dt, shape).value();
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = u(rng);
    switch (dt) {
      case DType::kFloat32:
        t.data<float>()[i] = v;
        break;
      case DType::kFloat16:
        static_cast<ops::Float16*>(t.raw())[i] = ops::Float16(v);
        break;
      case DType::kUInt8:
        static_cast<uint8_t*>(t.raw())[i] = static_cast<uint8_t>(rng() % 256);
        break;
      case DType::kInt8:
        static_cast<int8_t*>(t.raw())[i] = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
        break;
      default:
        FAIL("dtype");
    }
  }
  return t;
}

std::vector<double> as_doubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.float_at(i);
  return v;
}

Tensor f32(Shape shape, std::vector<float> v) {
  Tensor t = Tensor::allocate(DType::kFloat32, std::move(shape)).value();
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}
Tensor i64(Shape shape, std::vector<int64_t> v) {
  Tensor t = Tensor::allocate(DType::kInt64, std::move(shape)).value();
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

// The ONNX definition of one antialiased axis, evaluated plainly: output o's source coordinate c
// (half_pixel), every input index i weighed by the kernel at (i - c) * scale, the edge repeated
// for indices past it, the weights normalised.
std::vector<double> naive_antialias_1d(const std::vector<float>& x, int64_t out, bool cubic) {
  const int64_t n = static_cast<int64_t>(x.size());
  const double s = static_cast<double>(out) / static_cast<double>(n);
  std::vector<double> y;
  for (int64_t o = 0; o < out; ++o) {
    const double c = (o + 0.5) / s - 0.5;
    double acc = 0, sum = 0;
    for (int64_t i = -4 * n; i < 5 * n; ++i) {
      const double d = std::fabs((static_cast<double>(i) - c) * std::min(s, 1.0));
      const double A = -0.75;
      double w;
      if (cubic) {
        w = d <= 1  ? ((A + 2) * d - (A + 3)) * d * d + 1
            : d < 2 ? ((A * d - 5 * A) * d + 8 * A) * d - 4 * A
                    : 0.0;
      } else {
        w = std::max(0.0, 1 - d);
      }
      acc += w * x[static_cast<size_t>(std::clamp<int64_t>(i, 0, n - 1))];
      sum += w;
    }
    y.push_back(acc / sum);
  }
  return y;
}

}  // namespace

TEST_SUITE("cpu_kernels") {
  TEST_CASE("Resize: the CPU kernels match the reference over random plans") {
    const unsigned seed = std::random_device{}();
    CAPTURE(seed);
    std::mt19937 rng(seed);
    const char* modes[] = {"nearest", "linear", "cubic"};
    const char* coords[] = {
        "half_pixel", "half_pixel_symmetric",      "pytorch_half_pixel", "align_corners",
        "asymmetric", "tf_half_pixel_for_nearest", "tf_crop_and_resize"};
    const DType dtypes[] = {DType::kFloat32, DType::kFloat32, DType::kFloat16, DType::kUInt8,
                            DType::kInt8};
    int passes_used = 0;
    for (int trial = 0; trial < 150; ++trial) {
      CAPTURE(trial);
      const int64_t rank = 1 + static_cast<int64_t>(rng() % 5);
      Shape in;
      for (int64_t d = 0; d < rank; ++d)
        in.push_back(1 + static_cast<int64_t>(rng() % (d < rank - 2 ? 3 : 12)));
      const DType dt = dtypes[rng() % 5];
      const std::string mode = modes[rng() % 3], coord = coords[rng() % 7];
      CAPTURE(mode);
      CAPTURE(coord);
      Attributes at;
      at.set("mode", attr_string(mode));
      at.set("coordinate_transformation_mode", attr_string(coord));
      if (mode != "nearest" && rng() % 2) at.set("antialias", attr_int(1));
      if (rng() % 3 == 0) at.set("exclude_outside", attr_int(1));
      if (mode == "cubic" && rng() % 2) at.set("cubic_coeff_a", attr_float(-0.5f));
      if (coord == "tf_crop_and_resize") at.set("extrapolation_value", attr_float(0.25f));
      // Resample a random subset of axes (as 'axes' or as all dims with scale 1 elsewhere).
      std::vector<int64_t> axes;
      for (int64_t d = 0; d < rank; ++d) {
        if (rng() % 3) axes.push_back(d);
      }
      if (axes.empty()) axes.push_back(rank - 1);
      const bool use_axes = rng() % 2;
      if (use_axes) at.set("axes", attr_ints(axes));
      std::vector<int64_t> sizes;
      std::vector<float> roi_lo, roi_hi;
      for (int64_t d = 0; d < rank; ++d) {
        const bool chosen = std::find(axes.begin(), axes.end(), d) != axes.end();
        if (!use_axes || chosen) {
          // Leading axes (at most 3 wide) resample to at most 5, the last two to at most 20: up
          // and down on every axis, at most ~40k outputs (20 on all five axes would be 3.2M, a
          // minute's reference evaluation under the sanitizers).
          const int64_t most = d < rank - 2 ? 5 : 20;
          sizes.push_back(chosen ? 1 + static_cast<int64_t>(rng() % most)
                                 : in[static_cast<size_t>(d)]);
          std::uniform_real_distribution<float> u(-0.3f, 1.3f);
          const float a = u(rng), b = u(rng);
          roi_lo.push_back(chosen ? a : 0.0f);
          roi_hi.push_back(chosen ? b : 1.0f);
        }
      }
      const int64_t n = static_cast<int64_t>(sizes.size());
      Tensor x = random_tensor(dt, in, rng);
      std::vector<float> roi_v = roi_lo;
      roi_v.insert(roi_v.end(), roi_hi.begin(), roi_hi.end());
      Tensor roi = f32({2 * n}, roi_v);
      Tensor sz = i64({n}, sizes);
      std::vector<Tensor*> ins = {&x, coord == "tf_crop_and_resize" ? &roi : nullptr, nullptr, &sz};
      const std::vector<bool> constant = {false, true, true, true};
      Prepared got = run_cpu("Resize", at, ins, constant, 0, 0, 1 + static_cast<int>(rng() % 2));
      Tensor want = run_reference("Resize", at, ins, constant);
      CAPTURE(got.kernel);
      passes_used += got.kernel == "resize_passes";
      REQUIRE(got.outputs[0].shape() == want.shape());
      const auto g = as_doubles(got.outputs[0]), w = as_doubles(want);
      // Integers may round differently where float and double sums straddle .5; float16 holds
      // 11 bits.
      const double tol = dt == DType::kUInt8 || dt == DType::kInt8 ? 1.0
                         : dt == DType::kFloat16                   ? 4e-3
                                                                   : 2e-5;
      size_t bad = 0;
      for (size_t i = 0; i < w.size(); ++i)
        bad += !(std::fabs(g[i] - w[i]) <= tol * (1 + std::fabs(w[i])));
      CHECK(bad == 0);
    }
    CHECK(passes_used > 0);
  }

  TEST_CASE("Resize antialias equals the stretched filter evaluated over every input index") {
    std::mt19937 rng(7);
    for (bool cubic : {false, true}) {
      for (const auto& sizes_case :
           std::vector<std::pair<int64_t, int64_t>>{{20, 7}, {64, 9}, {13, 5}, {9, 9}, {5, 11}}) {
        const int64_t n = sizes_case.first, out = sizes_case.second;
        CAPTURE(cubic);
        CAPTURE(n);
        CAPTURE(out);
        Tensor x = random_f32({1, 2, n}, rng);
        Attributes at;
        at.set("mode", attr_string(cubic ? "cubic" : "linear"));
        at.set("antialias", attr_int(1));
        at.set("axes", attr_ints({2}));
        Tensor sz = i64({1}, {out});
        std::vector<Tensor*> ins = {&x, nullptr, nullptr, &sz};
        for (bool reference : {false, true}) {
          Tensor y = reference ? run_reference("Resize", at, ins, {false, true, true, true})
                               : run_cpu("Resize", at, ins, {false, true, true, true}).outputs[0];
          REQUIRE(y.shape() == Shape{1, 2, out});
          for (int64_t c = 0; c < 2; ++c) {
            std::vector<float> row(x.data<float>() + c * n, x.data<float>() + (c + 1) * n);
            const auto want = naive_antialias_1d(row, out, cubic);
            for (int64_t o = 0; o < out; ++o) {
              CHECK(y.data<float>()[c * out + o] ==
                    doctest::Approx(want[static_cast<size_t>(o)]).epsilon(1e-5));
            }
          }
        }
      }
    }
  }
}

TEST_SUITE("bad_input") {
  TEST_CASE("Resize refuses malformed scales, sizes, roi and attributes by name") {
    std::mt19937 rng(3);
    Tensor x = random_f32({1, 2, 4, 4}, rng);
    struct Case {
      std::string attr, value;
      std::vector<int64_t> sizes;
      std::vector<float> scales;
      std::string message;
    };
    const Case cases[] = {
        {"mode", "bilinear_typo", {1, 2, 8, 8}, {}, "mode 'bilinear_typo'"},
        {"coordinate_transformation_mode",
         "half",
         {1, 2, 8, 8},
         {},
         "coordinate_transformation_mode 'half'"},
        {"nearest_mode", "up", {1, 2, 8, 8}, {}, "nearest_mode 'up'"},
        {"keep_aspect_ratio_policy", "fit", {1, 2, 8, 8}, {}, "keep_aspect_ratio_policy 'fit'"},
        {"", "", {1, 2, 8}, {}, "sizes has 3 entries for 4 axes"},
        {"", "", {1, 2, -8, 8}, {}, "sizes must be >= 0"},
        {"", "", {}, {1, 1, 0, 2}, "scales must be positive"},
        {"", "", {}, {1, 1, 2}, "scales has 3 entries for 4 axes"},
        {"", "", {1, 2, int64_t{1} << 30, int64_t{1} << 30}, {}, "more than 2^40 elements"},
    };
    for (const Case& c : cases) {
      CAPTURE(c.message);
      Attributes at;
      if (!c.attr.empty()) at.set(c.attr, attr_string(c.value));
      Tensor sc = f32({static_cast<int64_t>(c.scales.size())}, c.scales);
      Tensor sz = i64({static_cast<int64_t>(c.sizes.size())}, c.sizes);
      auto k = std::make_unique<Inferred>();
      k->node = Node{"k", "Resize", "", {}, {0}, at};
      OpContext& ctx = k->ctx;
      ctx.node = &k->node;
      ctx.where = "node 'k' (Resize)";
      ctx.opset = 19;
      const Tensor* ins[] = {&x, nullptr, c.scales.empty() ? nullptr : &sc,
                             c.sizes.empty() ? nullptr : &sz};
      for (const Tensor* t : ins) {
        ctx.inputs.push_back(TensorInfo{t != nullptr, t ? t->dtype() : DType::kUndefined,
                                        t ? t->shape() : Shape{}, t});
        ctx.input_names.push_back("in");
      }
      ctx.outputs.assign(1, TensorInfo{true, DType::kUndefined, {}, nullptr});
      const Status s = infer_node(*OpRegistry::global().find("Resize"), ctx);
      REQUIRE_FALSE(s.is_ok());
      CHECK((s.code() == Code::kInvalidModel || s.code() == Code::kInvalidArgument));
      CHECK(s.message().find(c.message) != std::string::npos);
    }
  }

  TEST_CASE("Resize refuses a scalar, a roi that is not finite and vanishing scales") {
    std::mt19937 rng(4);
    auto infer = [](const Tensor& x, const Attributes& at, const Tensor* roi, const Tensor* scales,
                    const Tensor* sizes) {
      Node node{"k", "Resize", "", {}, {0}, at};
      OpContext ctx;
      ctx.node = &node;
      ctx.where = "node 'k' (Resize)";
      ctx.opset = 19;
      for (const Tensor* t : {&x, roi, scales, sizes}) {
        ctx.inputs.push_back(TensorInfo{t != nullptr, t ? t->dtype() : DType::kUndefined,
                                        t ? t->shape() : Shape{}, t});
        ctx.input_names.push_back("in");
      }
      ctx.outputs.assign(1, TensorInfo{true, DType::kUndefined, {}, nullptr});
      return infer_node(*OpRegistry::global().find("Resize"), ctx);
    };
    Tensor scalar = f32({}, {1.0f});
    Attributes axes0;
    axes0.set("axes", attr_ints({0}));
    Tensor two = f32({1}, {2.0f});
    CHECK(infer(scalar, axes0, nullptr, &two, nullptr).code() == Code::kInvalidArgument);
    Tensor x = random_f32({1, 1, 2, 2}, rng);
    Attributes crop;
    crop.set("coordinate_transformation_mode", attr_string("tf_crop_and_resize"));
    Tensor sizes = i64({4}, {1, 1, 1, 4});
    for (float bad : {std::numeric_limits<float>::infinity(), std::nanf(""), 1e30f}) {
      Tensor roi = f32({8}, {0, 0, 0, 0, 1, 1, 1, bad});
      const Status s = infer(x, crop, &roi, nullptr, &sizes);
      CHECK(s.code() == Code::kInvalidModel);
      CHECK(s.message().find("roi") != std::string::npos);
    }
    Attributes aa;
    aa.set("mode", attr_string("linear"));
    aa.set("antialias", attr_int(1));
    Tensor tiny = i64({4}, {1, 1, 1, 1});
    Tensor wide = Tensor::allocate(DType::kFloat32, {1, 1, 1, 2000000}).value();
    CHECK(infer(wide, aa, nullptr, nullptr, &tiny).code() == Code::kUnsupported);
  }
}
