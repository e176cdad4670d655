// The Vulkan kernels against the CPU reference kernels, op by op across shapes, attributes and
// flags: each graph runs once in a session whose only backend is Vulkan (so every node must have
// a Vulkan kernel) and once on the CPU. On CI machines the device is lavapipe, Mesa's CPU driver.
// Also: runs submitted in chunks (a few submits, not one per kernel), cancellation and deadlines on
// a long run (stopped between chunks; latencies printed, only generous bounds asserted, DESIGN §5),
// the device queries and the build's shader table.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "api/api_internal.h"
#include "backend_compare.h"
#include "c_api.h"
#include "cancel_util.h"

#if defined(TERN_HAVE_VULKAN)
#include "backends/vulkan/shader_table.h"
#include "backends/vulkan/vk_context.h"
#include "core/plan/plan.h"
#endif

using namespace tern;
using namespace tern_test;

namespace {

std::string vulkan_missing() {
  if (!tern_vulkan_is_built()) return "this build has no Vulkan backend (TERN_WITH_VULKAN=OFF)";
  if (!tern_vulkan_is_available()) return "no Vulkan device (install mesa-vulkan-drivers)";
  return "";
}

#define SKIP_WITHOUT_VULKAN() TERN_SKIP_UNLESS_USABLE("vulkan skipped: ", vulkan_missing())

#if defined(TERN_HAVE_VULKAN)
// A session of `m` through the C API on Vulkan alone.
tern_session* vulkan_c_session(tern_model* m) {
  tern_session_options* o = nullptr;
  REQUIRE(tern_session_options_create(&o) == TERN_OK);
  REQUIRE(tern_session_options_set_backends(o, "vulkan") == TERN_OK);
  REQUIRE(tern_session_options_set_cpu_fallback(o, 0) == TERN_OK);
  tern_session* s = nullptr;
  const tern_status st = tern_session_create(m, o, &s);
  tern_session_options_destroy(o);
  REQUIRE_MESSAGE(st == TERN_OK, tern_last_error());
  return s;
}
#endif

// Deterministic values in [lo, hi).
Tensor random_f32(Shape shape, uint32_t seed, float lo = -1, float hi = 1) {
  Tensor t = Tensor::allocate(DType::kFloat32, std::move(shape)).value();
  uint32_t s = seed * 2654435761u + 12345u;
  for (int64_t i = 0; i < t.numel(); ++i) {
    s = s * 1664525u + 1013904223u;
    t.data<float>()[i] = lo + (hi - lo) * static_cast<float>(s >> 8) / 16777216.0f;
  }
  return t;
}

void check_op(SingleOp op, const std::string& what, double rtol = 1e-4, double atol = 1e-5) {
  check_op_on("vulkan", std::move(op), what, rtol, atol);
}

void check_graph(const GraphMaker& m, const std::vector<Tensor>& inputs, const std::string& what,
                 const FlagList& flags = {}, double rtol = 1e-4, double atol = 1e-4) {
  check_graph_on("vulkan", m, inputs, what, flags, rtol, atol);
}

}  // namespace

TEST_SUITE("vulkan") {
#if defined(TERN_HAVE_VULKAN)  // (the Vulkan headers: builds without them have no table to test)
  TEST_CASE("memory types: device buffers in device-local memory, host-visible only if cached") {
    // (No device needed: the choice from a device's memory table.)
    constexpr VkMemoryPropertyFlags kLocal = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                                    kVisible = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                               VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                                    kCached = VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
    auto table = [](std::initializer_list<VkMemoryPropertyFlags> types) {
      VkPhysicalDeviceMemoryProperties m{};
      for (VkMemoryPropertyFlags f : types) m.memoryTypes[m.memoryTypeCount++].propertyFlags = f;
      return m;
    };
    // A discrete GPU with a resizable BAR (NVIDIA's order): the BAR type is host-visible but
    // uncached, so device buffers take plain device-local memory and staging the cached type.
    const auto discrete = table({kLocal, kVisible, kVisible | kCached, kLocal | kVisible});
    CHECK(vk::choose_memory_type(discrete, ~0u, 0) == 0);
    CHECK(vk::choose_memory_type(discrete, ~0u, 1) == 2);
    CHECK(vk::choose_memory_type(table({kLocal | kVisible, kLocal}), ~0u, 0) == 1);
    // Only the BAR allowed: it is still device memory.
    CHECK(vk::choose_memory_type(discrete, 1u << 3, 0) == 3);
    // lavapipe and integrated GPUs: one cached memory, read in place.
    const auto unified = table({kLocal, kLocal | kVisible | kCached, kVisible | kCached});
    CHECK(vk::choose_memory_type(unified, ~0u, 0) == 1);
    CHECK(vk::choose_memory_type(unified, ~0u, 1) == 1);
    CHECK(vk::choose_memory_type(table({kLocal}), ~0u, 1) == -1);
  }
#endif

  TEST_CASE("binary ops with broadcasting match the CPU") {
    SKIP_WITHOUT_VULKAN();
    std::vector<std::pair<Shape, Shape>> shapes = broadcast_cases();
    shapes.push_back({{1, 3, 1, 2, 1, 3}, {1, 1, 2, 2, 3}});  // rank 6
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "PRelu"}) {
      uint32_t seed = 1;
      for (const auto& [a, b] : shapes) {
        const bool pow = std::string(op) == "Pow";
        Tensor x = random_f32(a, seed++, pow ? 0.1f : -2.f, 2.f);
        Tensor y = random_f32(b, seed++, pow ? -2.f : 0.5f, 2.f);
        check_op(SingleOp{op, {}, {x, y}, {}},
                 std::string(op) + " " + shape_str(a) + " " + shape_str(b));
      }
    }
  }

  TEST_CASE("unary ops and activations match the CPU (scalar and vec4 paths)") {
    SKIP_WITHOUT_VULKAN();
    for (const char* op : {"Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Neg", "Abs", "Softplus",
                           "HardSwish", "Floor", "Ceil", "Round", "Sin", "Cos", "Sign", "Mish"}) {
      for (const Shape& s : {Shape{2, 3, 8, 8}, Shape{3, 5, 7}}) {  // 4k and not
        check_op(SingleOp{op, {}, {random_f32(s, 3, -4, 4)}, {}}, std::string(op) + shape_str(s));
      }
    }
    const Tensor x = random_f32({4, 32}, 5, -5, 5);
    for (const auto& [what, op] : activation_cases(x, random_f32({4, 33}, 4, 0.1f, 4))) {
      check_op(op, what);
    }
  }

  TEST_CASE("Cast between float32, int32 and int64 matches the CPU") {
    SKIP_WITHOUT_VULKAN();
    for (const auto& [what, op] : integer_cast_cases()) check_op(op, what);
  }

  TEST_CASE("convolutions match the CPU: direct, im2col + GEMM, 1x1 GEMM, grouped, fused") {
    SKIP_WITHOUT_VULKAN();
    struct Case {
      Shape x;
      int64_t m, k, stride, pad, dilation, group;
    };
    const Case cases[] = {{{1, 3, 17, 19}, 8, 3, 1, 1, 1, 1}, {{2, 4, 16, 16}, 5, 3, 2, 1, 1, 1},
                          {{1, 8, 9, 9}, 8, 3, 1, 1, 1, 8},   {{1, 6, 12, 10}, 4, 3, 1, 2, 2, 2},
                          {{1, 16, 8, 8}, 70, 1, 1, 0, 1, 1}, {{1, 3, 23, 23}, 16, 7, 2, 3, 1, 1},
                          {{2, 5, 11, 7}, 3, 1, 2, 0, 1, 1},  {{1, 4, 30}, 6, 5, 1, 2, 1, 1}};
    uint32_t seed = 10;
    for (const Case& c : cases) {
      const bool one_d = c.x.size() == 3;
      Shape wshape = {c.m, c.x[1] / c.group, c.k};
      if (!one_d) wshape.push_back(c.k);
      const Tensor x = random_f32(c.x, seed++);
      const Tensor w = random_f32(wshape, seed++, -0.5f, 0.5f);
      const Tensor b = random_f32({c.m}, seed++);
      const size_t sp = one_d ? 1 : 2;
      Attributes a = attrs({{"strides", attr_ints(std::vector<int64_t>(sp, c.stride))},
                            {"pads", attr_ints(std::vector<int64_t>(2 * sp, c.pad))},
                            {"dilations", attr_ints(std::vector<int64_t>(sp, c.dilation))},
                            {"group", attr_int(c.group)}});
      for (int64_t algo : {0, 1, 2}) {  // auto, direct, gemm
        // Conv + bias -> (+ residual) -> activation: the optimizer makes a FusedConv.
        GraphMaker m;
        const std::vector<int> in = add_inputs(m, {x});
        int y = m.node("Conv", {in[0], m.constant("w", w), m.constant("b", b)}, a);
        const std::string what = "conv " + shape_str(c.x) + " k" + std::to_string(c.k) + " s" +
                                 std::to_string(c.stride) + " g" + std::to_string(c.group) +
                                 " algo " + std::to_string(algo);
        m.g.outputs = {y};
        check_graph(m, {x}, what, {{FlagId::kVulkanConvAlgorithm, algo}});
        GraphMaker fused = m;
        const int r = fused.node("Relu", {y});
        const int sum = fused.node("Add", {r, y});
        fused.g.outputs = {fused.node("HardSigmoid", {sum})};
        check_graph(fused, {x}, what + " fused", {{FlagId::kVulkanConvAlgorithm, algo}});
      }
    }
  }

  TEST_CASE("ConvTranspose matches the CPU") {
    SKIP_WITHOUT_VULKAN();
    const Tensor x = random_f32({1, 4, 7, 9}, 20);
    for (int64_t group : {1, 2}) {
      for (int64_t stride : {1, 2}) {
        const Tensor w = random_f32({4, 6 / group, 3, 3}, 21);
        Attributes a = attrs({{"strides", attr_ints({stride, stride})},
                              {"pads", attr_ints({1, 0, 1, 1})},
                              {"output_padding", attr_ints({stride - 1, 0})},
                              {"group", attr_int(group)}});
        check_op(SingleOp{"ConvTranspose", a, {x}, {w, random_f32({6}, 22)}},
                 "ConvTranspose g" + std::to_string(group) + " s" + std::to_string(stride));
      }
    }
  }

  TEST_CASE("pooling matches the CPU") {
    SKIP_WITHOUT_VULKAN();
    const Tensor x = random_f32({2, 3, 13, 11}, 30);
    for (const char* op : {"MaxPool", "AveragePool"}) {
      for (int64_t ceil_mode : {0, 1}) {
        for (int64_t cip : {0, 1}) {
          Attributes a = attrs({{"kernel_shape", attr_ints({3, 3})},
                                {"strides", attr_ints({2, 2})},
                                {"pads", attr_ints({1, 1, 1, 0})},
                                {"ceil_mode", attr_int(ceil_mode)}});
          if (std::string(op) == "AveragePool") a.set("count_include_pad", attr_int(cip));
          check_op(SingleOp{op, a, {x}, {}}, std::string(op) + " ceil " +
                                                 std::to_string(ceil_mode) + " cip " +
                                                 std::to_string(cip));
        }
      }
    }
    check_op(SingleOp{"GlobalAveragePool", {}, {x}, {}}, "GlobalAveragePool");
    check_op(SingleOp{"GlobalMaxPool", {}, {x}, {}}, "GlobalMaxPool");
  }

  TEST_CASE("MatMul, Gemm and the fused bias/GELU epilogue match the CPU") {
    SKIP_WITHOUT_VULKAN();
    const std::vector<std::pair<Shape, Shape>> shapes = {
        {{1, 1}, {1, 1}},          {{5, 7}, {7, 3}},
        {{64, 64}, {64, 64}},      {{65, 130}, {130, 67}},
        {{2, 3, 9, 17}, {17, 33}}, {{2, 1, 9, 17}, {3, 17, 5}},
        {{4, 8, 16}, {4, 16, 8}},  {{17}, {17, 4}}};
    uint32_t seed = 40;
    for (const auto& [a, b] : shapes) {
      check_op(SingleOp{"MatMul", {}, {random_f32(a, seed++), random_f32(b, seed++)}, {}},
               "MatMul " + shape_str(a) + " x " + shape_str(b));
    }
    for (int64_t ta : {0, 1}) {
      for (int64_t tb : {0, 1}) {
        for (const Shape& c : {Shape{13}, Shape{11, 1}, Shape{11, 13}, Shape{}}) {
          const Tensor A = random_f32(ta ? Shape{29, 11} : Shape{11, 29}, seed++);
          const Tensor B = random_f32(tb ? Shape{13, 29} : Shape{29, 13}, seed++);
          Attributes at = attrs({{"transA", attr_int(ta)},
                                 {"transB", attr_int(tb)},
                                 {"alpha", attr_float(0.5f)},
                                 {"beta", attr_float(2.0f)}});
          check_op(
              SingleOp{"Gemm", at, {A, B}, {random_f32(c, seed++)}},
              "Gemm tA" + std::to_string(ta) + " tB" + std::to_string(tb) + " C" + shape_str(c));
        }
      }
    }
    // MatMul + bias + exact GELU (Erf form): the optimizer's FusedMatMul.
    GraphMaker m;
    const Tensor x = random_f32({2, 10, 24}, seed++);
    const std::vector<int> in = add_inputs(m, {x});
    const int mm = m.node("MatMul", {in[0], m.constant("w", random_f32({24, 40}, seed++))});
    const int biased = m.node("Add", {mm, m.constant("b", random_f32({40}, seed++))});
    const int half = m.node("Div", {biased, m.constant("sqrt2", make_f32({}, {1.4142135f}))});
    const int erf = m.node("Erf", {half});
    const int one = m.node("Add", {erf, m.constant("one", make_f32({}, {1.0f}))});
    const int prod = m.node("Mul", {biased, one});
    m.g.outputs = {m.node("Mul", {prod, m.constant("half", make_f32({}, {0.5f}))})};
    check_graph(m, {x}, "MatMul + bias + GELU");
  }

  TEST_CASE("Softmax, LayerNormalization and reductions match the CPU") {
    SKIP_WITHOUT_VULKAN();
    const Tensor x = random_f32({3, 5, 70}, 50, -6, 6);
    for (int64_t axis : {-1, 1, 0}) {
      for (const char* op : {"Softmax", "LogSoftmax"}) {
        check_op(SingleOp{op, attrs({{"axis", attr_int(axis)}}), {x}, {}},
                 std::string(op) + " axis " + std::to_string(axis));
      }
    }
    for (int64_t axis : {-1, 1}) {
      const int64_t n = axis == -1 ? 70 : 350;
      const Shape ps = axis == -1 ? Shape{70} : Shape{5, 70};
      (void)n;
      SingleOp ln{"LayerNormalization",
                  attrs({{"axis", attr_int(axis)}}),
                  {x},
                  {random_f32(ps, 51), random_f32(ps, 52)}};
      ln.opset = 17;
      check_op(ln, "LayerNormalization axis " + std::to_string(axis));
      ln.constants.pop_back();
      check_op(ln, "LayerNormalization without bias");
    }
    const Tensor pos = random_f32({2, 3, 4, 50}, 53, 0.5f, 1.5f);
    for (const char* op :
         {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare",
          "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"}) {
      for (const auto& axes : {std::vector<int64_t>{3}, {1}, {2, 3}, {0, 1}}) {
        for (int64_t keep : {0, 1}) {
          check_op(
              SingleOp{
                  op, attrs({{"axes", attr_ints(axes)}, {"keepdims", attr_int(keep)}}), {pos}, {}},
              std::string(op) + " axes " + shape_str(axes) + " keep " + std::to_string(keep), 1e-4,
              1e-5);
        }
      }
    }
  }

  TEST_CASE("data movement matches the CPU: reshape family, Transpose, Slice, Expand, Concat") {
    SKIP_WITHOUT_VULKAN();
    const Tensor x = random_f32({2, 3, 4, 5}, 60);
    const Tensor xi = make_i64({2, 3}, {1, -2, 3, 4000000000LL, 5, -6});
    check_op(SingleOp{"Reshape", {}, {x}, {make_i64({2}, {6, 20})}}, "Reshape");
    check_op(SingleOp{"Flatten", attrs({{"axis", attr_int(2)}}), {x}, {}}, "Flatten");
    check_op(SingleOp{"Unsqueeze", {}, {xi}, {make_i64({1}, {1})}}, "Unsqueeze int64");
    for (const auto& perm : {std::vector<int64_t>{0, 2, 1, 3}, {3, 2, 1, 0}, {1, 0, 3, 2}}) {
      check_op(SingleOp{"Transpose", attrs({{"perm", attr_ints(perm)}}), {x}, {}},
               "Transpose " + shape_str(perm));
    }
    check_op(SingleOp{"Transpose", {}, {xi}, {}}, "Transpose int64");
    check_op(SingleOp{"Slice",
                      {},
                      {x},
                      {make_i64({2}, {1, -1}), make_i64({2}, {3, -5}), make_i64({2}, {1, 3}),
                       make_i64({2}, {1, -2})}},
             "Slice with a negative step");
    check_op(SingleOp{"Expand", {}, {random_f32({3, 1, 5}, 61)}, {make_i64({4}, {2, 3, 4, 5})}},
             "Expand");
    for (int64_t axis : {0, 1, 3, -2}) {
      check_op(SingleOp{"Concat",
                        attrs({{"axis", attr_int(axis)}}),
                        {x, random_f32({2, 3, 4, 5}, 62), random_f32({2, 3, 4, 5}, 63)},
                        {}},
               "Concat axis " + std::to_string(axis));
    }
    check_op(SingleOp{"Concat", attrs({{"axis", attr_int(1)}}), {xi, xi}, {}}, "Concat int64");
  }

  TEST_CASE("Gather and Resize match the CPU") {
    SKIP_WITHOUT_VULKAN();
    const Tensor table = random_f32({10, 6}, 70);
    const Tensor idx = make_i64({2, 3}, {0, 9, -1, 4, 4, -10});
    check_op(SingleOp{"Gather", {}, {table, idx}, {}}, "Gather runtime int64 indices");
    check_op(SingleOp{"Gather",
                      attrs({{"axis", attr_int(1)}}),
                      {table},
                      {make_i64({2, 3}, {0, 5, -1, 4, 4, -6})}},
             "Gather axis 1");
    Tensor i32 = Tensor::allocate(DType::kInt32, {3}).value();
    i32.data<int32_t>()[0] = 2, i32.data<int32_t>()[1] = -3, i32.data<int32_t>()[2] = 0;
    check_op(SingleOp{"Gather", {}, {table, i32}, {}}, "Gather int32 indices");
    check_op(SingleOp{"Gather",
                      {},
                      {make_i64({10, 2}, {1,  2,  3,  4,  5,  6,  7,  8,  9,   10,
                                          11, 12, 13, 14, 15, 16, 17, 18, -19, 5000000000LL}),
                       idx},
                      {}},
             "Gather of int64 data");
    const Tensor img = random_f32({1, 3, 7, 9}, 71);
    for (const char* mode : {"nearest", "linear"}) {
      for (const char* ct : {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"}) {
        Attributes a = attrs(
            {{"mode", attr_string(mode)}, {"coordinate_transformation_mode", attr_string(ct)}});
        check_op(
            SingleOp{
                "Resize", a, {img}, {std::nullopt, make_f32({4}, {1, 1, 2, 1.5f}), std::nullopt}},
            std::string("Resize ") + mode + " " + ct);
      }
    }
  }

  TEST_CASE("Gather indices out of range at run time fail the run, as on the CPU") {
    SKIP_WITHOUT_VULKAN();
    check_gather_out_of_range("vulkan");
  }

  TEST_CASE("BatchNormalization and FusedBatchNormalization match the CPU") {
    SKIP_WITHOUT_VULKAN();
    check_batch_norms_on("vulkan", 80);
  }

  // The CPU runs the same values in float32; Vulkan stores float16 (and computes in float16 with
  // vulkan.allow_fp16_reduced_precision where the device has shaderFloat16).
  TEST_CASE("float16 shaders match float32 on the CPU (storage, and arithmetic under the flag)") {
    SKIP_WITHOUT_VULKAN();
    auto check_f16 = [](SingleOp op, const std::string& what, double tol) {
      std::vector<Tensor> halves;
      for (Tensor& t : op.runtime) {
        halves.push_back(to_f16(t));
        t = make_f32(t.shape(), as_floats(halves.back()));  // the values float16 can hold
      }
      auto cpu = op.run();
      REQUIRE_MESSAGE(cpu.has_value(), cpu.status().message());
      op.runtime = halves;
      op.backends = {"vulkan"};
      auto vk = op.run();
      REQUIRE_MESSAGE(vk.has_value(), what, ": ", vk.status().message());
      CHECK((*vk)[0].dtype() == DType::kFloat16);
      REQUIRE((*vk)[0].shape() == (*cpu)[0].shape());
      const std::vector<float> a = as_floats((*vk)[0]), b = as_floats((*cpu)[0]);
      Comparison c = compare(a.data(), b.data(), a.size(), tol, tol);
      CHECK_MESSAGE(c.mismatches == 0, what, ": ", c.mismatches, " of ", a.size(),
                    " differ, max abs err ", c.max_abs);
    };
    const Tensor a = random_f32({4, 33, 20}, 90), b = random_f32({20}, 91);
    const Tensor w = random_f32({20, 17}, 92);
    for (int64_t arith : {0, 1}) {
      const std::vector<std::pair<FlagId, int64_t>> flags = {
          {FlagId::kVulkanFp16Arithmetic, arith}};
      SingleOp add{"Add", {}, {a, b}, {}};
      add.flags = flags;
      check_f16(add, "float16 Add", 2e-3);
      SingleOp mm{"MatMul", {}, {a, w}, {}};
      mm.flags = flags;
      check_f16(mm, "float16 MatMul", arith ? 2e-2 : 4e-3);
    }
    check_f16(SingleOp{"Relu", {}, {a}, {}}, "float16 Relu", 1e-3);
    check_f16(SingleOp{"Sigmoid", {}, {a}, {}}, "float16 Sigmoid", 2e-3);
    check_f16(SingleOp{"Softmax", {}, {a}, {}}, "float16 Softmax", 2e-3);
    check_f16(SingleOp{"Transpose", attrs({{"perm", attr_ints({2, 0, 1})}}), {a}, {}},
              "float16 Transpose", 0);
    // Off: the Vulkan-only session cannot place the node.
    SingleOp off{"Relu", {}, {to_f16(a)}, {}};
    off.backends = {"vulkan"};
    off.flags = {{FlagId::kVulkanAllowFp16, 0}};
    auto r = off.run();
    REQUIRE_FALSE(r.has_value());
    CHECK(r.status().message().find("vulkan.allow_fp16=0") != std::string::npos);
  }

#if defined(TERN_HAVE_VULKAN)
  TEST_CASE("a run's kernels are recorded into a few command buffers, not one per kernel") {
    SKIP_WITHOUT_VULKAN();
    GraphMaker m;
    const Tensor x = random_f32({1, 8, 16, 16}, 100);
    const std::vector<int> in = add_inputs(m, {x});
    int y = m.node("Conv", {in[0], m.constant("w", random_f32({8, 8, 3, 3}, 101))},
                   attrs({{"pads", attr_ints({1, 1, 1, 1})}}));
    for (int k = 0; k < 16; ++k) y = m.node("Softmax", {m.node("Tanh", {y})});  // cheap kernels
    y = m.node("Softmax", {y});
    m.g.outputs = {m.node("GlobalAveragePool", {y}), y};
    m.g.opset = 13;
    auto model = Model::create(std::move(m.g), nullptr, "submits").value();
    SessionConfig cfg;
    cfg.backends = {backends::get("vulkan").value()};
    auto made = Session::create(model, cfg);
    REQUIRE_MESSAGE(made.has_value(), made.status().message());
    auto session = std::move(made).value();
    vk::Context* ctx = vk::Context::get().value();
    std::vector<Tensor> out;
    REQUIRE(session->run({"x0"}, {&x}, {}, &out).is_ok());  // warm-up: pipelines made
    const vk::Stats before = ctx->stats();
    REQUIRE(session->run({"x0"}, {&x}, {}, &out).is_ok());
    const vk::Stats after = ctx->stats();
    const bool direct_reads = ctx->info().host_visible_memory;
    MESSAGE("submits ", after.submits - before.submits, ", dispatches ",
            after.dispatches - before.dispatches, ", copies ", after.copies - before.copies);
    // Chunks of about 2 ms of device work hold several of these kernels (each of tens to hundreds
    // of microseconds on lavapipe). Two outputs: the first download submits the rest of the run;
    // the second reads mapped memory (lavapipe, integrated GPUs) or needs its own copy.
    const uint64_t commands = after.dispatches - before.dispatches + after.copies - before.copies;
    CHECK(2 * (after.submits - before.submits) <= commands + (direct_reads ? 2u : 4u));
    CHECK(after.dispatches - before.dispatches >= 3);  // conv (+ epilogue), softmax, pool
    CHECK(after.pipelines == before.pipelines);
    CHECK(after.descriptor_sets == before.descriptor_sets);
  }

  TEST_CASE("cancel: a long Vulkan run stops between chunks; the session goes on, nothing kept") {
    SKIP_WITHOUT_VULKAN();
    // One MatMul -> Tanh chain on [64, 64], deep enough for a run of >= 200 ms on this device.
    constexpr int64_t n = 64;
    const LongChain chain = long_chain(n, 32, 16384, vulkan_c_session);
    tern_model* m = chain.model;
    tern_session* s = chain.session;
    const int depth = chain.depth;
    const double whole_ms = chain.whole_ms;
    const std::vector<float>& before = chain.outputs;
    vk::Context* ctx = vk::Context::get().value();
    const vk::Stats chunked = ctx->stats();
    REQUIRE(run_chain(s, nullptr, n) == TERN_OK);
    const vk::Stats after_run = ctx->stats();
    MESSAGE("chain of ", depth, " MatMul -> Tanh: a whole run ", whole_ms, " ms in ",
            after_run.submits - chunked.submits, " submits of ",
            after_run.dispatches - chunked.dispatches, " dispatches");
    CHECK(after_run.submits - chunked.submits > 1);  // chunked,
    CHECK(after_run.submits - chunked.submits < after_run.dispatches - chunked.dispatches);
    // The CPU agrees with the Vulkan run.
    {
      tern_session* cpu = c_api_session(m, 1, 1);
      std::vector<float> want;
      REQUIRE(run_chain(cpu, nullptr, n, &want) == TERN_OK);
      const Comparison c = compare(before.data(), want.data(), want.size(), 1e-3, 1e-4);
      CHECK_MESSAGE(c.mismatches == 0, "max abs ", c.max_abs);
      tern_session_destroy(cpu);
    }
    const uint64_t arenas = arena_bytes(s);
    const vk::Stats start = ctx->stats();

    // Cancels at random points of the run, from a second thread, then a deadline.
    check_cancels_at_random_points(s, n, whole_ms, 12);
    check_deadline_50ms(s, n, whole_ms);

    // The same outputs, and nothing kept by the stopped runs: arenas, device memory, command
    // buffers, descriptor sets, work in flight, frees waiting for the device.
    std::vector<float> after;
    REQUIRE(run_chain(s, nullptr, n, &after) == TERN_OK);
    CHECK(after == before);
    const vk::Stats end = ctx->stats();
    CHECK(arena_bytes(s) == arenas);
    CHECK(end.device_bytes == start.device_bytes);
    CHECK(end.command_buffers == start.command_buffers);
    CHECK(end.descriptor_sets == start.descriptor_sets);
    CHECK(end.busy_recorders == 0);
    CHECK(end.deferred_frees == 0);
    tern_session_destroy(s);
    tern_model_destroy(m);
  }

  TEST_CASE("cpu_fallback 0: a node Vulkan lacks fails session creation, fallback 1 runs it") {
    SKIP_WITHOUT_VULKAN();
    // CumSum has no Vulkan kernel; Relu has one.
    const Tensor x = random_f32({2, 5}, 11);
    GraphMaker m;
    const int in = add_inputs(m, {x})[0];
    Tensor axis = Tensor::allocate(DType::kInt64, {}).value();
    axis.data<int64_t>()[0] = 1;
    const int relu = m.node("Relu", {in});
    m.g.outputs.push_back(m.node("CumSum", {relu, m.constant("axis", axis)}));
    m.g.opset = 13;
    tern_model model{Model::create(m.g, nullptr, "fallback").value()};
    for (int fallback : {0, 1}) {
      CAPTURE(fallback);
      tern_session_options* o = nullptr;
      REQUIRE(tern_session_options_create(&o) == TERN_OK);
      REQUIRE(tern_session_options_set_backends(o, "vulkan") == TERN_OK);
      REQUIRE(tern_session_options_set_cpu_fallback(o, fallback) == TERN_OK);
      tern_session* s = nullptr;
      const tern_status st = tern_session_create(&model, o, &s);
      tern_session_options_destroy(o);
      if (fallback == 0) {
        CHECK(st == TERN_ERR_UNSUPPORTED);
        CHECK(std::string(tern_last_error()).find("CumSum") != std::string::npos);
        CHECK(s == nullptr);
        continue;
      }
      REQUIRE_MESSAGE(st == TERN_OK, std::string(tern_last_error()));
      std::vector<Tensor> out;
      REQUIRE(s->s->run({"x0"}, {&x}, {m.g.values[static_cast<size_t>(m.g.outputs[0])].name}, &out)
                  .is_ok());
      // The placement: Relu on Vulkan, CumSum on the CPU.
      const auto plan = s->s->last_plan();
      REQUIRE(plan != nullptr);
      for (const PlanStep& step : plan->steps) {
        if (step.transfer) continue;
        const std::string op = step.op_node->op_type;
        CHECK_MESSAGE(std::string(step.backend->name()) == (op == "CumSum" ? "cpu" : "vulkan"), op);
      }
      const auto cpu = run_graph(m.g, {x}, {"cpu"});
      compare_outputs(out, cpu, "Relu + CumSum", 1e-5, 1e-6);
      tern_session_destroy(s);
    }
  }

  TEST_CASE("device selection, queries and the embedded shaders") {
    const std::string why = vulkan_missing();
    CHECK(tern_vulkan_is_built() == 1);
    CHECK(vk::find_shader("gemm_f32") != nullptr);
    CHECK(vk::find_shader("gemm_f32")->bindings == 5);
    CHECK(vk::find_shader("no_such_shader") == nullptr);
    CHECK(std::string(tern_config_show()).find("vulkan: ") != std::string::npos);
    auto named = backends::get("vulkan:1");
    REQUIRE_FALSE(named.has_value());
    CHECK(named.status().message().find("TERN_VULKAN_DEVICE") != std::string::npos);
    if (!why.empty()) {
      MESSAGE((std::string("device checks skipped: ") + why));
      return;
    }
    const vk::DeviceInfo& d = vk::Context::get().value()->info();
    CHECK(!d.name.empty());
    CHECK(d.memory > 0);
    CHECK(std::string(tern_config_show()).find(d.name) != std::string::npos);
  }
#endif
}
