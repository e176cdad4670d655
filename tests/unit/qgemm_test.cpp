// Tern's int8 GEMM (backends/cpu/qgemm.h) and the kernels on it (QLinearConv, FusedQLinearConv,
// QLinearMatMul), on every path this CPU runs (portable everywhere; the dot-product path on
// aarch64 CPUs with it, e.g. qemu-aarch64's default CPU):
// - the GEMM against a naive int64 GEMM, with power-of-two scales so the float requantisation
//   is exact and the results must be equal;
// - the kernels against the ops' reference kernels on random shapes (odd K, N off the panel
//   width, groups, depthwise, strides, padding, dilations, per-channel and per-tensor scales,
//   uint8 and int8 sources and outputs, zero points, Relu, bias): equal, or one unit off where
//   the float32 scale rounds a near-tie the other way than the reference's double (counted,
//   at most 1% of outputs); and the paths equal to each other bit for bit.
// Seeds are random and printed.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <set>

#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/qgemm.h"
#include "core/kernel_registry.h"
#include "cpu_kernel_harness.h"
#include "unit/quant_graph.h"

using namespace tern;
using namespace tern_test;
using namespace tern_test::cpu_kernels;

namespace {

// Naive C = requantise(L x R + bias) in double: exact for the power-of-two scales used here.
std::vector<int64_t> naive_gemm(const std::vector<int8_t>& l, const std::vector<int8_t>& r,
                                int64_t m, int64_t n, int64_t k, const std::vector<int32_t>& bias,
                                const std::vector<float>& scale, const qgemm::Epilogue& e) {
  std::vector<int64_t> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      int64_t acc = 0;
      for (int64_t t = 0; t < k; ++t) {
        acc += int64_t{l[static_cast<size_t>(i * k + t)]} * r[static_cast<size_t>(t * n + j)];
      }
      const size_t q = static_cast<size_t>(e.per_row ? i : j);
      const double v = static_cast<double>(acc + bias[q]) * scale[q];
      const double lo = e.lo, hi = e.hi;
      c[static_cast<size_t>(i * n + j)] =
          static_cast<int64_t>(std::nearbyint(std::clamp(v, lo, hi))) + e.zero;
    }
  }
  return c;
}

// The caps to run under, with the GEMM path each gives: auto (the best) and DEFAULT (portable).
std::vector<std::pair<const char*, qgemm::Path>> caps() {
  std::vector<std::pair<const char*, qgemm::Path>> c = {{"DEFAULT", qgemm::Path::kPortable}};
  const qgemm::Path best = qgemm::best_path(0);
  if (best != qgemm::Path::kPortable) c.push_back({"auto", best});
  return c;
}

template <class T>
Tensor random_int(DType dt, const Shape& shape, std::mt19937& rng, int lo, int hi) {
  Tensor t = Tensor::allocate(dt, shape).value();
  std::uniform_int_distribution<int> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = static_cast<T>(u(rng));
  return t;
}
Tensor random_q(DType dt, const Shape& shape, std::mt19937& rng) {
  return dt == DType::kUInt8 ? random_int<uint8_t>(dt, shape, rng, 0, 255)
                             : random_int<int8_t>(dt, shape, rng, -128, 127);
}

// Weights of `shape` with `count` scales in [0.002, 0.02) and zero points: int8 with 0, or
// uint8 with 128.
struct QWeights {
  Tensor w, scale, zero;
};
QWeights random_weights(const Shape& shape, bool u8, int64_t count, std::mt19937& rng) {
  std::uniform_real_distribution<double> scale(0.002, 0.02);
  std::vector<float> s;
  for (int64_t i = 0; i < count; ++i) s.push_back(static_cast<float>(scale(rng)));
  return {random_q(u8 ? DType::kUInt8 : DType::kInt8, shape, rng), make_f32({count}, s),
          u8 ? random_int<uint8_t>(DType::kUInt8, {count}, rng, 128, 128)
             : random_int<int8_t>(DType::kInt8, {count}, rng, 0, 0)};
}

// Off-by-one outputs of `got` against the reference `want` (none further off allowed).
struct Diff {
  size_t off = 0, far = 0;
};
Diff diff(const Tensor& got, const Tensor& want) {
  REQUIRE(got.numel() == want.numel());
  REQUIRE(got.dtype() == want.dtype());
  Diff d;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const int64_t e = std::abs(got.int_at(i) - want.int_at(i));
    d.off += e == 1;
    d.far += e > 1;
  }
  return d;
}

// One op case through the reference and through Tern's int8 kernel on every path; checks them.
void check_paths(const std::string& op, const Attributes& at, const std::vector<Tensor*>& ins,
                 const std::string& prefix, size_t* total_off, size_t* total,
                 std::set<std::string>* names) {
  std::vector<bool> constant(ins.size(), true);
  constant[0] = false;
  Tensor want = run_reference(op, at, ins, constant);
  std::vector<Tensor> outs;
  for (const auto& entry : caps()) {
    // Not a structured binding: clang 14 refuses one inside CAPTURE.
    const auto& cap = entry.first;
    const auto& path = entry.second;
    CAPTURE(cap);
    FlagRestore restore;
    REQUIRE(tern_flag_set("cpu.max_capability", cap) == TERN_OK);
    auto k = inferred(op, at, ins, constant);
    std::unique_ptr<Kernel> kernel = kernel_named(k->ctx, prefix);
    const std::string name = kernel->name();
    CAPTURE(name);
    names->insert(name);
    if (prefix == "qgemm") CHECK(name == std::string("qgemm.") + qgemm::path_name(path));
    outs.push_back(run_kernel(*kernel, k->ctx, ins, 2));
    const Diff d = diff(outs.back(), want);
    CHECK(d.far == 0);
    CHECK(d.off * 100 <= static_cast<size_t>(want.numel()) + 100);
    *total_off += d.off;
    *total += static_cast<size_t>(want.numel());
  }
  // The paths agree bit for bit (the same requantisation arithmetic).
  for (size_t i = 1; i < outs.size(); ++i) {
    CHECK(std::memcmp(outs[i].raw(), outs[0].raw(), outs[0].byte_size()) == 0);
  }
}

}  // namespace

TEST_SUITE("cpu_kernels") {
  TEST_CASE("qgemm: every path equals a naive GEMM (exact scales)") {
    const unsigned seed = std::random_device{}();
    INFO("seed ", seed);
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int64_t> dim(1, 70);
    std::uniform_int_distribution<int> s8(-128, 127), b32(-5000, 5000), e2(7, 11);
    std::printf("qgemm paths on this CPU (%s):", cpu_feature_names().c_str());
    for (qgemm::Path p : qgemm::available_paths()) std::printf(" %s", qgemm::path_name(p));
    std::printf("\n");
    for (int iter = 0; iter < 40; ++iter) {
      // Rows 1..9 (tile tails), then random; K odd, 1, past a multiple of 16; N off 16.
      const int64_t m = iter < 9 ? iter + 1 : dim(rng), n = iter == 3 ? 16 : dim(rng);
      const int64_t k = iter == 5 ? 1 : iter == 6 ? 17 : dim(rng) * (iter % 3 == 0 ? 7 : 1);
      CAPTURE(m);
      CAPTURE(n);
      CAPTURE(k);
      qgemm::Epilogue e;
      e.per_row = iter % 2 == 0;
      e.out_u8 = iter % 3 == 1;
      e.zero = e.out_u8 ? 100 + iter : iter - 20;
      e.lo = static_cast<float>((e.out_u8 ? 0 : -128) - e.zero);
      e.hi = static_cast<float>((e.out_u8 ? 255 : 127) - e.zero);
      if (iter % 4 == 3) e.lo = std::max(e.lo, 0.0f);  // Relu
      const int64_t kd = qgemm::padded_depth(k);
      std::vector<int8_t> l(static_cast<size_t>(m * k)), r(static_cast<size_t>(k * n));
      for (auto& v : l) v = static_cast<int8_t>(s8(rng));
      for (auto& v : r) v = static_cast<int8_t>(s8(rng));
      const int64_t q = e.per_row ? m : n;
      std::vector<int32_t> bias(static_cast<size_t>(q));
      std::vector<float> scale(static_cast<size_t>(q));
      for (auto& v : bias) v = b32(rng);
      for (auto& v : scale) v = std::ldexp(1.0f, -e2(rng) - (k > 100));
      e.bias = bias.data();
      e.scale = scale.data();
      // L's rows padded to kd with garbage: the padding must multiply R's zeros.
      std::vector<int8_t> lp(static_cast<size_t>(m * kd), 77);
      for (int64_t i = 0; i < m; ++i) {
        std::memcpy(&lp[static_cast<size_t>(i * kd)], &l[static_cast<size_t>(i * k)],
                    static_cast<size_t>(k));
      }
      std::vector<int8_t> rp(static_cast<size_t>(qgemm::packed_bytes(k, n)));
      qgemm::pack(
          k, n, [&](int64_t i, int64_t j) { return r[static_cast<size_t>(i * n + j)]; }, rp.data());
      const std::vector<int64_t> want = naive_gemm(l, r, m, n, k, bias, scale, e);
      for (qgemm::Path p : qgemm::available_paths()) {
        CAPTURE(qgemm::path_name(p));
        // Output rows at a stride past n, guarded: nothing is written outside C.
        const int64_t ldc = n + 3;
        std::vector<uint8_t> c(static_cast<size_t>(m * ldc), 0xAB);
        qgemm::multiply_all(p, lp.data(), kd, rp.data(), kd, m, n, c.data(), ldc, e, 2);
        size_t bad = 0, guard = 0;
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < ldc; ++j) {
            const uint8_t byte = c[static_cast<size_t>(i * ldc + j)];
            if (j >= n) {
              guard += byte != 0xAB;
              continue;
            }
            const int64_t got = e.out_u8 ? byte : static_cast<int8_t>(byte);
            bad += got != want[static_cast<size_t>(i * n + j)];
          }
        }
        CHECK(bad == 0);
        CHECK(guard == 0);
      }
    }
  }

  TEST_CASE("qgemm: QLinearConv / FusedQLinearConv on every path against the reference") {
    const unsigned seed = std::random_device{}();
    INFO("seed ", seed);
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> pick(0, 1 << 20);
    size_t off = 0, total = 0;
    std::set<std::string> names;
    for (int iter = 0; iter < 36; ++iter) {
      CAPTURE(iter);
      const bool depthwise = iter % 4 == 3;
      const int64_t group = depthwise ? 0 : iter % 5 == 2 ? 3 : 1;
      const int64_t cg = depthwise ? 1 : 1 + pick(rng) % 11;
      const int64_t c = depthwise ? 4 + pick(rng) % 13 : cg * group;
      const int64_t mult = depthwise ? 1 + (iter % 8 == 7) : 1;  // depthwise channel multiplier
      const int64_t g = depthwise ? c : group;
      const int64_t m = depthwise ? c * mult : g * (1 + pick(rng) % 19);
      const int64_t kh = iter % 6 == 0 ? 1 : 1 + pick(rng) % 5,
                    kw = iter % 6 == 0 ? 1 : 1 + pick(rng) % 4;
      const int64_t h = kh + pick(rng) % 12, w = kw + pick(rng) % 15;
      const int64_t stride = iter % 6 == 0 && iter % 12 ? 1 : 1 + pick(rng) % 2;
      const int64_t pad = iter % 6 == 0 && iter % 12 ? 0 : pick(rng) % 3;
      const int64_t dil = iter % 7 == 4 ? 2 : 1;
      const int64_t n = 1 + (iter % 9 == 1);
      const DType xt = iter % 2 ? DType::kInt8 : DType::kUInt8;
      const DType yt = iter % 3 ? DType::kUInt8 : DType::kInt8;
      const bool u8_weights = iter % 10 == 5;  // uint8 weights with zero point 128
      const bool per_channel = iter % 4 != 1, bias = iter % 5 != 3, relu = iter % 3 == 2;
      CAPTURE(c);
      CAPTURE(m);
      CAPTURE(g);
      CAPTURE(kh);
      CAPTURE(kw);
      CAPTURE(h);
      CAPTURE(w);
      CAPTURE(stride);
      CAPTURE(pad);
      CAPTURE(dil);
      if ((h + 2 * pad - dil * (kh - 1) - 1) < 0 || (w + 2 * pad - dil * (kw - 1) - 1) < 0)
        continue;
      Tensor x = random_q(xt, {n, c, h, w}, rng);
      QWeights qw = random_weights({m, c / g, kh, kw}, u8_weights, per_channel ? m : 1, rng);
      Tensor xs = make_f32({}, {0.0157f});
      // y_scale near the spread of the sums so outputs cover the range (and some saturate).
      const float ysv =
          static_cast<float>(0.0157 * 0.01 * std::sqrt(double(c / g * kh * kw)) * 120);
      Tensor ys = make_f32({}, {ysv});
      Tensor xz = scalar_q(xt, xt == DType::kUInt8 ? 100 + iter : iter - 15);
      Tensor yz = scalar_q(yt, yt == DType::kUInt8 ? 120 + iter : iter - 10);
      Tensor b = random_int<int32_t>(DType::kInt32, {m}, rng, -20000, 20000);
      Attributes at;
      at.set("pads", attr_ints({pad, pad, pad, pad}));
      at.set("strides", attr_ints({stride, stride}));
      at.set("dilations", attr_ints({dil, dil}));
      at.set("group", attr_int(g));
      if (relu) at.set("activation", attr_string("Relu"));
      std::vector<Tensor*> ins = {&x, &xs, &xz, &qw.w, &qw.scale, &qw.zero, &ys, &yz};
      if (bias) ins.push_back(&b);
      const std::string op = relu ? "FusedQLinearConv" : "QLinearConv";
      check_paths(op, at, ins, c / g == 1 ? "qconv_depthwise" : "qgemm", &off, &total, &names);
    }
    std::printf("qgemm conv: %zu of %zu outputs one unit off the reference; kernels:", off, total);
    for (const std::string& n : names) std::printf(" %s", n.c_str());
    std::printf("\n");
    CHECK(total > 0);
  }

  TEST_CASE("qgemm: QLinearMatMul on every path against the reference") {
    const unsigned seed = std::random_device{}();
    INFO("seed ", seed);
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int64_t> dim(1, 90);
    size_t off = 0, total = 0;
    std::set<std::string> names;
    for (int iter = 0; iter < 24; ++iter) {
      CAPTURE(iter);
      const int64_t m = iter < 6 ? iter + 1 : dim(rng), k = dim(rng) * (iter % 3 ? 1 : 3),
                    n = iter == 2 ? 32 : dim(rng);
      const DType at_ = iter % 2 ? DType::kInt8 : DType::kUInt8;
      const DType yt = iter % 3 ? DType::kUInt8 : DType::kInt8;
      const bool u8_weights = iter % 5 == 4, per_column = iter % 4 != 1;
      CAPTURE(m);
      CAPTURE(k);
      CAPTURE(n);
      // Shapes: [m, k], [2, m, k] and [k] (a vector).
      const Shape ashape = iter % 7 == 3 ? Shape{k} : iter % 3 == 1 ? Shape{2, m, k} : Shape{m, k};
      Tensor a = random_q(at_, ashape, rng);
      QWeights qb = random_weights({k, n}, u8_weights, per_column ? n : 1, rng);
      Tensor as = make_f32({}, {0.02f});
      Tensor ys = make_f32({}, {static_cast<float>(0.02 * 0.01 * std::sqrt(double(k)) * 100)});
      Tensor az = scalar_q(at_, at_ == DType::kUInt8 ? 110 + iter : iter - 12);
      Tensor yz = scalar_q(yt, yt == DType::kUInt8 ? 128 - iter : iter - 12);
      std::vector<Tensor*> ins = {&a, &as, &az, &qb.w, &qb.scale, &qb.zero, &ys, &yz};
      check_paths("QLinearMatMul", {}, ins, "qgemm", &off, &total, &names);
    }
    std::printf("qgemm matmul: %zu of %zu outputs one unit off the reference; kernels:", off,
                total);
    for (const std::string& n : names) std::printf(" %s", n.c_str());
    std::printf("\n");
    CHECK(total > 0);
  }

  TEST_CASE("qgemm: weights whose zero point leaves int8 run the reference") {
    // int8 weights with zero point 100: w - 100 reaches -228, outside int8.
    std::mt19937 rng(5);
    Tensor x = random_q(DType::kUInt8, {1, 4, 5, 5}, rng);
    Tensor w = random_int<int8_t>(DType::kInt8, {3, 4, 1, 1}, rng, -128, -100);
    Tensor s = make_f32({}, {0.01f});
    Tensor xz = scalar_q(DType::kUInt8, 3), yz = scalar_q(DType::kUInt8, 3);
    Tensor wz = scalar_q(DType::kInt8, 100);
    std::vector<Tensor*> ins = {&x, &s, &xz, &w, &s, &wz, &s, &yz};
    auto k = inferred("QLinearConv", {}, ins, {false, true, true, true, true, true, true, true});
    REQUIRE(backends::get("cpu").has_value());
    bool declined = false;
    for (KernelFactory f : KernelRegistry::global().find("QLinearConv", "cpu", DType::kUInt8)) {
      auto kernel = f(k->ctx);
      if (!kernel.has_value() &&
          kernel.status().message().find("qgemm conv") != std::string::npos) {
        declined = true;
        CHECK(kernel.status().message().find("zero point") != std::string::npos);
      }
    }
    CHECK(declined);
  }
}
