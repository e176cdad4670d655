// float16 / bfloat16 on the CPU: the vectorised half <-> float conversions of every ISA level this
// machine has against the portable ones (every half value; floats at rounding ties, subnormals,
// overflow, NaN), and nodes without half kernels of their own (Conv, MatMul, Gemm) run through
// their float32 kernels: their outputs equal the float32 reference on the widened inputs, rounded
// to the node's type.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/vec/vec.h"
#include "core/flags.h"
#include "core/half.h"
#include "cpu_kernel_harness.h"
#include "graph_builder.h"

using namespace tern;
using namespace tern_test;
using namespace tern_test::cpu_kernels;

namespace {

uint16_t to_half_bits(DType dt, float f) {
  return dt == DType::kFloat16 ? float_to_half(f) : float_to_bfloat16(f);
}
float from_half_bits(DType dt, uint16_t h) {
  return dt == DType::kFloat16 ? half_to_float(h) : bfloat16_to_float(h);
}

Tensor random_half(DType dt, const Shape& shape, std::mt19937& rng, float scale = 1.0f) {
  Tensor t = Tensor::allocate(dt, shape).value();
  std::uniform_real_distribution<float> u(-scale, scale);
  auto* p = static_cast<uint16_t*>(t.raw());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = to_half_bits(dt, u(rng));
  return t;
}

Tensor widened(const Tensor& h) {
  Tensor f = Tensor::allocate(DType::kFloat32, h.shape()).value();
  const auto* p = static_cast<const uint16_t*>(h.raw());
  for (int64_t i = 0; i < h.numel(); ++i) f.data<float>()[i] = from_half_bits(h.dtype(), p[i]);
  return f;
}

// Every 16-bit pattern widened by `widen`, then short rows from an odd offset (the vector tails),
// against the portable conversion: how many differ (a NaN for a NaN is equal).
size_t widen_mismatches(void (*widen)(const uint16_t*, float*, int64_t),
                        float (*portable)(uint16_t)) {
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  size_t bad = 0;
  for (int64_t n : {int64_t{65536}, int64_t{37}, int64_t{5}}) {
    const size_t from = n == 65536 ? 0 : 1001;
    std::vector<float> f(static_cast<size_t>(n));
    widen(all.data() + from, f.data(), n);
    for (size_t i = 0; i < f.size(); ++i) {
      const float want = portable(all[from + i]);
      bad += !(std::memcmp(&want, &f[i], 4) == 0 || (std::isnan(want) && std::isnan(f[i])));
    }
  }
  return bad;
}

}  // namespace

TEST_SUITE("cpu_kernels") {
  TEST_CASE("VecOps half conversions equal the portable ones at every ISA level") {
    std::vector<float> floats;
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(-70000.0f, 70000.0f), small(-1e-4f, 1e-4f);
    for (int i = 0; i < 20000; ++i) floats.push_back(i % 2 ? u(rng) : small(rng));
    for (uint16_t h = 0; h < 0x7c00; h += 7) {  // ties: halfway between neighbouring halves
      floats.push_back((half_to_float(h) + half_to_float(static_cast<uint16_t>(h + 1))) / 2);
    }
    for (float f : {0.0f, -0.0f, 65504.0f, 65520.0f, 1e9f, -1e9f, 5.96e-8f, 2.98e-8f, 1e-10f,
                    std::numeric_limits<float>::infinity(), std::nanf("")}) {
      floats.push_back(f);
    }
    for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
      const VecOps& v = vec_ops(isa);
      CAPTURE(v.isa);
      CHECK(widen_mismatches(v.half_to_float, half_to_float) == 0);
      std::vector<uint16_t> h(floats.size());
      v.float_to_half(floats.data(), h.data(), static_cast<int64_t>(floats.size()));
      size_t bad = 0;
      for (size_t i = 0; i < floats.size(); ++i) {
        const uint16_t want = float_to_half(floats[i]);
        const bool nan = (want & 0x7c00) == 0x7c00 && (want & 0x3ff);
        bad += nan ? !((h[i] & 0x7c00) == 0x7c00 && (h[i] & 0x3ff)) : h[i] != want;
      }
      CHECK(bad == 0);
    }
  }

  TEST_CASE("VecOps bfloat16 conversions equal the portable ones at every ISA level") {
    std::vector<float> floats;
    std::mt19937 rng(12);
    std::uniform_real_distribution<float> u(-3e38f, 3e38f), small(-1e-3f, 1e-3f);
    for (int i = 0; i < 20000; ++i) floats.push_back(i % 2 ? u(rng) : small(rng));
    for (uint32_t hi = 0; hi < 0x7f80; hi += 13) {  // ties, and one bit either side of them
      for (uint32_t low : {0x8000u, 0x7fffu, 0x8001u, 0x18000u}) {
        uint32_t bits = (hi << 16) + low;
        float f;
        std::memcpy(&f, &bits, 4);
        floats.push_back(f);
        floats.push_back(-f);
      }
    }
    for (float f : {0.0f, -0.0f, 3.3895e38f, 3.4e38f, 1e-30f, 1e-39f, -1e-40f,
                    std::numeric_limits<float>::infinity(), std::nanf(""), -std::nanf("")}) {
      floats.push_back(f);
    }
    for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
      const VecOps& v = vec_ops(isa);
      CAPTURE(v.isa);
      CHECK(widen_mismatches(v.bfloat16_to_float, bfloat16_to_float) == 0);
      // Odd lengths from an odd offset: the vector tails.
      for (size_t off : {size_t{0}, size_t{3}}) {
        std::vector<uint16_t> h(floats.size() - off);
        v.float_to_bfloat16(floats.data() + off, h.data(), static_cast<int64_t>(h.size()));
        size_t bad = 0;
        for (size_t i = 0; i < h.size(); ++i) {
          const float x = floats[off + i];
          const uint16_t want = float_to_bfloat16(x);
          if (std::isnan(x)) {
            bad += !((h[i] & 0x7f80) == 0x7f80 && (h[i] & 0x7f) && (h[i] & 0x40));
          } else if (std::fpclassify(x) == FP_SUBNORMAL) {
            // VCVTNEPS2BF16 (AVX-512 BF16) reads subnormals as zero of their sign.
            bad += !(h[i] == want || h[i] == (std::signbit(x) ? 0x8000 : 0));
          } else {
            bad += h[i] != want;
          }
        }
        CHECK(bad == 0);
      }
    }
  }

  TEST_CASE("float16 and bfloat16 Conv, MatMul and Gemm run their float32 kernels") {
    std::mt19937 rng(5);
    for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
      CAPTURE(dtype_name(dt));
      struct Case {
        std::string op;
        std::vector<Shape> shapes;
        Attributes attrs;
      };
      Attributes conv;
      conv.set("pads", attr_ints({1, 1, 1, 1}));
      conv.set("group", attr_int(2));
      Attributes gemm;
      gemm.set("transB", attr_int(1));
      const Case cases[] = {
          {"Conv", {{1, 8, 9, 7}, {6, 4, 3, 3}, {6}}, conv},
          {"MatMul", {{3, 5, 40}, {40, 33}}, {}},
          {"Gemm", {{7, 20}, {9, 20}, {9}}, gemm},
      };
      for (const Case& c : cases) {
        CAPTURE(c.op);
        std::vector<Tensor> h, f;
        for (const Shape& s : c.shapes) h.push_back(random_half(dt, s, rng));
        for (const Tensor& t : h) f.push_back(widened(t));
        std::vector<Tensor*> hp, fp;
        for (Tensor& t : h) hp.push_back(&t);
        for (Tensor& t : f) fp.push_back(&t);
        // Weights constant (widened once at prepare) and not.
        for (bool constant : {false, true}) {
          std::vector<bool> known(hp.size(), false);
          for (size_t i = 1; i < known.size(); ++i) known[i] = constant;
          Prepared got = run_cpu(c.op, c.attrs, hp, known);
          // bfloat16 with constant weights: oneDNN's bf16 kernel where the CPU has AVX-512 BF16
          // (bf16 products are exact in float32: the same tolerance holds).
          const bool native =
              dt == DType::kBFloat16 && constant && cpu_features().avx512_bf16 &&
              effective_cpu_isa(Flags::global().get(FlagId::kCpuMaxCapability)) == CpuIsa::kAvx512;
          CAPTURE(got.kernel);
          CHECK(got.kernel.find(native ? "onednn" : "via float32") != std::string::npos);
          REQUIRE(got.outputs[0].dtype() == dt);
          Tensor want = run_reference(c.op, c.attrs, fp);
          REQUIRE(got.outputs[0].shape() == want.shape());
          const auto* g = static_cast<const uint16_t*>(got.outputs[0].raw());
          size_t bad = 0;
          for (int64_t i = 0; i < want.numel(); ++i) {
            // Rounded once to the half type (float32 sums in another order may round to the
            // neighbour): within two units in the last place, relative, or 1e-3 near zero.
            const float w = want.data<float>()[i], x = from_half_bits(dt, g[i]);
            const float ulp = dt == DType::kFloat16 ? 1.0f / 1024 : 1.0f / 128;
            bad += !(std::fabs(x - w) <= 2 * ulp * std::fabs(w) + 1e-3f);
          }
          CHECK(bad == 0);
        }
      }
    }
  }
}
