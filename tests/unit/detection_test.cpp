// Detection ops against independent references over random inputs (seed printed):
// NonMaxSuppression against a plain greedy selection over every pair; RoiAlign's CPU kernel
// against the reference in ops/ (both modes, both coordinate modes, regions partly outside).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "backends/registry.h"
#include "core/op_registry.h"
#include "graph_builder.h"
#include "test_util.h"

using namespace tern;
using namespace tern_test;

namespace {

// The selection ONNX defines, written out plainly: per batch and class, candidates above the
// threshold by descending score (ties by index), each kept unless its IoU with a kept one
// exceeds the threshold, at most `limit`.
std::vector<int64_t> naive_nms(const std::vector<float>& boxes, const std::vector<float>& scores,
                               int64_t batches, int64_t classes, int64_t n, int64_t limit,
                               float iou_th, float score_th, bool center) {
  auto corners = [&](int64_t b, int64_t i) {
    const float* v = &boxes[static_cast<size_t>((b * n + i) * 4)];
    if (center) {
      return std::array<float, 4>{v[1] - v[3] / 2, v[0] - v[2] / 2, v[1] + v[3] / 2,
                                  v[0] + v[2] / 2};
    }
    return std::array<float, 4>{std::min(v[0], v[2]), std::min(v[1], v[3]), std::max(v[0], v[2]),
                                std::max(v[1], v[3])};
  };
  auto iou = [](const std::array<float, 4>& a, const std::array<float, 4>& b) {
    const double ih = std::max(0.0, double(std::min(a[2], b[2])) - std::max(a[0], b[0]));
    const double iw = std::max(0.0, double(std::min(a[3], b[3])) - std::max(a[1], b[1]));
    const double inter = ih * iw;
    const double uni =
        double(a[2] - a[0]) * (a[3] - a[1]) + double(b[2] - b[0]) * (b[3] - b[1]) - inter;
    return uni > 0 ? inter / uni : 0.0;
  };
  std::vector<int64_t> out;
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t c = 0; c < classes; ++c) {
      std::vector<int64_t> order;
      for (int64_t i = 0; i < n; ++i) {
        if (scores[static_cast<size_t>((b * classes + c) * n + i)] > score_th) order.push_back(i);
      }
      std::stable_sort(order.begin(), order.end(), [&](int64_t l, int64_t r) {
        return scores[static_cast<size_t>((b * classes + c) * n + l)] >
               scores[static_cast<size_t>((b * classes + c) * n + r)];
      });
      std::vector<int64_t> kept;
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= limit) break;
        bool keep = true;
        for (int64_t k : kept) keep = keep && iou(corners(b, i), corners(b, k)) <= iou_th;
        if (keep) kept.push_back(i);
      }
      for (int64_t k : kept) out.insert(out.end(), {b, c, k});
    }
  }
  return out;
}

// Runs one node on the CPU backend through a session (constants given as initializers).
std::vector<Tensor> run_node(const std::string& op, const Attributes& attrs,
                             const std::vector<Tensor>& inputs, int64_t opset) {
  SingleOp s{op, attrs, inputs, {}, opset};
  auto out = s.run();
  REQUIRE_MESSAGE(out.has_value(), out.status().message());
  return *out;
}

}  // namespace

TEST_SUITE("ops") {
  TEST_CASE("NonMaxSuppression equals a plain greedy selection over random boxes") {
    const unsigned seed = std::random_device{}();
    CAPTURE(seed);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(0, 1);
    for (int trial = 0; trial < 40; ++trial) {
      CAPTURE(trial);
      const int64_t batches = 1 + rng() % 2, classes = 1 + rng() % 4, n = 1 + rng() % 300;
      const bool center = rng() % 2;
      std::vector<float> boxes(static_cast<size_t>(batches * n * 4)),
          scores(static_cast<size_t>(batches * classes * n));
      for (size_t i = 0; i < boxes.size(); i += 4) {
        const float a = u(rng) * 100, b = u(rng) * 100, w = 1 + u(rng) * 30, h = 1 + u(rng) * 30;
        // [x_center, y_center, w, h], or corners (in either order).
        boxes[i] = a;
        boxes[i + 1] = b;
        boxes[i + 2] = center ? w : a + (rng() % 2 ? w : -w);
        boxes[i + 3] = center ? h : b + h;
      }
      for (float& s : scores) s = std::round(u(rng) * 50) / 50;  // ties on purpose
      const int64_t limit = rng() % 3 == 0 ? n : 1 + rng() % 20;
      const float iou_th = u(rng) * 0.8f, score_th = u(rng) * 0.5f;
      Attributes at;
      if (center) at.set("center_point_box", attr_int(1));
      const auto out =
          run_node("NonMaxSuppression", at,
                   {make_f32({batches, n, 4}, boxes), make_f32({batches, classes, n}, scores),
                    make_i64({1}, {limit}), make_f32({1}, {iou_th}), make_f32({1}, {score_th})},
                   13);
      const std::vector<int64_t> want =
          naive_nms(boxes, scores, batches, classes, n, limit, iou_th, score_th, center);
      REQUIRE(out[0].shape() == Shape{static_cast<int64_t>(want.size() / 3), 3});
      CHECK(std::equal(want.begin(), want.end(), out[0].data<int64_t>()));
    }
  }

  TEST_CASE("RoiAlign's CPU kernel matches the reference: modes, coordinate modes, sampling") {
    const unsigned seed = std::random_device{}();
    CAPTURE(seed);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1, 1);
    const OpSchema* schema = OpRegistry::global().find("RoiAlign");
    for (int trial = 0; trial < 30; ++trial) {
      CAPTURE(trial);
      const int64_t N = 1 + rng() % 2, C = 1 + rng() % 20, H = 2 + rng() % 15, W = 2 + rng() % 15;
      const int64_t R = 1 + rng() % 6;
      Tensor x = random_f32({N, C, H, W}, rng);
      std::vector<float> rois;
      std::vector<int64_t> idx;
      for (int64_t r = 0; r < R; ++r) {
        // Regions partly outside the image, tiny ones, reversed ones.
        const float x1 = (u(rng) + 0.8f) * W, y1 = (u(rng) + 0.8f) * H;
        rois.insert(rois.end(),
                    {x1, y1, x1 + (u(rng) + 1.1f) * W * 0.6f, y1 + (u(rng) + 1.1f) * H * 0.6f});
        idx.push_back(static_cast<int64_t>(rng() % static_cast<unsigned>(N)));
      }
      Attributes at;
      at.set("mode", attr_string(rng() % 2 ? "max" : "avg"));
      at.set("output_height", attr_int(1 + rng() % 4));
      at.set("output_width", attr_int(1 + rng() % 4));
      at.set("sampling_ratio", attr_int(rng() % 3));
      at.set("spatial_scale", attr_float(rng() % 2 ? 1.0f : 0.5f));
      at.set("coordinate_transformation_mode",
             attr_string(rng() % 2 ? "half_pixel" : "output_half_pixel"));
      const std::vector<Tensor> ins = {x, make_f32({R, 4}, rois), make_i64({R}, idx)};
      // The CPU kernel through a session, the reference directly.
      const auto got = run_node("RoiAlign", at, ins, 22);
      Node node{"k", "RoiAlign", "", {}, {0}, at};
      OpContext ctx;
      ctx.node = &node;
      ctx.where = "RoiAlign";
      ctx.opset = 22;
      for (const Tensor& t : ins) {
        ctx.inputs.push_back(TensorInfo{true, t.dtype(), t.shape(), &t});
        ctx.input_names.push_back("in");
      }
      ctx.outputs.assign(1, TensorInfo{true, DType::kUndefined, {}});
      REQUIRE(infer_node(*schema, ctx).is_ok());
      auto ref = schema->reference(ctx);
      REQUIRE(ref.has_value());
      Tensor want = Tensor::allocate(DType::kFloat32, ctx.outputs[0].shape).value();
      KernelArgs args;
      for (const Tensor& t : ins) args.inputs.push_back(&t);
      args.outputs.push_back(&want);
      REQUIRE((*ref)->run(args, ExecContext{1}).is_ok());
      REQUIRE(got[0].shape() == want.shape());
      for (int64_t i = 0; i < want.numel(); ++i) {
        CHECK(got[0].data<float>()[i] ==
              doctest::Approx(want.data<float>()[i]).epsilon(1e-5).scale(1.0));
      }
    }
  }
}
