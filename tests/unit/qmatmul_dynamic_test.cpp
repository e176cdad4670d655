// The integer matmul and convolution kernels beyond a constant int8 B: MatMulInteger and
// QLinearMatMul on oneDNN's int8 matmul with an int32 destination and our own zero-point and
// requantisation epilogue (backends/cpu/onednn/onednn_qmatmul_dynamic.cpp), and ConvInteger on
// Tern's int8 GEMM (backends/cpu/kernels/qlinear_conv.cpp), against naive int64 loops written
// here: random shapes (odd M, N, K, batch dims, B 2-D or batched, A broadcast), uint8 and int8
// operands, zero points per tensor, per row and per column, B constant or read at run time;
// MatMulInteger by a constant B also on Tern's int8 GEMM (backends/cpu/kernels/qlinear_matmul.cpp).
// MatMulInteger and ConvInteger must be exact; QLinearMatMul one quantisation step at most off
// (the float32 scale against double at ties), in at most 1% of outputs. Where oneDNN has VNNI
// the new kernel must be the one chosen; elsewhere (no oneDNN, TERN_CPU_CAPABILITY=AVX2) the
// results must still be right. Seeds are random and printed. Also a timing against the
// reference kernel, printed, not asserted.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <set>

#include "backends/cpu/cpu_libraries.h"
#include "cpu_kernel_harness.h"
#include "graph_builder.h"

using namespace tern;
using namespace tern_test;
using namespace tern_test::cpu_kernels;

namespace {

Tensor random_int8(DType dt, const Shape& shape, std::mt19937& rng) {
  Tensor t = Tensor::allocate(dt, shape).value();
  std::uniform_int_distribution<int> u(dt == DType::kUInt8 ? 0 : -128,
                                       dt == DType::kUInt8 ? 255 : 127);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dt == DType::kUInt8) {
      t.data<uint8_t>()[i] = static_cast<uint8_t>(u(rng));
    } else {
      t.data<int8_t>()[i] = static_cast<int8_t>(u(rng));
    }
  }
  return t;
}

// `count` zero points of type dt (shape [] for one, else [count]).
Tensor zero_points(DType dt, int64_t count, std::mt19937& rng) {
  return random_int8(dt, count == 1 ? Shape{} : Shape{count}, rng);
}

int64_t value_at(const Tensor& t, int64_t i) {
  return t.numel() == 1 ? t.int_at(0) : t.int_at(i);
}

// numpy matmul of (A - za) by (B - zb) in int64: A [..., M, K], B [..., K, N], the batch dims
// broadcast (B's or A's being all ones); za per tensor or per row, zb per tensor or per column.
std::vector<int64_t> naive_matmul(const Tensor& a, const Tensor& b, const Tensor* za,
                                  const Tensor* zb, int64_t batch) {
  const Shape &as = a.shape(), &bs = b.shape();
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  const int64_t a_mats = a.numel() / (m * k), b_mats = b.numel() / (k * n);
  std::vector<int64_t> y(static_cast<size_t>(batch * m * n));
  for (int64_t t = 0; t < batch; ++t) {
    const int64_t ao = (a_mats == 1 ? 0 : t) * m * k, bo = (b_mats == 1 ? 0 : t) * k * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        int64_t acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          acc += (a.int_at(ao + i * k + p) - (za ? value_at(*za, i) : 0)) *
                 (b.int_at(bo + p * n + j) - (zb ? value_at(*zb, j) : 0));
        }
        y[static_cast<size_t>((t * m + i) * n + j)] = acc;
      }
    }
  }
  return y;
}

// The shapes of one case: A's and B's, and the output's matrices.
struct MmShapes {
  Shape a, b;
  int64_t batch;
};
MmShapes random_shapes(int iter, std::mt19937& rng) {
  std::uniform_int_distribution<int64_t> dim(1, 70), small(1, 4);
  const int64_t m = iter < 5 ? iter + 1 : dim(rng), n = iter == 7 ? 64 : dim(rng);
  const int64_t k = iter == 8 ? 1 : dim(rng) * (iter % 3 == 0 ? 5 : 1);
  const int64_t b0 = small(rng), b1 = small(rng);
  switch (iter % 4) {
    case 0:  // 2-D
      return {{m, k}, {k, n}, 1};
    case 1:  // A batched, B 2-D: A's rows folded
      return {{b0, b1, m, k}, {k, n}, b0 * b1};
    case 2:  // both batched alike (attention)
      return {{b0, b1, m, k}, {b0, b1, k, n}, b0 * b1};
    default:  // A broadcast over B's batch
      return {{m, k}, {b0, k, n}, b0};
  }
}

// One random case: shapes, uint8 / int8 operands.
struct MmCase {
  MmShapes s;
  DType at, bt;
  Tensor a, b;
};
MmCase random_case(int iter, std::mt19937& rng) {
  MmCase c{random_shapes(iter, rng),
           iter % 2 ? DType::kInt8 : DType::kUInt8,
           iter % 3 == 1 ? DType::kInt8 : DType::kUInt8,
           {},
           {}};
  c.a = random_int8(c.at, c.s.a, rng);
  c.b = random_int8(c.bt, c.s.b, rng);
  return c;
}

void print_kernels(const char* what, const std::set<std::string>& names) {
  std::printf("%s kernels:", what);
  for (const std::string& n : names) std::printf(" [%s]", n.c_str());
  std::printf("\n");
}

bool onednn_int8_expected() {
  return onednn_int8_vnni();  // false where oneDNN is not built
}

}  // namespace

TEST_SUITE("cpu_kernels") {
  TEST_CASE("MatMulInteger on oneDNN's s32 matmul equals a naive int64 matmul") {
    const unsigned seed = std::random_device{}();
    INFO("seed ", seed);
    std::mt19937 rng(seed);
    std::set<std::string> names;
    for (int iter = 0; iter < 40; ++iter) {
      CAPTURE(iter);
      MmCase mc = random_case(iter, rng);
      const MmShapes& s = mc.s;
      const DType at = mc.at, bt = mc.bt;
      Tensor &a = mc.a, &b = mc.b;
      CAPTURE(shape_str(s.a));
      CAPTURE(shape_str(s.b));
      const int64_t m = s.a[s.a.size() - 2], n = s.b.back();
      Tensor za = zero_points(at, iter % 5 == 2 ? m : 1, rng);
      Tensor zb = zero_points(bt, iter % 7 == 3 ? n : 1, rng);
      const bool b_const = iter % 3 == 2, zero_points_given = iter % 11 != 10;
      std::vector<Tensor*> ins = {&a, &b};
      if (zero_points_given) ins.insert(ins.end(), {&za, &zb});
      const Prepared got =
          run_cpu("MatMulInteger", {}, ins, {false, b_const, iter % 2 == 0, iter % 4 == 0});
      CAPTURE(got.kernel);
      names.insert(got.kernel);
      if (onednn_int8_expected()) CHECK(got.kernel.find("int8 s32") != std::string::npos);
      const std::vector<int64_t> want = naive_matmul(a, b, zero_points_given ? &za : nullptr,
                                                     zero_points_given ? &zb : nullptr, s.batch);
      const Tensor& y = got.outputs[0];
      REQUIRE(y.dtype() == DType::kInt32);
      REQUIRE(y.numel() == static_cast<int64_t>(want.size()));
      size_t bad = 0;
      for (int64_t i = 0; i < y.numel(); ++i) bad += y.data<int32_t>()[i] != want[size_t(i)];
      CHECK(bad == 0);
    }
    print_kernels("MatMulInteger", names);
  }

  TEST_CASE("MatMulInteger by a constant B on Tern's int8 GEMM equals a naive int64 matmul") {
    // The builds without oneDNN and CPUs without VNNI run it: asked for by name here.
    const unsigned seed = std::random_device{}();
    INFO("seed ", seed);
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int64_t> dim(1, 70);
    for (int iter = 0; iter < 24; ++iter) {
      CAPTURE(iter);
      const int64_t m = iter < 5 ? iter + 1 : dim(rng), k = dim(rng) * (iter % 3 ? 1 : 4),
                    n = dim(rng);
      const DType at = iter % 2 ? DType::kInt8 : DType::kUInt8;
      const bool u8_b = iter % 3 != 1, per_column = iter % 4 == 3;
      CAPTURE(m);
      CAPTURE(k);
      CAPTURE(n);
      Tensor a = random_int8(at, iter % 5 == 2 ? Shape{2, m, k} : Shape{m, k}, rng);
      // B minus its zero points within int8 (the GEMM's operand): int8 with 0, or uint8 with
      // zero points near 128 and values clipped to fit.
      Tensor b = random_int8(u8_b ? DType::kUInt8 : DType::kInt8, {k, n}, rng);
      Tensor zb = Tensor::allocate(b.dtype(), per_column ? Shape{n} : Shape{}).value();
      for (int64_t j = 0; j < zb.numel() && u8_b; ++j) {
        zb.data<uint8_t>()[j] = static_cast<uint8_t>(120 + rng() % 16);
      }
      for (int64_t i = 0; i < b.numel() && u8_b; ++i) {
        const int64_t z = value_at(zb, i % n);
        b.data<uint8_t>()[i] = static_cast<uint8_t>(
            std::clamp<int64_t>(b.data<uint8_t>()[i], std::max<int64_t>(0, z - 128), z + 127));
      }
      Tensor za = zero_points(at, 1, rng);
      std::vector<Tensor*> ins = {&a, &b, &za, &zb};
      auto ctx = inferred("MatMulInteger", {}, ins, {false, true, true, true});
      std::unique_ptr<Kernel> kernel = kernel_named(ctx->ctx, "qgemm");
      const Tensor y = run_kernel(*kernel, ctx->ctx, ins, 2);
      const std::vector<int64_t> want = naive_matmul(a, b, &za, &zb, a.rank() == 3 ? 2 : 1);
      REQUIRE(y.numel() == static_cast<int64_t>(want.size()));
      size_t bad = 0;
      for (int64_t i = 0; i < y.numel(); ++i) bad += y.data<int32_t>()[i] != want[size_t(i)];
      CHECK(bad == 0);
    }
  }

  TEST_CASE("QLinearMatMul with B uint8 or read at run time: one step at most from int64 math") {
    const unsigned seed = std::random_device{}();
    INFO("seed ", seed);
    std::mt19937 rng(seed);
    size_t off = 0, total = 0;
    std::set<std::string> names;
    for (int iter = 0; iter < 40; ++iter) {
      CAPTURE(iter);
      MmCase mc = random_case(iter, rng);
      const MmShapes& s = mc.s;
      const DType at = mc.at, bt = mc.bt;
      Tensor &a = mc.a, &b = mc.b;
      CAPTURE(shape_str(s.a));
      CAPTURE(shape_str(s.b));
      const DType yt = iter % 5 == 1 ? DType::kInt8 : DType::kUInt8;
      const int64_t k = s.a.back(), n = s.b.back();
      Tensor za = zero_points(at, 1, rng), zb = zero_points(bt, iter % 6 == 5 ? n : 1, rng);
      Tensor yz = zero_points(yt, 1, rng);
      std::vector<float> bsv;
      std::uniform_real_distribution<double> sc(0.005, 0.02);
      for (int64_t j = 0; j < (iter % 4 == 3 ? n : 1); ++j) bsv.push_back(float(sc(rng)));
      Tensor as = make_f32({}, {0.0123f}), bs = make_f32({int64_t(bsv.size())}, bsv);
      // y_scale near the spread of the sums: outputs cover the range, some saturate.
      Tensor ys = make_f32({}, {static_cast<float>(0.0123 * 0.012 * 128 * std::sqrt(double(k)))});
      std::vector<Tensor*> ins = {&a, &as, &za, &b, &bs, &zb, &ys, &yz};
      // B constant every third case; scales and zero points constant or not.
      const bool b_const = iter % 3 == 2, q_const = iter % 2 == 0;
      const Prepared got =
          run_cpu("QLinearMatMul", {}, ins,
                  {false, q_const, q_const, b_const, q_const, q_const, q_const, q_const});
      CAPTURE(got.kernel);
      names.insert(got.kernel);
      const bool int8_b_zero = bt == DType::kInt8 && zb.numel() == 1 && zb.int_at(0) == 0;
      if (onednn_int8_expected() && !(b_const && q_const && int8_b_zero)) {
        CHECK(got.kernel.find("int8 s32") != std::string::npos);
      }
      const std::vector<int64_t> acc = naive_matmul(a, b, &za, &zb, s.batch);
      const Tensor& y = got.outputs[0];
      REQUIRE(y.numel() == static_cast<int64_t>(acc.size()));
      const double lo = yt == DType::kUInt8 ? 0 : -128, hi = yt == DType::kUInt8 ? 255 : 127;
      size_t far = 0, near = 0;
      for (int64_t i = 0; i < y.numel(); ++i) {
        const int64_t j = i % n;
        const double v = double(acc[size_t(i)]) * as.float_at(0) *
                         bs.float_at(bsv.size() == 1 ? 0 : j) / ys.float_at(0);
        const double want = std::clamp(std::nearbyint(v) + double(yz.int_at(0)), lo, hi);
        const double d = std::abs(double(y.int_at(i)) - want);
        far += d > 1;
        near += d == 1;
      }
      CHECK(far == 0);
      CHECK(near * 100 <= size_t(y.numel()) + 100);
      off += near;
      total += size_t(y.numel());
    }
    std::printf("QLinearMatMul: %zu of %zu outputs one step off int64 math\n", off, total);
    print_kernels("QLinearMatMul", names);
  }

  TEST_CASE("ConvInteger on Tern's int8 GEMM equals a naive int64 convolution") {
    const unsigned seed = std::random_device{}();
    INFO("seed ", seed);
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> pick(0, 1 << 20);
    std::set<std::string> names;
    for (int iter = 0; iter < 30; ++iter) {
      CAPTURE(iter);
      const bool depthwise = iter % 5 == 4;
      const int64_t group = depthwise ? 0 : iter % 4 == 3 ? 2 : 1;
      const int64_t cg = depthwise ? 1 : 1 + pick(rng) % 9;
      const int64_t c = depthwise ? 3 + pick(rng) % 6 : cg * group;
      const int64_t g = depthwise ? c : group;
      const int64_t m = g * (1 + pick(rng) % 7);
      const int64_t kh = 1 + pick(rng) % 4, kw = 1 + pick(rng) % 3;
      const int64_t stride = 1 + pick(rng) % 2, pad = pick(rng) % 3, dil = iter % 6 == 5 ? 2 : 1;
      const int64_t h = dil * (kh - 1) + 1 + pick(rng) % 9, w = dil * (kw - 1) + 1 + pick(rng) % 11;
      const int64_t nb = 1 + (iter % 7 == 1);
      const DType xt = iter % 2 ? DType::kInt8 : DType::kUInt8;
      const bool u8_weights = iter % 3 == 0, per_channel = iter % 4 != 1;
      CAPTURE(c);
      CAPTURE(m);
      CAPTURE(g);
      CAPTURE(kh);
      CAPTURE(kw);
      Tensor x = random_int8(xt, {nb, c, h, w}, rng);
      // Weights minus their zero points within int8 (the GEMM's operand): int8 with zero
      // point 0, or uint8 with zero points near 128 and values clipped to fit.
      const int64_t cw = c / g;
      Tensor wz = u8_weights
                      ? Tensor::allocate(DType::kUInt8, per_channel ? Shape{m} : Shape{}).value()
                      : Tensor::allocate(DType::kInt8, per_channel ? Shape{m} : Shape{}).value();
      for (int64_t o = 0; o < wz.numel(); ++o) {
        if (u8_weights) wz.data<uint8_t>()[o] = static_cast<uint8_t>(120 + pick(rng) % 16);
      }
      Tensor wt = random_int8(u8_weights ? DType::kUInt8 : DType::kInt8, {m, cw, kh, kw}, rng);
      const int64_t per_out = cw * kh * kw;
      for (int64_t i = 0; i < wt.numel() && u8_weights; ++i) {
        const int64_t z = value_at(wz, i / per_out);
        wt.data<uint8_t>()[i] = static_cast<uint8_t>(
            std::clamp<int64_t>(wt.data<uint8_t>()[i], std::max<int64_t>(0, z - 128), z + 127));
      }
      Tensor xz = zero_points(xt, 1, rng);
      Attributes at;
      at.set("pads", attr_ints({pad, pad, pad, pad}));
      at.set("strides", attr_ints({stride, stride}));
      at.set("dilations", attr_ints({dil, dil}));
      at.set("group", attr_int(g));
      std::vector<Tensor*> ins = {&x, &wt, &xz, &wz};
      const Prepared got = run_cpu("ConvInteger", at, ins, {false, true, true, true});
      CAPTURE(got.kernel);
      names.insert(got.kernel);
      CHECK((got.kernel.rfind("qgemm", 0) == 0 || got.kernel.rfind("qconv_depthwise", 0) == 0));
      // Naive convolution in int64.
      const Tensor& y = got.outputs[0];
      REQUIRE(y.dtype() == DType::kInt32);
      const int64_t oh = (h + 2 * pad - dil * (kh - 1) - 1) / stride + 1;
      const int64_t ow = (w + 2 * pad - dil * (kw - 1) - 1) / stride + 1;
      REQUIRE(y.shape() == Shape{nb, m, oh, ow});
      size_t bad = 0;
      for (int64_t b = 0; b < nb; ++b)
        for (int64_t o = 0; o < m; ++o)
          for (int64_t i = 0; i < oh; ++i)
            for (int64_t j = 0; j < ow; ++j) {
              int64_t acc = 0;
              const int64_t gi = o / (m / g);
              for (int64_t ci = 0; ci < cw; ++ci)
                for (int64_t u = 0; u < kh; ++u)
                  for (int64_t v = 0; v < kw; ++v) {
                    const int64_t yy = i * stride - pad + u * dil, xx = j * stride - pad + v * dil;
                    if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
                    const int64_t xv = x.int_at(((b * c + gi * cw + ci) * h + yy) * w + xx);
                    const int64_t wv = wt.int_at(((o * cw + ci) * kh + u) * kw + v);
                    acc += (xv - xz.int_at(0)) * (wv - value_at(wz, o));
                  }
              bad += y.data<int32_t>()[((b * m + o) * oh + i) * ow + j] != acc;
            }
      CHECK(bad == 0);
    }
    print_kernels("ConvInteger", names);
  }

  TEST_CASE("QLinearMatMul [4, 128, 64] x [4, 64, 128] uint8: s32 kernel vs reference (timing)") {
    std::mt19937 rng(7);
    Tensor a = random_int8(DType::kUInt8, {4, 128, 64}, rng);
    Tensor b = random_int8(DType::kUInt8, {4, 64, 128}, rng);
    Tensor as = make_f32({}, {0.01f}), bs = make_f32({}, {0.02f}), ys = make_f32({}, {0.5f});
    Tensor za = zero_points(DType::kUInt8, 1, rng), zb = zero_points(DType::kUInt8, 1, rng);
    Tensor yz = zero_points(DType::kUInt8, 1, rng);
    std::vector<Tensor*> ins = {&a, &as, &za, &b, &bs, &zb, &ys, &yz};
    const std::vector<bool> constant = {false, true, true, false, true, true, true, true};
    auto k = inferred("QLinearMatMul", {}, ins, constant);
    auto fast = backends::get("cpu").value()->prepare(k->ctx);
    REQUIRE(fast.has_value());
    auto ref = OpRegistry::global().find("QLinearMatMul")->reference(k->ctx);
    REQUIRE(ref.has_value());
    auto time = [&](const Kernel& kernel, int runs) {
      (void)run_kernel(kernel, k->ctx, ins, 1);
      const auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < runs; ++r) (void)run_kernel(kernel, k->ctx, ins, 1);
      return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                 .count() /
             runs;
    };
    const double t_fast = time(**fast, 50), t_ref = time(**ref, 3);
    MESSAGE("QLinearMatMul [4,128,64]x[4,64,128] u8, 1 thread: ", std::string((*fast)->name()), " ",
            t_fast, " us, reference ", t_ref, " us (", t_ref / t_fast, "x)");
  }
}
