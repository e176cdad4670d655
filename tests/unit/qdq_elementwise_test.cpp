// QDQ graphs beyond convolutions and matmuls by constant weights: QLinearAdd (the CPU kernel and
// the reference against an independent float32 computation, exact), the fusion of
// DequantizeLinear -> Add [-> Relu] -> QuantizeLinear into it, ops that move quantised values
// (DequantizeLinear -> Reshape -> Transpose -> QuantizeLinear of the same parameters run on the
// int8 values), and activation x activation MatMuls fused into QLinearMatMul; each fused graph
// against the QDQ ops run one by one.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "core/opt/optimizer.h"
#include "ops/common/op_utils.h"

#include "cpu_kernel_harness.h"
#include "graph_builder.h"
#include "test_util.h"
#include "unit/optimizer_harness.h"
#include "unit/quant_graph.h"

using namespace tern;
using namespace tern_test;
using namespace tern_test::cpu_kernels;
using tern_test::optimizer::count_ops;
using tern_test::optimizer::one;

namespace {

Tensor random_q(DType dt, const Shape& shape, uint32_t seed) {
  Tensor t = Tensor::allocate(dt, shape).value();
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(dt == DType::kUInt8 ? 0 : -128,
                                       dt == DType::kUInt8 ? 255 : 127);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dt == DType::kUInt8) {
      t.data<uint8_t>()[i] = static_cast<uint8_t>(d(rng));
    } else {
      t.data<int8_t>()[i] = static_cast<int8_t>(d(rng));
    }
  }
  return t;
}

// x quantised and dequantised, op by op (what fake_quant computes in a graph).
Tensor rounded(const Tensor& x, const Tensor& s, const Tensor& z) {
  const std::vector<std::optional<Tensor>> params = {s, z};
  return one("DequantizeLinear", {one("QuantizeLinear", {x}, params)}, params);
}

// Element i of a broadcast operand of shape `s` within an output of shape `out`.
int64_t broadcast_index(const Shape& out, const Shape& s, int64_t i) {
  int64_t idx = 0, stride = 1;
  for (size_t d = out.size(); d-- > 0;) {
    const int64_t pos = i % out[d];
    i /= out[d];
    const size_t sd = d + s.size();
    if (sd < out.size()) continue;
    const int64_t dim = s[sd - out.size()];
    if (dim != 1) idx += pos * stride;
    stride *= dim;
  }
  return idx;
}

// QLinearAdd's meaning in float32, written out: dequantise, add, Relu, x / scale, round half to
// even, zero point, saturate.
std::vector<int64_t> qadd_expected(const Tensor& a, float as, int az, const Tensor& b, float bs,
                                   int bz, float cs, int cz, DType ct, bool relu,
                                   const Shape& out) {
  std::vector<int64_t> y;
  const int64_t lo = ct == DType::kUInt8 ? 0 : -128, hi = ct == DType::kUInt8 ? 255 : 127;
  for (int64_t i = 0; i < numel(out); ++i) {
    const float x = (static_cast<float>(a.int_at(broadcast_index(out, a.shape(), i))) -
                     static_cast<float>(az)) *
                    as;
    const int64_t j = broadcast_index(out, b.shape(), i);
    const float v = b.dtype() == DType::kFloat32
                        ? b.data<float>()[j]
                        : (static_cast<float>(b.int_at(j)) - static_cast<float>(bz)) * bs;
    float s = x + v;
    if (relu && s < 0) s = 0;
    const double q = std::nearbyint(static_cast<double>(s / cs)) + cz;
    y.push_back(static_cast<int64_t>(std::clamp<double>(q, lo, hi)));
  }
  return y;
}

void check_equal(const Tensor& got, const std::vector<int64_t>& want) {
  REQUIRE(got.numel() == static_cast<int64_t>(want.size()));
  int64_t off = 0;
  for (int64_t i = 0; i < got.numel(); ++i) off += got.int_at(i) != want[static_cast<size_t>(i)];
  CHECK(off == 0);
}

}  // namespace

TEST_SUITE("cpu_kernels") {
  TEST_CASE("QLinearAdd: the CPU kernel and the reference equal dequantise-add-quantise exactly") {
    struct Case {
      Shape a, b;
      DType at, bt, ct;
      bool relu;
    };
    const std::vector<Case> cases = {
        {{2, 3, 5, 37}, {2, 3, 5, 37}, DType::kUInt8, DType::kUInt8, DType::kUInt8, false},
        {{2, 3, 5, 37}, {2, 3, 5, 37}, DType::kInt8, DType::kUInt8, DType::kInt8, true},
        {{4, 1100}, {1100}, DType::kUInt8, DType::kFloat32, DType::kUInt8, false},  // a bias
        {{4, 6, 9}, {9}, DType::kInt8, DType::kInt8, DType::kUInt8, true},
        {{3, 7}, {}, DType::kUInt8, DType::kFloat32, DType::kInt8, false},  // one value
        {{5, 1, 6}, {1, 4, 1}, DType::kUInt8, DType::kUInt8, DType::kUInt8, false},
    };
    uint32_t seed = 1;
    for (const Case& c : cases) {
      CAPTURE(shape_str(c.a));
      CAPTURE(shape_str(c.b));
      CAPTURE(c.relu);
      Tensor a = random_q(c.at, c.a, seed++);
      Tensor b = c.bt == DType::kFloat32 ? random_f32(c.b, seed++, -1.5f, 1.5f)
                                         : random_q(c.bt, c.b, seed++);
      const float as = 0.013f, bs = 0.021f, cs = 0.029f;
      const int az = c.at == DType::kUInt8 ? 131 : -3, bz = c.bt == DType::kUInt8 ? 120 : 5;
      const int cz = c.ct == DType::kUInt8 ? 128 : 2;
      Tensor tas = scalar_f32(as), taz = scalar_q(c.at, az), tcs = scalar_f32(cs),
             tcz = scalar_q(c.ct, cz);
      std::optional<Tensor> tbs, tbz;
      if (c.bt != DType::kFloat32) tbs = scalar_f32(bs), tbz = scalar_q(c.bt, bz);
      std::vector<Tensor*> ins = {
          &a, &tas, &taz, &b, tbs ? &*tbs : nullptr, tbz ? &*tbz : nullptr, &tcs, &tcz};
      std::vector<bool> constant(ins.size(), true);
      constant[0] = constant[3] = false;
      Attributes at;
      if (c.relu) at.set("activation", attr_string("Relu"));
      Shape out = ops::broadcast_shapes(c.a, c.b).value();
      const auto want = qadd_expected(a, as, az, b, bs, bz, cs, cz, c.ct, c.relu, out);
      Prepared got = run_cpu("QLinearAdd", at, ins, constant);
      CAPTURE(got.kernel);
      CHECK(got.kernel.rfind("qadd_vec", 0) == 0);
      check_equal(got.outputs[0], want);
      check_equal(run_reference("QLinearAdd", at, ins, constant), want);
    }
  }

  TEST_CASE("QLinearAdd: malformed operands are refused") {
    Tensor a = random_q(DType::kUInt8, {4}, 1), f = random_f32({4}, 2, -1, 1);
    Tensor s = scalar_f32(0.1f), z = scalar_q(DType::kUInt8, 3), s2 = random_f32({2}, 3, 0.1f, 1);
    auto infer = [](std::vector<Tensor*> ins) {
      Node node{"k", "QLinearAdd", "", {}, {0}, {}};
      OpContext ctx;
      ctx.node = &node;
      ctx.where = "node 'k' (QLinearAdd)";
      for (Tensor* t : ins) {
        ctx.inputs.push_back(TensorInfo{t != nullptr, t ? t->dtype() : DType::kUndefined,
                                        t ? t->shape() : Shape{}, t});
        ctx.input_names.push_back("in");
      }
      ctx.outputs.assign(1, TensorInfo{true, DType::kUndefined, {}, nullptr});
      return infer_node(*OpRegistry::global().find("QLinearAdd"), ctx);
    };
    CHECK(infer({&a, &s, &z, &a, &s, &z, &s, &z}).is_ok());
    CHECK(infer({&a, &s, &z, &f, nullptr, nullptr, &s, &z}).is_ok());
    CHECK_FALSE(infer({&f, &s, &z, &a, &s, &z, &s, &z}).is_ok());       // float A
    CHECK_FALSE(infer({&a, &s, &z, &f, &s, &z, &s, &z}).is_ok());       // float B with a scale
    CHECK_FALSE(infer({&a, &s2, &z, &a, &s, &z, &s, &z}).is_ok());      // scale per element
    CHECK_FALSE(infer({&a, &s, &z, &a, nullptr, &z, &s, &z}).is_ok());  // B_scale missing
    CHECK_FALSE(infer({&a, &s, &z, &a, &s, &z, &s, nullptr}).is_ok());  // C_zero_point missing
    CHECK_FALSE(infer({&a, &s, &s, &a, &s, &z, &s, &z}).is_ok());       // zero point's type
  }
}

TEST_SUITE("optimizer") {
  TEST_CASE("QDQ: Add (+ Relu) of dequantised values or a bias becomes QLinearAdd, bit for bit") {
    for (int form = 0; form < 3; ++form) {  // two activations; + Relu; a constant bias
      CAPTURE(form);
      GraphMaker g;
      g.g.opset = 13;
      const int x = tern_test::optimizer::image_input(g.g, {2, 8, 5, 6});
      Tensor s1 = scalar_f32(0.02f), z1 = scalar_q(DType::kUInt8, 128), s2 = scalar_f32(0.011f),
             z2 = scalar_q(DType::kUInt8, 100), ys = scalar_f32(0.03f),
             yz = scalar_q(DType::kUInt8, 40);
      Tensor bias = random_f32({6}, 9, -1, 1);
      int a = fake_quant(g, x, s1, z1);
      int b = form == 2 ? g.constant("bias", bias) : g.node("Relu", {x});
      if (form != 2) {
        b = fake_quant(g, b, s2, z2);
      }
      int sum = g.node("Add", {a, b});
      if (form == 1) sum = g.node("Relu", {sum});
      const int y = end_with_qdq(g, sum, ys, yz);
      Graph opt = g.g;
      OptimizerReport r;
      REQUIRE(optimize_graph(opt, &r).is_ok());
      CHECK(r.qdq_adds_fused == 1);
      CHECK(count_ops(opt, "QLinearAdd") == 1);
      CHECK(count_ops(opt, "Add") == 0);
      CHECK(count_ops(opt, "Relu") == (form == 2 ? 0u : 1u));

      Tensor xin = random_f32({2, 8, 5, 6}, 17, -3.0f, 3.0f);
      Tensor ta = rounded(xin, s1, z1);
      Tensor tb = bias;
      if (form != 2) {
        tb = rounded(one("Relu", {xin}, {}), s2, z2);
      }
      Tensor t = one("Add", {ta, tb}, {});
      if (form == 1) t = one("Relu", {t}, {});
      Tensor want = rounded(t, ys, yz);
      auto session = tern_test::optimizer::cpu_session(g.g, "qdq_add");
      CHECK(session->optimizer_report().qdq_adds_fused == 1);
      tern_test::optimizer::check_run(*session, xin, y, want, 0.0, 0.0);
    }
  }

  TEST_CASE("QDQ: Reshape and Transpose between equal quantisations move the int8 values") {
    for (bool same : {true, false}) {
      CAPTURE(same);
      GraphMaker g;
      g.g.opset = 13;
      const int x = tern_test::optimizer::image_input(g.g, {2, 6, 8});
      Tensor s = scalar_f32(0.05f), z = scalar_q(DType::kInt8, -7);
      Tensor s_other = scalar_f32(same ? 0.05f : 0.06f);
      Tensor shape = Tensor::allocate(DType::kInt64, {4}).value();
      const int64_t dims[] = {2, 6, 2, 4};
      for (int i = 0; i < 4; ++i) shape.data<int64_t>()[i] = dims[i];
      Attributes perm;
      perm.set("perm", attr_ints({0, 2, 1, 3}));
      int d = fake_quant(g, x, s, z);
      int moved = g.node("Transpose", {g.node("Reshape", {d, g.constant("shape", shape)})}, perm);
      const int y = end_with_qdq(g, moved, s_other, z);
      Graph opt = g.g;
      OptimizerReport r;
      REQUIRE(optimize_graph(opt, &r).is_ok());
      CHECK(r.qdq_moves_folded == (same ? 1u : 0u));
      CHECK(count_ops(opt, "QuantizeLinear") == (same ? 1u : 2u));
      CHECK(count_ops(opt, "Transpose") == 1);

      Tensor xin = random_f32({2, 6, 8}, 5, -4.0f, 4.0f);
      Tensor t = rounded(xin, s, z);
      t = one("Transpose", {one("Reshape", {t}, {shape})}, {}, perm);
      Tensor want = rounded(t, s_other, z);
      auto session = tern_test::optimizer::cpu_session(g.g, "qdq_moves");
      tern_test::optimizer::check_run(*session, xin, y, want, 0.0, 0.0);
    }
  }

  TEST_CASE("QDQ: a MatMul of two dequantised activations becomes QLinearMatMul") {
    GraphMaker g;
    g.g.opset = 13;
    const int x = tern_test::optimizer::image_input(g.g, {2, 9, 16});
    Tensor s1 = scalar_f32(0.02f), z1 = scalar_q(DType::kUInt8, 120), s2 = scalar_f32(0.015f),
           z2 = scalar_q(DType::kUInt8, 131), ys = scalar_f32(0.2f),
           yz = scalar_q(DType::kUInt8, 128);
    Attributes perm;
    perm.set("perm", attr_ints({0, 2, 1}));
    int a = fake_quant(g, x, s1, z1);
    int xt = g.node("Transpose", {g.node("Tanh", {x})}, perm);
    int b = fake_quant(g, xt, s2, z2);
    const int y = end_with_qdq(g, g.node("MatMul", {a, b}), ys, yz);
    Graph opt = g.g;
    OptimizerReport r;
    REQUIRE(optimize_graph(opt, &r).is_ok());
    CHECK(r.qdq_matmuls_fused == 1);
    CHECK(count_ops(opt, "QLinearMatMul") == 1);
    CHECK(count_ops(opt, "MatMul") == 0);

    Tensor xin = random_f32({2, 9, 16}, 23, -2.0f, 2.0f);
    Tensor ta = rounded(xin, s1, z1);
    Tensor tt = one("Transpose", {one("Tanh", {xin}, {})}, {}, perm);
    Tensor tb = rounded(tt, s2, z2);
    Tensor want = rounded(one("MatMul", {ta, tb}, {}), ys, yz);
    auto session = tern_test::optimizer::cpu_session(g.g, "qdq_mm_act");
    // Integer sums against float32 ones: a tie may round the other way, one step of ys.
    tern_test::optimizer::check_run(*session, xin, y, want, 0.2 + 1e-6, 0.0);
  }
}

TEST_SUITE("cpu_kernels") {
  TEST_CASE("MaxPool of uint8 / int8: plain and channels-last equal the reference") {
    struct Case {
      Shape x;
      std::vector<int64_t> kernel, strides, pads, dilations;
      int64_t ceil;
    };
    const std::vector<Case> cases = {
        {{2, 5, 13, 11}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0},  // ResNet's stem pool
        {{1, 3, 9, 10}, {2, 3}, {1, 2}, {0, 1, 0, 1}, {1, 1}, 1},
        {{1, 4, 11, 12}, {3, 2}, {2, 1}, {1, 0, 1, 0}, {2, 3}, 0},
        {{2, 6, 17}, {4}, {3}, {1, 2}, {1}, 1},
        {{1, 2, 5, 6, 7}, {2, 3, 2}, {2, 1, 2}, {0, 1, 1, 1, 1, 0}, {1, 1, 1}, 0},
    };
    uint32_t seed = 40;
    for (DType t : {DType::kUInt8, DType::kInt8}) {
      for (const Case& c : cases) {
        CAPTURE(shape_str(c.x));
        Tensor x = random_q(t, c.x, seed++);
        Attributes at;
        at.set("kernel_shape", attr_ints(c.kernel));
        at.set("strides", attr_ints(c.strides));
        at.set("pads", attr_ints(c.pads));
        at.set("dilations", attr_ints(c.dilations));
        at.set("ceil_mode", attr_int(c.ceil));
        std::vector<Tensor*> ins = {&x};
        Tensor want = run_reference("MaxPool", at, ins, {false});
        Prepared got = run_cpu("MaxPool", at, ins, {false});
        CHECK(got.kernel == "max_pool_8bit");
        std::vector<int64_t> wv;
        for (int64_t i = 0; i < want.numel(); ++i) wv.push_back(want.int_at(i));
        check_equal(got.outputs[0], wv);
        // Channels-last: [N, C, S] stored as [N, S, C].
        const int64_t ch = c.x[1], n = c.x[0];
        auto to_last = [&](const Tensor& v) {
          Tensor r = Tensor::allocate(v.dtype(), v.shape()).value();
          const int64_t s = v.numel() / (n * ch);
          for (int64_t b = 0; b < n; ++b)
            for (int64_t k = 0; k < ch; ++k)
              for (int64_t i = 0; i < s; ++i)
                static_cast<uint8_t*>(r.raw())[(b * s + i) * ch + k] =
                    static_cast<const uint8_t*>(v.raw())[(b * ch + k) * s + i];
          return r;
        };
        Tensor xl = to_last(x);
        std::vector<Tensor*> insl = {&xl};
        Prepared gl =
            run_cpu("MaxPool", at, insl, {false}, static_cast<int>(ch), static_cast<int>(ch));
        CHECK(gl.kernel == "max_pool_8bit");
        Tensor wl = to_last(want);
        std::vector<int64_t> wlv;
        for (int64_t i = 0; i < wl.numel(); ++i) wlv.push_back(wl.int_at(i));
        check_equal(gl.outputs[0], wlv);
      }
    }
  }
}

TEST_SUITE("optimizer") {
  TEST_CASE(
      "QDQ: Gemm by int8 weights (transB, int32 or float bias) becomes (Fused)QLinearMatMul") {
    const int64_t m = 5, k = 24, n = 10;
    // int32 bias; float bias; none (transB 0); int32 bias [1, N] of one scale (per-tensor weights)
    for (int form = 0; form < 4; ++form) {
      CAPTURE(form);
      const bool tb = form != 2;
      GraphMaker g;
      g.g.opset = 13;
      const int x = tern_test::optimizer::image_input(g.g, {m, k});
      Tensor xs = scalar_f32(0.03f), xz = scalar_q(DType::kUInt8, 110), ys = scalar_f32(0.25f),
             yz = scalar_q(DType::kUInt8, 128);
      Tensor w = random_q(DType::kInt8, tb ? Shape{n, k} : Shape{k, n}, 77);
      const bool per_tensor = form == 3;
      Tensor ws = per_tensor ? scalar_f32(0.006f) : random_f32({n}, 78, 0.002f, 0.01f);
      Tensor bias32 = Tensor::allocate(DType::kInt32, per_tensor ? Shape{1, n} : Shape{n}).value();
      Tensor bscale =
          per_tensor ? scalar_f32(0.03f * 0.006f) : Tensor::allocate(DType::kFloat32, {n}).value();
      for (int64_t j = 0; j < n; ++j) {
        bias32.data<int32_t>()[j] = static_cast<int32_t>(j * 37 - 150);
        if (!per_tensor) bscale.data<float>()[j] = 0.03f * ws.data<float>()[j];
      }
      Tensor biasf = random_f32({n}, 79, -0.5f, 0.5f);
      Attributes wax, gattr;
      wax.set("axis", attr_int(tb ? 0 : 1));
      if (tb) gattr.set("transB", attr_int(1));
      int a = fake_quant(g, x, xs, xz);
      int wd = g.node("DequantizeLinear", {g.constant("w", w), g.constant("ws", ws)}, wax);
      std::vector<int> ins = {a, wd};
      Attributes bax;
      bax.set("axis", attr_int(0));
      if (form == 0 || form == 3) {
        ins.push_back(g.node("DequantizeLinear",
                             {g.constant("b", bias32), g.constant("bs", bscale)},
                             per_tensor ? Attributes{} : bax));
      } else if (form == 1) {
        ins.push_back(g.constant("bf", biasf));
      }
      const int y = end_with_qdq(g, g.node("Gemm", ins, gattr), ys, yz);
      Graph opt = g.g;
      OptimizerReport r;
      REQUIRE(optimize_graph(opt, &r).is_ok());
      CHECK(r.qdq_matmuls_fused == 1);
      CHECK(count_ops(opt, "Gemm") == 0);
      CHECK(count_ops(opt, form == 2 ? "QLinearMatMul" : "FusedQLinearMatMul") == 1);
      CAPTURE(per_tensor);

      Tensor xin = random_f32({m, k}, 80, -3.0f, 3.0f);
      Tensor ta = rounded(xin, xs, xz);
      Tensor tw = one("DequantizeLinear", {w}, {ws}, wax);
      std::vector<std::optional<Tensor>> gin = {tw};
      if (form == 0 || form == 3) {
        gin.push_back(one("DequantizeLinear", {bias32}, {bscale}, per_tensor ? Attributes{} : bax));
      }
      if (form == 1) gin.push_back(biasf);
      Tensor t = one("Gemm", {ta}, gin, gattr);
      Tensor want = rounded(t, ys, yz);
      auto session = tern_test::optimizer::cpu_session(g.g, "qdq_gemm");
      // Integer sums against float32 ones (and a float bias rounded to the sums' unit): a tie
      // may round the other way, one step of ys.
      tern_test::optimizer::check_run(*session, xin, y, want, 0.25 + 1e-6, 0.0);
    }
  }
}

TEST_SUITE("cpu_kernels") {
  TEST_CASE("QLinearMatMul through float32 (x86 without VNNI): within a step of the reference") {
#if defined(__x86_64__)
    struct Case {
      Shape a, b;
      bool constant_b, per_column, bias;
    };
    const std::vector<Case> cases = {
        {{3, 7, 20}, {20, 9}, true, true, true},        // a Gemm's weights and bias
        {{2, 6, 16}, {2, 16, 5}, false, false, false},  // attention: B an activation
        {{5, 33}, {33, 17}, true, false, false},
    };
    uint32_t seed = 90;
    for (const Case& c : cases) {
      CAPTURE(shape_str(c.b));
      Tensor a = random_q(DType::kUInt8, c.a, seed++);
      Tensor b = random_q(c.constant_b ? DType::kInt8 : DType::kUInt8, c.b, seed++);
      const int64_t n = c.b.back();
      Tensor as = scalar_f32(0.02f), az = scalar_q(DType::kUInt8, 120);
      Tensor bs = c.per_column ? random_f32({n}, seed++, 0.003f, 0.01f) : scalar_f32(0.011f);
      Tensor bz = Tensor::allocate(b.dtype(), bs.shape()).value();
      for (int64_t j = 0; j < bz.numel(); ++j) {
        static_cast<uint8_t*>(bz.raw())[j] = c.constant_b ? 0 : 131;
      }
      Tensor ys = scalar_f32(c.bias ? 0.05f : 0.4f), yz = scalar_q(DType::kUInt8, 128);
      Tensor bias = Tensor::allocate(DType::kInt32, {n}).value();
      for (int64_t j = 0; j < n; ++j) bias.data<int32_t>()[j] = static_cast<int32_t>(j * 53 - 200);
      std::vector<Tensor*> ins = {&a, &as, &az, &b, &bs, &bz, &ys, &yz};
      if (c.bias) ins.push_back(&bias);
      std::vector<bool> constant(ins.size(), true);
      constant[0] = false;
      constant[3] = c.constant_b;
      const std::string op = c.bias ? "FusedQLinearMatMul" : "QLinearMatMul";
      auto k = inferred(op, {}, ins, constant);
      auto kernel = kernel_named(k->ctx, "qmatmul_via_float");
      REQUIRE(kernel);
      Tensor got = run_kernel(*kernel, k->ctx, ins, 2);
      Tensor want = run_reference(op, {}, ins, constant);
      int64_t far = 0;
      for (int64_t i = 0; i < want.numel(); ++i)
        far += std::abs(got.int_at(i) - want.int_at(i)) > 1;
      CHECK(far == 0);
    }
#else
    MESSAGE("QMatMulViaFloat is registered on x86 only");
#endif
  }
}

TEST_SUITE("optimizer") {
  TEST_CASE("graph.optimize off: the session runs the nodes as imported, with the same results") {
    // Q -> DQ -> Add(bias) -> Relu -> Q -> DQ: fused into QLinearAdd when on, six nodes when off.
    GraphMaker g;
    g.g.opset = 13;
    const int x = tern_test::optimizer::image_input(g.g, {3, 8});
    Tensor s = scalar_f32(0.05f), z = scalar_q(DType::kUInt8, 100);
    Tensor bias = random_f32({8}, 3, -1, 1);
    int d = fake_quant(g, x, s, z);
    int r = g.node("Relu", {g.node("Add", {d, g.constant("b", bias)})});
    const int y = end_with_qdq(g, r, s, z);
    Tensor xin = random_f32({3, 8}, 4, -3.0f, 3.0f);
    std::vector<Tensor> outs[2];
    for (int on = 0; on < 2; ++on) {
      SessionConfig cfg;
      cfg.backends.push_back(backends::get("cpu").value());
      cfg.overrides.set(FlagId::kGraphOptimize, on);
      auto session = Session::create(Model::create(g.g, nullptr, "opt").value(), cfg).value();
      CHECK(session->optimizer_report().qdq_adds_fused == static_cast<size_t>(on));
      CHECK(count_ops(session->graph(), "QLinearAdd") == static_cast<size_t>(on));
      REQUIRE(session->run({"x"}, {&xin}, {session->graph().value_name(y)}, &outs[on]).is_ok());
    }
    for (int64_t i = 0; i < outs[0][0].numel(); ++i) {
      CHECK(outs[0][0].data<float>()[i] == outs[1][0].data<float>()[i]);
    }
  }
}
