// int8 inference: QLinearConv against ONNX's own example (uint8 weights: the reference kernel),
// and the CPU backend's kernel (oneDNN's int8 convolution where built: int8 weights, per-channel
// scales, zero points, bias, groups, strides, Relu) against an independent float computation
// (dequantise, convolve in double, requantise: round half to even, saturate); malformed scales
// and zero points refused; QDQ convolutions and matmuls fused into QLinearConv / QLinearMatMul
// computing what the QDQ ops compute one by one; QLinearMatMul's oneDNN kernel against the
// reference; the vectorised per-tensor QuantizeLinear / DequantizeLinear against the reference.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "core/opt/optimizer.h"

#include "backends/cpu/cpu_capability.h"
#include "c_api.h"
#include "cpu_kernel_harness.h"
#include "graph_builder.h"
#include "test_util.h"
#include "unit/optimizer_harness.h"
#include "unit/quant_graph.h"

using namespace tern;
using namespace tern_test;
using namespace tern_test::cpu_kernels;

namespace {

template <class T>
Tensor make_int(DType dt, const Shape& shape, const std::vector<int64_t>& v) {
  Tensor t = Tensor::allocate(dt, shape).value();
  for (size_t i = 0; i < v.size(); ++i) t.data<T>()[i] = static_cast<T>(v[i]);
  return t;
}

// The op's reference kernel (ops/) on ins, constants marked.
Tensor reference_output(const std::string& op, const Attributes& at,
                        const std::vector<Tensor*>& ins, const std::vector<bool>& constant) {
  auto k = inferred(op, at, ins, constant);
  auto kernel = OpRegistry::global().find(op)->reference(k->ctx);
  REQUIRE_MESSAGE(kernel.has_value(), kernel.status().message());
  return run_kernel(**kernel, k->ctx, ins, 1);
}

// Whether oneDNN's int8 kernels take full-range int8 weights here: VNNI in effect (without it
// they would saturate 16-bit pair sums, and decline).
bool onednn_int8_exact() {
  return tern_onednn_is_available() && cpu_features().avx512_vnni &&
         std::string(tern_cpu_get_capability()) == "AVX512";
}

struct QConvCase {
  int64_t n = 1, c = 8, h = 9, w = 7, m = 12, kh = 3, kw = 3, group = 1, stride = 1, pad = 1;
  bool per_channel = true, bias = true, relu = false, int8_out = false;
};

// The float path: x, w dequantised, the convolution in double, requantised.
std::vector<int64_t> float_path(const QConvCase& k, const Tensor& x, double xs, int64_t xz,
                                const Tensor& w, const std::vector<double>& ws, const Tensor* b,
                                double ys, int64_t yz) {
  const int64_t oh = (k.h + 2 * k.pad - k.kh) / k.stride + 1;
  const int64_t ow = (k.w + 2 * k.pad - k.kw) / k.stride + 1;
  const int64_t cg = k.c / k.group, mg = k.m / k.group;
  std::vector<int64_t> out;
  const int64_t lo = k.int8_out ? -128 : 0, hi = k.int8_out ? 127 : 255;
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t m = 0; m < k.m; ++m)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          const double wsm = ws.size() == 1 ? ws[0] : ws[static_cast<size_t>(m)];
          double acc = b ? b->int_at(m) * xs * wsm : 0.0;
          const int64_t g = m / mg;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t a = 0; a < k.kh; ++a)
              for (int64_t bb = 0; bb < k.kw; ++bb) {
                const int64_t y = i * k.stride - k.pad + a, xx = j * k.stride - k.pad + bb;
                if (y < 0 || y >= k.h || xx < 0 || xx >= k.w) continue;
                const double xv =
                    (x.int_at(((n * k.c + g * cg + ci) * k.h + y) * k.w + xx) - xz) * xs;
                const double wv = w.int_at(((m * cg + ci) * k.kh + a) * k.kw + bb) * wsm;
                acc += xv * wv;
              }
          if (k.relu) acc = std::max(acc, 0.0);
          const double q = std::nearbyint(acc / ys) + static_cast<double>(yz);
          out.push_back(static_cast<int64_t>(std::clamp(q, double(lo), double(hi))));
        }
  return out;
}

}  // namespace

TEST_SUITE("ops") {
  TEST_CASE("QLinearConv: ONNX's example (uint8 weights, zero point 255)") {
    Tensor x = make_int<uint8_t>(
        DType::kUInt8, {1, 1, 7, 7},
        {255, 174, 162, 25,  203, 168, 58,  15,  59,  237, 95,  129, 0,  64,  56, 242, 153,
         221, 168, 12,  166, 232, 178, 186, 195, 237, 162, 237, 188, 39, 124, 77, 80,  102,
         43,  127, 230, 21,  83,  41,  40,  134, 255, 154, 92,  141, 42, 148, 247});
    Tensor xs = make_f32({}, {0.00369204697f}), ys = make_f32({}, {0.00162681262f});
    Tensor xz = make_int<uint8_t>(DType::kUInt8, {}, {132});
    Tensor w = make_int<uint8_t>(DType::kUInt8, {1, 1, 1, 1}, {0});
    Tensor ws = make_f32({1}, {0.00172794575f});
    Tensor wz = make_int<uint8_t>(DType::kUInt8, {1}, {255});
    Tensor yz = make_int<uint8_t>(DType::kUInt8, {}, {123});
    const std::vector<int64_t> want = {
        0,   81,  93,  230, 52,  87,  197, 240, 196, 18,  160, 126, 255, 191, 199, 13,  102,
        34,  87,  243, 89,  23,  77,  69,  60,  18,  93,  18,  67,  216, 131, 178, 175, 153,
        212, 128, 25,  234, 172, 214, 215, 121, 0,   101, 163, 114, 213, 107, 8};
    std::vector<Tensor*> ins = {&x, &xs, &xz, &w, &ws, &wz, &ys, &yz};
    Prepared got =
        run_cpu("QLinearConv", {}, ins, {false, true, true, true, true, true, true, true});
    REQUIRE(got.outputs[0].dtype() == DType::kUInt8);
    for (size_t i = 0; i < want.size(); ++i) {
      CAPTURE(i);
      CHECK(got.outputs[0].int_at(static_cast<int64_t>(i)) == want[i]);
    }
  }

  TEST_CASE("QLinearConv: int8 weights, per-channel scales, bias, groups, Relu, int8 output") {
    std::mt19937 rng(71);
    std::vector<QConvCase> cases;
    cases.push_back({});
    QConvCase grouped;
    grouped.group = 2;
    grouped.stride = 2;
    grouped.per_channel = false;
    cases.push_back(grouped);
    QConvCase depthwise;
    depthwise.c = depthwise.m = depthwise.group = 16;
    depthwise.relu = true;
    depthwise.int8_out = true;
    cases.push_back(depthwise);
    QConvCase pointwise;
    pointwise.kh = pointwise.kw = 1;
    pointwise.pad = 0;
    pointwise.c = 32;
    pointwise.m = 24;
    pointwise.bias = false;
    pointwise.relu = true;
    cases.push_back(pointwise);
    for (const QConvCase& k : cases) {
      CAPTURE(k.group);
      CAPTURE(k.kh);
      std::uniform_int_distribution<int> u8(0, 255), s8(-127, 127), b32(-3000, 3000);
      std::uniform_real_distribution<double> scale(0.002, 0.02);
      std::vector<int64_t> xv(static_cast<size_t>(k.n * k.c * k.h * k.w)), wv, bv;
      for (auto& v : xv) v = u8(rng);
      wv.resize(static_cast<size_t>(k.m * (k.c / k.group) * k.kh * k.kw));
      for (auto& v : wv) v = s8(rng);
      for (int64_t i = 0; i < k.m; ++i) bv.push_back(b32(rng));
      std::vector<double> wsv(k.per_channel ? static_cast<size_t>(k.m) : 1);
      std::vector<float> wsf;
      for (auto& v : wsv) {
        v = static_cast<float>(scale(rng));
        wsf.push_back(static_cast<float>(v));
      }
      const double xsv = 0.0157, ysv = k.relu ? 0.05 : 0.1;
      const int64_t xzv = 117, yzv = k.int8_out ? -5 : 128;
      Tensor x = make_int<uint8_t>(DType::kUInt8, {k.n, k.c, k.h, k.w}, xv);
      Tensor w = make_int<int8_t>(DType::kInt8, {k.m, k.c / k.group, k.kh, k.kw}, wv);
      Tensor b = make_int<int32_t>(DType::kInt32, {k.m}, bv);
      Tensor xs = make_f32({}, {static_cast<float>(xsv)}),
             ys = make_f32({}, {static_cast<float>(ysv)});
      Tensor ws = make_f32({static_cast<int64_t>(wsf.size())}, wsf);
      Tensor xz = make_int<uint8_t>(DType::kUInt8, {}, {xzv});
      Tensor wz = make_int<int8_t>(DType::kInt8, {static_cast<int64_t>(wsf.size())},
                                   std::vector<int64_t>(wsf.size(), 0));
      Tensor yz = k.int8_out ? make_int<int8_t>(DType::kInt8, {}, {yzv})
                             : make_int<uint8_t>(DType::kUInt8, {}, {yzv});
      Attributes at;
      at.set("pads", attr_ints({k.pad, k.pad, k.pad, k.pad}));
      at.set("strides", attr_ints({k.stride, k.stride}));
      at.set("group", attr_int(k.group));
      if (k.relu) at.set("activation", attr_string("Relu"));
      std::vector<Tensor*> ins = {&x, &xs, &xz, &w, &ws, &wz, &ys, &yz};
      if (k.bias) ins.push_back(&b);
      const std::vector<int64_t> want =
          float_path(k, x, xsv, xzv, w, wsv, k.bias ? &b : nullptr, ysv, yzv);
      // The kernel the CPU backend picks (oneDNN's where built), and the reference.
      std::vector<bool> constant(ins.size(), true);
      constant[0] = false;
      const std::string op = k.relu ? "FusedQLinearConv" : "QLinearConv";
      Prepared got = run_cpu(op, at, ins, constant);
      CAPTURE(got.kernel);
      if (onednn_int8_exact()) CHECK(got.kernel.find("int8") != std::string::npos);
      Tensor ref_out = reference_output(op, at, ins, constant);
      REQUIRE(static_cast<size_t>(got.outputs[0].numel()) == want.size());
      // The reference is exact up to how double rounds the product of the scales (a tie may go
      // either way); oneDNN multiplies by one float32 scale: one unit at most, rarely.
      size_t ref_off = 0, kernel_off = 0, kernel_far = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        const int64_t r = ref_out.int_at(static_cast<int64_t>(i));
        const int64_t g = got.outputs[0].int_at(static_cast<int64_t>(i));
        ref_off += r != want[i];
        kernel_off += g != want[i];
        kernel_far += std::abs(g - want[i]) > 1;
      }
      CHECK(ref_off == 0);
      CHECK(kernel_far == 0);
      CHECK(kernel_off * 100 <= want.size());
    }
  }

  TEST_CASE("QLinearConv: malformed scales, zero points and bias are refused") {
    Tensor x = make_int<uint8_t>(DType::kUInt8, {1, 2, 4, 4}, std::vector<int64_t>(32, 3));
    Tensor w = make_int<int8_t>(DType::kInt8, {3, 2, 1, 1}, std::vector<int64_t>(6, 1));
    Tensor s = make_f32({}, {0.1f}), s2 = make_f32({2}, {0.1f, 0.2f});
    Tensor zu = make_int<uint8_t>(DType::kUInt8, {}, {0});
    Tensor zs = make_int<int8_t>(DType::kInt8, {}, {0});
    Tensor b_bad = make_int<int32_t>(DType::kInt32, {2}, {0, 0});
    auto refuse = [&](std::vector<Tensor*> ins) {
      auto k = std::make_unique<Inferred>();
      k->node = Node{"k", "QLinearConv", "", {}, {0}, {}};
      OpContext& ctx = k->ctx;
      ctx.node = &k->node;
      ctx.where = "node 'k' (QLinearConv)";
      ctx.opset = 13;
      for (size_t i = 0; i < ins.size(); ++i) {
        ctx.inputs.push_back(TensorInfo{true, ins[i]->dtype(), ins[i]->shape(), ins[i]});
        ctx.input_names.push_back("in" + std::to_string(i));
      }
      ctx.outputs.assign(1, TensorInfo{true, DType::kUndefined, {}, nullptr});
      return infer_node(*OpRegistry::global().find("QLinearConv"), ctx);
    };
    CHECK(refuse({&x, &s, &zu, &w, &s, &zs, &s, &zu}).is_ok());
    CHECK(!refuse({&x, &s2, &zu, &w, &s, &zs, &s, &zu}).is_ok());  // x_scale of 2
    CHECK(!refuse({&x, &s, &zs, &w, &s, &zs, &s, &zu}).is_ok());   // x_zero int8 for uint8 x
    CHECK(!refuse({&x, &s, &zu, &w, &s2, &zs, &s, &zu}).is_ok());  // w_scale of 2, 3 channels
    CHECK(!refuse({&x, &s, &zu, &w, &s, &zs, &s, &zu, &b_bad}).is_ok());  // bias of 2
    CHECK(!refuse({&x, &s, &zu, &w, &s, &zs, &s, &s}).is_ok());           // y_zero float
  }
}

TEST_SUITE("optimizer") {
  TEST_CASE("QDQ: DequantizeLinear -> Conv (+ Relu) -> QuantizeLinear becomes QLinearConv") {
    // x (float) -> Q -> DQ -> Conv(DQ(w int8, per channel), DQ(b int32) | float b) [-> Relu]
    //   -> Q -> DQ -> y: fused, against the same ops one at a time (float in between).
    for (int variant = 0; variant < 3; ++variant) {  // int32 bias + Relu; float bias; grouped
      CAPTURE(variant);
      const int64_t c = 8, m = 8, group = variant == 2 ? 2 : 1;
      GraphMaker g;
      g.g.opset = 13;
      int x = tern_test::optimizer::image_input(g.g, {1, c, 10, 9});
      std::mt19937 rng(81 + variant);
      std::uniform_int_distribution<int> s8(-127, 127), b32(-2000, 2000);
      std::vector<int64_t> wv(static_cast<size_t>(m * (c / group) * 9)), bv;
      for (auto& v : wv) v = s8(rng);
      for (int64_t i = 0; i < m; ++i) bv.push_back(b32(rng));
      std::vector<float> wsv;
      for (int64_t i = 0; i < m; ++i) wsv.push_back(0.002f + 0.001f * static_cast<float>(i));
      const float xs = 0.02f;
      std::vector<float> bsv, bfv;
      for (int64_t i = 0; i < m; ++i) {
        bsv.push_back(xs * wsv[static_cast<size_t>(i)]);
        bfv.push_back(static_cast<float>(bv[static_cast<size_t>(i)]) * bsv.back());
      }
      Tensor w = make_int<int8_t>(DType::kInt8, {m, c / group, 3, 3}, wv);
      Tensor ws = make_f32({m}, wsv), bs = make_f32({m}, bsv), bf = make_f32({m}, bfv);
      Tensor b = make_int<int32_t>(DType::kInt32, {m}, bv);
      Tensor xsc = make_f32({}, {xs}), ysc = make_f32({}, {0.05f});
      Tensor xz = make_int<uint8_t>(DType::kUInt8, {}, {120}),
             yz = make_int<uint8_t>(DType::kUInt8, {}, {100});
      Attributes axis0, conv;
      axis0.set("axis", attr_int(0));
      conv.set("pads", attr_ints({1, 1, 1, 1}));
      conv.set("group", attr_int(group));
      int xq = g.node("QuantizeLinear", {x, g.constant("xs", xsc), g.constant("xz", xz)});
      int xd = g.node("DequantizeLinear", {xq, g.constant("xs2", xsc), g.constant("xz2", xz)});
      int wd = g.node("DequantizeLinear", {g.constant("w", w), g.constant("ws", ws)}, axis0);
      int bd = variant == 1
                   ? g.constant("bf", bf)
                   : g.node("DequantizeLinear", {g.constant("b", b), g.constant("bs", bs)}, axis0);
      int cv = g.node("Conv", {xd, wd, bd}, conv);
      if (variant == 0) cv = g.node("Relu", {cv});
      const int y = end_with_qdq(g, cv, ysc, yz);
      Graph opt = g.g;
      OptimizerReport r;
      REQUIRE(optimize_graph(opt, &r).is_ok());
      CHECK(r.qdq_convs_fused == 1);
      CHECK(tern_test::optimizer::count_ops(
                opt, variant == 0 ? "FusedQLinearConv" : "QLinearConv") == 1);
      CHECK(tern_test::optimizer::count_ops(opt, "Conv") == 0);

      Tensor xin = random_f32({1, c, 10, 9}, 90 + variant, -2.0f, 2.5f);
      using tern_test::optimizer::one;
      Tensor t = one("QuantizeLinear", {xin}, {xsc, xz});
      t = one("DequantizeLinear", {t}, {xsc, xz});
      Tensor wf = one("DequantizeLinear", {w}, {ws}, axis0);
      Tensor bff = variant == 1 ? bf : one("DequantizeLinear", {b}, {bs}, axis0);
      t = one("Conv", {t}, {wf, bff}, conv);
      if (variant == 0) t = one("Relu", {t}, {});
      t = one("QuantizeLinear", {t}, {ysc, yz});
      Tensor want = one("DequantizeLinear", {t}, {ysc, yz});
      auto session = tern_test::optimizer::cpu_session(g.g, "qdq");
      CHECK(session->optimizer_report().qdq_convs_fused == 1);
      // No float32 copy of the int8 weights is left behind (constant folding of the unread
      // DequantizeLinear would make one).
      for (const Value& v : session->graph().values) {
        CHECK_FALSE((v.constant && v.constant->dtype() == DType::kFloat32 &&
                     v.constant->shape() == w.shape()));
      }
      // One output step (y_scale) at most where float sums round a tie the other way.
      tern_test::optimizer::check_run(*session, xin, y, want, 0.05 + 1e-6, 0.0);
    }
  }
}

TEST_SUITE("cpu_kernels") {
  TEST_CASE("QuantizeLinear / DequantizeLinear per tensor: the CPU kernels equal the reference") {
    std::mt19937 rng(95);
    std::uniform_real_distribution<float> u(-6.0f, 6.0f);
    std::vector<float> xs;
    for (int i = 0; i < 5000; ++i) xs.push_back(u(rng));
    // Ties at the scale below (k + 0.5 steps), saturation, infinities and NaN.
    for (int k = -300; k <= 300; ++k) xs.push_back((static_cast<float>(k) + 0.5f) * 0.03125f);
    for (float f : {1e9f, -1e9f, std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity(), std::nanf(""), 0.0f, -0.0f}) {
      xs.push_back(f);
    }
    Tensor x = make_f32({static_cast<int64_t>(xs.size())}, xs);
    Tensor s = make_f32({}, {0.03125f});
    for (DType t : {DType::kUInt8, DType::kInt8}) {
      CAPTURE(dtype_name(t));
      Tensor z =
          t == DType::kUInt8 ? make_int<uint8_t>(t, {}, {128}) : make_int<int8_t>(t, {}, {-3});
      std::vector<Tensor*> ins = {&x, &s, &z};
      Prepared got = run_cpu("QuantizeLinear", {}, ins, {false, true, true});
      CHECK(got.kernel.rfind("quantize_vec", 0) == 0);
      Tensor want = reference_output("QuantizeLinear", {}, ins, {false, true, true});
      size_t bad = 0;
      for (int64_t i = 0; i < want.numel(); ++i) bad += got.outputs[0].int_at(i) != want.int_at(i);
      CHECK(bad == 0);
      // And back.
      Tensor q = got.outputs[0];
      std::vector<Tensor*> dins = {&q, &s, &z};
      Prepared back = run_cpu("DequantizeLinear", {}, dins, {false, true, true});
      CHECK(back.kernel.rfind("dequantize_vec", 0) == 0);
      Tensor dwant = reference_output("DequantizeLinear", {}, dins, {false, true, true});
      CHECK(std::memcmp(back.outputs[0].raw(), dwant.raw(), dwant.byte_size()) == 0);
    }
  }
}

TEST_SUITE("ops") {
  TEST_CASE("QLinearMatMul: oneDNN's int8 matmul equals the reference; QDQ MatMul fuses into it") {
    std::mt19937 rng(97);
    std::uniform_int_distribution<int> u8(0, 255), s8(-127, 127);
    const int64_t rows = 37, k = 45, n = 29;
    for (bool per_column : {false, true}) {
      CAPTURE(per_column);
      std::vector<int64_t> av(static_cast<size_t>(rows * k)), bv(static_cast<size_t>(k * n));
      for (auto& v : av) v = u8(rng);
      for (auto& v : bv) v = s8(rng);
      std::vector<float> bsv;
      for (int64_t j = 0; j < (per_column ? n : 1); ++j) bsv.push_back(0.003f + 0.0002f * j);
      Tensor a = make_int<uint8_t>(DType::kUInt8, {1, rows, k}, av);
      Tensor b = make_int<int8_t>(DType::kInt8, {k, n}, bv);
      Tensor as = make_f32({}, {0.02f}), ys = make_f32({}, {0.07f});
      Tensor bs = make_f32({static_cast<int64_t>(bsv.size())}, bsv);
      Tensor az = make_int<uint8_t>(DType::kUInt8, {}, {131});
      Tensor bz = make_int<int8_t>(DType::kInt8, {static_cast<int64_t>(bsv.size())},
                                   std::vector<int64_t>(bsv.size(), 0));
      Tensor yz = make_int<int8_t>(DType::kInt8, {}, {4});
      std::vector<Tensor*> ins = {&a, &as, &az, &b, &bs, &bz, &ys, &yz};
      std::vector<bool> constant(ins.size(), true);
      constant[0] = false;
      Prepared got = run_cpu("QLinearMatMul", {}, ins, constant);
      CAPTURE(got.kernel);
      if (onednn_int8_exact()) CHECK(got.kernel.find("int8") != std::string::npos);
      Tensor want = reference_output("QLinearMatMul", {}, ins, constant);
      size_t off = 0, far = 0;
      for (int64_t i = 0; i < want.numel(); ++i) {
        const int64_t d = std::abs(got.outputs[0].int_at(i) - want.int_at(i));
        off += d != 0;
        far += d > 1;
      }
      CHECK(far == 0);
      CHECK(off * 100 <= static_cast<size_t>(want.numel()));

      // x (float) -> Q -> DQ -> MatMul(DQ(b)) -> Q -> DQ: fused into QLinearMatMul, the same
      // values as op by op.
      GraphMaker g;
      g.g.opset = 13;
      ValueType type{DType::kFloat32, true, {{1, ""}, {rows, ""}, {k, ""}}};
      int x = g.g.add_value("x", type);
      g.g.inputs.push_back(x);
      Attributes axis1;
      axis1.set("axis", attr_int(1));
      Tensor yzu = make_int<uint8_t>(DType::kUInt8, {}, {128});
      int xq = g.node("QuantizeLinear", {x, g.constant("as", as), g.constant("az", az)});
      int xd = g.node("DequantizeLinear", {xq, g.constant("as2", as), g.constant("az2", az)});
      int bd = g.node("DequantizeLinear", {g.constant("b", b), g.constant("bs", bs)}, axis1);
      const int y = end_with_qdq(g, g.node("MatMul", {xd, bd}), ys, yzu);
      Graph opt = g.g;
      OptimizerReport r;
      REQUIRE(optimize_graph(opt, &r).is_ok());
      CHECK(r.qdq_matmuls_fused == 1);
      CHECK(tern_test::optimizer::count_ops(opt, "QLinearMatMul") == 1);
      Tensor xin = random_f32({1, rows, k}, 98, -2.5f, 2.5f);
      using tern_test::optimizer::one;
      Tensor t = one("DequantizeLinear", {one("QuantizeLinear", {xin}, {as, az})}, {as, az});
      t = one("MatMul", {t}, {one("DequantizeLinear", {b}, {bs}, axis1)});
      Tensor wantf = one("DequantizeLinear", {one("QuantizeLinear", {t}, {ys, yzu})}, {ys, yzu});
      auto session = tern_test::optimizer::cpu_session(g.g, "qdq_mm");
      CHECK(session->optimizer_report().qdq_matmuls_fused == 1);
      tern_test::optimizer::check_run(*session, xin, y, wantf, 0.07 + 1e-6, 0.0);
    }
  }
}
