// ops/: each op's semantics through a one-node graph on the CPU backend, against values worked out
// by hand from the ONNX spec, plus named rejection cases.
#include <doctest/doctest.h>

#include <cmath>

#include "graph_builder.h"
#include "ops/common/op_utils.h"

using namespace tern;
using namespace tern_test;

namespace {
std::vector<float> run1(const SingleOp& op) {
  auto r = op.run();
  REQUIRE_MESSAGE(r.has_value(), r.status().message());
  return values_f32(r.value()[0]);
}
Status run_status(const SingleOp& op) {
  return op.run().status();
}
}  // namespace

TEST_SUITE("ops") {
  TEST_CASE("broadcast_shapes follows numpy and names the clash") {
    CHECK(ops::broadcast_shapes({2, 1, 4}, {3, 1}).value() == Shape{2, 3, 4});
    CHECK(ops::broadcast_shapes({}, {5}).value() == Shape{5});
    auto bad = ops::broadcast_shapes({2, 3}, {4});
    CHECK(bad.status().code() == Code::kInvalidArgument);
    CHECK(bad.status().message().find("3 vs 4") != std::string::npos);
  }

  TEST_CASE("Add/Sub/Mul/Div broadcast: scalar, row and per-channel") {
    SingleOp add{"Add", {}, {make_f32({2, 3}, {1, 2, 3, 4, 5, 6})}, {make_f32({3}, {10, 20, 30})}};
    CHECK(run1(add) == std::vector<float>{11, 22, 33, 14, 25, 36});
    SingleOp sub{"Sub", {}, {make_f32({2, 2}, {1, 2, 3, 4})}, {make_f32({}, {1})}};
    CHECK(run1(sub) == std::vector<float>{0, 1, 2, 3});
    SingleOp mul{
        "Mul", {}, {make_f32({1, 2, 1, 2}, {1, 2, 3, 4})}, {make_f32({1, 2, 1, 1}, {10, 100})}};
    CHECK(run1(mul) == std::vector<float>{10, 20, 300, 400});
    SingleOp div{"Div", {}, {make_f32({2, 1}, {8, 6})}, {make_f32({1, 2}, {2, 4})}};
    CHECK(run1(div) == std::vector<float>{4, 2, 3, 1.5});
  }

  TEST_CASE("rejects_integer_division_by_zero and mismatched dtypes") {
    SingleOp div{"Div", {}, {make_i64({2}, {4, 5})}, {make_i64({2}, {2, 0})}};
    Status s = run_status(div);
    CHECK(s.code() == Code::kInvalidArgument);
    CHECK(s.message().find("division by zero") != std::string::npos);
    SingleOp mixed{"Add", {}, {make_f32({2}, {1, 2})}, {make_i64({2}, {1, 2})}};
    s = run_status(mixed);
    CHECK(s.code() == Code::kInvalidModel);
    CHECK(s.message().find("node 'n0' (Add)") != std::string::npos);
  }

  TEST_CASE("Relu, Sigmoid, HardSigmoid, HardSwish") {
    Tensor x = make_f32({4}, {-2, -0.5f, 0.5f, 3});
    CHECK(run1({"Relu", {}, {x}, {}}) == std::vector<float>{0, 0, 0.5f, 3});
    auto sig = run1({"Sigmoid", {}, {x}, {}});
    for (int i = 0; i < 4; ++i)
      CHECK(sig[static_cast<size_t>(i)] ==
            doctest::Approx(1 / (1 + std::exp(-x.data<float>()[i]))));
    Attributes hs;
    hs.set("alpha", attr_float(0.5f));
    hs.set("beta", attr_float(0.25f));
    CHECK(run1({"HardSigmoid", hs, {x}, {}}) == std::vector<float>{0, 0, 0.5f, 1});
    auto sw = run1({"HardSwish", {}, {x}, {}});
    CHECK(sw[0] == doctest::Approx(-2 * (1.0 / 6)));
    CHECK(sw[3] == doctest::Approx(3));
  }

  TEST_CASE("Clip: opset 6 attributes and opset 11 inputs, either bound optional") {
    Tensor x = make_f32({4}, {-5, -1, 1, 5});
    Attributes a;
    a.set("min", attr_float(-2));
    a.set("max", attr_float(2));
    SingleOp old{"Clip", a, {x}, {}, 6};
    CHECK(run1(old) == std::vector<float>{-2, -1, 1, 2});
    SingleOp v11{"Clip", {}, {x}, {std::nullopt, make_f32({}, {0})}, 11};
    CHECK(run1(v11) == std::vector<float>{-5, -1, 0, 0});
    SingleOp lo{"Clip", {}, {x}, {make_f32({}, {0})}, 11};
    CHECK(run1(lo) == std::vector<float>{0, 0, 1, 5});
  }

  TEST_CASE("Softmax: opset 11 coerces to 2-D, opset 13 uses one axis") {
    Tensor x = make_f32({2, 2}, {0, 0, 0, 0});
    Attributes a;
    a.set("axis", attr_int(0));
    SingleOp legacy{"Softmax", a, {x}, {}, 11};  // all four values form one row
    for (float v : run1(legacy)) CHECK(v == doctest::Approx(0.25));
    SingleOp v13{"Softmax", a, {x}, {}, 13};  // normalised down each column
    for (float v : run1(v13)) CHECK(v == doctest::Approx(0.5));
    SingleOp last{"Softmax", {}, {make_f32({1, 2}, {0, std::log(3.0f)})}, {}, 13};
    auto r = run1(last);
    CHECK(r[0] == doctest::Approx(0.25));
    CHECK(r[1] == doctest::Approx(0.75));
  }

  TEST_CASE("Reshape with 0 and -1, and rejects_incompatible_shape") {
    Tensor x = make_f32({2, 3, 4}, std::vector<float>(24, 1));
    auto r = SingleOp{"Reshape", {}, {x}, {make_i64({2}, {0, -1})}}.run();
    REQUIRE(r.has_value());
    CHECK(r.value()[0].shape() == Shape{2, 12});
    Status s = run_status({"Reshape", {}, {x}, {make_i64({2}, {5, -1})}});
    CHECK(s.code() == Code::kInvalidArgument);
    CHECK(s.message().find("cannot reshape input 'in0'") != std::string::npos);
    CHECK(s.message().find("node 'n0' (Reshape)") != std::string::npos);
  }

  TEST_CASE("Flatten, Squeeze, Unsqueeze, Identity shapes") {
    Tensor x = make_f32({2, 1, 3}, {1, 2, 3, 4, 5, 6});
    Attributes f;
    f.set("axis", attr_int(2));
    CHECK(SingleOp{"Flatten", f, {x}, {}}.run().value()[0].shape() == Shape{2, 3});
    CHECK(SingleOp{"Squeeze", {}, {x}, {make_i64({1}, {1})}}.run().value()[0].shape() ==
          Shape{2, 3});
    CHECK(SingleOp{"Unsqueeze", {}, {x}, {make_i64({2}, {0, -1})}}.run().value()[0].shape() ==
          Shape{1, 2, 1, 3, 1});
    CHECK(run1({"Identity", {}, {x}, {}}) == std::vector<float>{1, 2, 3, 4, 5, 6});
    CHECK(run_status({"Squeeze", {}, {x}, {make_i64({1}, {0})}}).code() == Code::kInvalidArgument);
  }

  TEST_CASE("Slice: negative steps, clamping, omitted axes; opset 1 attributes") {
    Tensor x = make_f32({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7});
    SingleOp rev{
        "Slice",
        {},
        {x},
        {make_i64({1}, {-1}), make_i64({1}, {-100}), make_i64({1}, {1}), make_i64({1}, {-2})}};
    CHECK(run1(rev) == std::vector<float>{3, 1, 7, 5});
    SingleOp clamp{"Slice", {}, {x}, {make_i64({2}, {1, 1}), make_i64({2}, {100, 3})}};
    CHECK(run1(clamp) == std::vector<float>{5, 6});
    Attributes a;
    a.set("starts", attr_ints({1}));
    a.set("ends", attr_ints({3}));
    a.set("axes", attr_ints({1}));
    CHECK(run1({"Slice", a, {x}, {}, 1}) == std::vector<float>{1, 2, 5, 6});
  }

  TEST_CASE("Concat along a negative axis; rejects mismatched dims") {
    Attributes a;
    a.set("axis", attr_int(-1));
    SingleOp c{"Concat", a, {make_f32({2, 1}, {1, 2}), make_f32({2, 2}, {3, 4, 5, 6})}, {}};
    CHECK(run1(c) == std::vector<float>{1, 3, 4, 2, 5, 6});
    SingleOp bad{"Concat", a, {make_f32({2, 1}, {1, 2}), make_f32({3, 1}, {3, 4, 5})}, {}};
    CHECK(run_status(bad).code() == Code::kInvalidArgument);
  }

  TEST_CASE("Cast: float to int truncates and saturates, NaN gives 0; int to float") {
    Attributes to_i32;
    to_i32.set("to", attr_int(static_cast<int64_t>(DType::kInt32)));
    auto r =
        SingleOp{"Cast", to_i32, {make_f32({4}, {1.9f, -1.9f, 1e20f, NAN})}, {}}.run().value()[0];
    CHECK(r.dtype() == DType::kInt32);
    CHECK(r.data<int32_t>()[0] == 1);
    CHECK(r.data<int32_t>()[1] == -1);
    CHECK(r.data<int32_t>()[2] == std::numeric_limits<int32_t>::max());
    CHECK(r.data<int32_t>()[3] == 0);
    Attributes to_f;
    to_f.set("to", attr_int(1));
    CHECK(run1({"Cast", to_f, {make_i64({2}, {-3, 7})}, {}}) == std::vector<float>{-3, 7});
  }

  TEST_CASE("Resize: nearest (asymmetric, floor) and linear (half_pixel) by hand") {
    Attributes n;
    n.set("coordinate_transformation_mode", attr_string("asymmetric"));
    n.set("nearest_mode", attr_string("floor"));
    SingleOp nearest{"Resize",
                     n,
                     {make_f32({1, 1, 1, 2}, {1, 2})},
                     {std::nullopt, make_f32({4}, {1, 1, 1, 2})},
                     11};
    CHECK(run1(nearest) == std::vector<float>{1, 1, 2, 2});
    Attributes l;
    l.set("mode", attr_string("linear"));
    SingleOp linear{"Resize",
                    l,
                    {make_f32({1, 1, 1, 2}, {0, 1})},
                    {make_f32({0}, {}), std::nullopt, make_i64({4}, {1, 1, 1, 4})},
                    13};
    CHECK(run1(linear) == std::vector<float>{0, 0.25f, 0.75f, 1});
    // Cubic (its numbers are the conformance suite's): the weights of every output sum to one,
    // so a constant image stays constant, at the edges too.
    Attributes cubic;
    cubic.set("mode", attr_string("cubic"));
    const std::vector<float> flat = run1({"Resize",
                                          cubic,
                                          {make_f32({1, 1, 2, 2}, {3, 3, 3, 3})},
                                          {std::nullopt, make_f32({4}, {1, 1, 2.5f, 1.5f})},
                                          11});
    REQUIRE(flat.size() == 15);
    for (float v : flat) CHECK(v == doctest::Approx(3.0f).epsilon(1e-6));
    // Antialiased cubic downscaling of a constant image stays that constant (weights sum to 1).
    cubic.set("antialias", attr_int(1));
    const std::vector<float> down = run1({"Resize",
                                          cubic,
                                          {make_f32({1, 1, 4, 6}, std::vector<float>(24, 2.0f))},
                                          {std::nullopt, make_f32({4}, {1, 1, 0.5f, 0.34f})},
                                          11});
    REQUIRE(down.size() == 4);
    for (float v : down) CHECK(v == doctest::Approx(2.0f).epsilon(1e-6));
  }

  TEST_CASE("MaxPool with ceil_mode and padding; AveragePool count_include_pad; global pools") {
    Tensor x = make_f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
    Attributes mp;
    mp.set("kernel_shape", attr_ints({2, 2}));
    mp.set("strides", attr_ints({2, 2}));
    mp.set("ceil_mode", attr_int(1));
    auto r = SingleOp{"MaxPool", mp, {x}, {}}.run().value()[0];
    CHECK(r.shape() == Shape{1, 1, 2, 2});
    CHECK(values_f32(r) == std::vector<float>{5, 6, 8, 9});
    Attributes ap;
    ap.set("kernel_shape", attr_ints({2, 2}));
    ap.set("pads", attr_ints({1, 1, 0, 0}));
    ap.set("count_include_pad", attr_int(1));
    auto avg = run1({"AveragePool", ap, {x}, {}});
    CHECK(avg[0] == doctest::Approx(0.25));  // only x[0][0]=1 inside, divided by 4
    ap.set("count_include_pad", attr_int(0));
    CHECK(run1({"AveragePool", ap, {x}, {}})[0] == doctest::Approx(1));
    CHECK(run1({"GlobalAveragePool", {}, {x}, {}}) == std::vector<float>{5});
    CHECK(run1({"GlobalMaxPool", {}, {x}, {}}) == std::vector<float>{9});
  }

  TEST_CASE("BatchNormalization in inference mode") {
    Tensor x = make_f32({1, 2, 1, 2}, {1, 2, 3, 4});
    Attributes a;
    a.set("epsilon", attr_float(0));
    SingleOp bn{"BatchNormalization",
                a,
                {x},
                {make_f32({2}, {1, 2}), make_f32({2}, {0, 1}), make_f32({2}, {1, 3}),
                 make_f32({2}, {4, 1})}};
    // channel 0: (x - 1) / 2; channel 1: 2 (x - 3) + 1
    CHECK(run1(bn) == std::vector<float>{0, 0.5f, 1, 3});
  }

  TEST_CASE("Shape with start/end is computed while planning") {
    Attributes a;
    a.set("start", attr_int(-2));
    auto r = SingleOp{"Shape", a, {make_f32({2, 3, 4}, std::vector<float>(24))}, {}, 15}
                 .run()
                 .value()[0];
    CHECK(r.dtype() == DType::kInt64);
    CHECK(r.shape() == Shape{2});
    CHECK(r.data<int64_t>()[0] == 3);
    CHECK(r.data<int64_t>()[1] == 4);
  }

  TEST_CASE("Conv and MatMul reject bad shapes with the tensor named") {
    Status s = run_status({"Conv",
                           {},
                           {make_f32({1, 3, 4, 4}, std::vector<float>(48))},
                           {make_f32({2, 2, 3, 3}, std::vector<float>(36))}});
    CHECK(s.code() == Code::kInvalidArgument);
    CHECK(s.message().find("has 3 channels") != std::string::npos);
    s = run_status({"MatMul",
                    {},
                    {make_f32({2, 3}, std::vector<float>(6))},
                    {make_f32({4, 2}, std::vector<float>(8))}});
    CHECK(s.code() == Code::kInvalidArgument);
    CHECK(s.message().find("inner dims differ") != std::string::npos);
  }
}
