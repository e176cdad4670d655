// backends/cpu: the optimised kernels (oneDNN, OpenBLAS) against the naive references in ops/,
// over random shapes with a printed seed.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "backends/cpu/cpu_gemm.h"
#include "backends/cpu/own_sgemm.h"
#include "backends/registry.h"
#include "backends_util.h"
#include "core/op_registry.h"
#include "graph_builder.h"
#include "ops/conv.h"
#include "ops/conv_transpose.h"
#include "ops/fused_conv.h"
#include "ops/matmul.h"
#include "test_util.h"
#include "unit/cpu_kernel_harness.h"

using namespace tern;
using namespace tern_test;
using namespace tern_test::cpu_kernels;

namespace {
// ConvTranspose with few channels per group: Tern's rows, the reference in the minimal library.
#if defined(TERN_MINIMAL)
constexpr const char* kGroupedRows = "reference";
#else
constexpr const char* kGroupedRows = "grouped_rows.";
#endif
}  // namespace

TEST_SUITE("cpu_kernels") {
  TEST_CASE("ConvTranspose (oneDNN; patch GEMM when kernel = stride) matches the reference") {
    if (!tern_onednn_is_available()) {
      MESSAGE("skipped: built without oneDNN");
      return;
    }
    const unsigned seed = std::random_device{}();
    INFO("seed ", seed);
    std::mt19937 rng(seed);
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    for (int trial = 0; trial < 40; ++trial) {
      const int64_t g = pick(1, 2), cg = pick(1, 3), mg = pick(1, 3);
      // Every fourth trial: the non-overlapping case (kernel = stride, no pads).
      const int64_t k = pick(1, 4), stride = trial % 4 == 0 ? k : pick(1, 3),
                    pad = trial % 4 == 0 ? 0 : pick(0, static_cast<int>((k - 1) / 2));
      const int64_t outpad = trial % 4 == 0 ? 0 : std::min<int64_t>(pick(0, stride - 1), pad);
      const bool one_d = trial % 3 == 1;  // 1-D (audio decoders) runs as a 2-D of height 1
      Tensor x = one_d ? random_f32({1, g * cg, pick(2, 9)}, rng)
                       : random_f32({1, g * cg, pick(1, 6), pick(1, 6)}, rng);
      Tensor wt = one_d ? random_f32({g * cg, mg, k}, rng) : random_f32({g * cg, mg, k, k}, rng);
      Tensor b = random_f32({g * mg}, rng);
      Attributes a;
      a.set("group", attr_int(g));
      a.set("strides",
            attr_ints(one_d ? std::vector<int64_t>{stride} : std::vector<int64_t>{stride, stride}));
      a.set("pads", attr_ints(one_d ? std::vector<int64_t>{pad, pad}
                                    : std::vector<int64_t>{pad, pad, pad, pad}));
      a.set("output_padding",
            attr_ints(one_d ? std::vector<int64_t>{outpad} : std::vector<int64_t>{outpad, outpad}));
      Prepared p = run_cpu("ConvTranspose", a, {&x, &wt, &b}, {false, true, true});
      const bool patches = g == 1 && k == stride && pad == 0 && outpad == 0;
      if (patches && (!one_d || p.kernel == "patch_gemm")) {
        CHECK(p.kernel == "patch_gemm");
      } else if (g > 1) {  // few channels per group: Tern's rows (the next test)
        CHECK(p.kernel.rfind(kGroupedRows, 0) == 0);
      } else {  // oneDNN, and one of its optimised implementations
        CHECK(p.kernel.rfind("onednn", 0) == 0);
        // Plain activations run on a blocked or channels-last copy: not oneDNN's GEMM, whose
        // JIT code costs ~30 ms on its first call (AVX2 has no direct kernel for a few channels).
        if (std::string(tern_cpu_get_capability()) == "AVX512") {
          CHECK_MESSAGE(p.kernel != "onednn(gemm)", "x ", shape_str(x.shape()));
        }
        // oneDNN keeps its reference code for a single input pixel (no work to speak of).
        if (numel(x.shape()) / x.shape()[1] > 1) {
          CHECK_MESSAGE(p.kernel != "onednn(ref)", "g ", g, " k ", k, " stride ", stride, " pad ",
                        pad, " output_padding ", outpad, " x ", shape_str(x.shape()));
        }
      }
      RefContext ref_ctx("ConvTranspose", a, {&x, &wt, &b});
      auto params = ops::parse_conv_transpose(ref_ctx.ctx).value();
      std::vector<float> ref(static_cast<size_t>(numel(params.y)));
      ops::conv_transpose_reference(params, x.data<float>(), wt.data<float>(), b.data<float>(),
                                    ref.data());
      check_close(p.outputs[0], ref,
                  "deconv " + shape_str(x.shape()) + " w " + shape_str(wt.shape()));
    }
  }

  TEST_CASE("ConvTranspose with few channels per group (grouped rows) matches the reference") {
    const unsigned seed = std::random_device{}();
    INFO("seed ", seed);
    std::mt19937 rng(seed);
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    for (int trial = 0; trial < 60; ++trial) {
      // Depthwise (one channel per group) every other trial; 1-D, 2-D and 3-D; any multiplier,
      // kernel, stride, dilation, uneven pads and output padding; two images now and then.
      const size_t dims = static_cast<size_t>(pick(1, 3));
      const int64_t g = pick(2, 5), cg = trial % 2 ? 1 : pick(1, 8), mg = pick(1, 3);
      const int64_t n = pick(1, 2);
      Shape xs = {n, g * cg}, ws = {g * cg, mg};
      std::vector<int64_t> strides, dilations, pads(2 * dims), outpads;
      for (size_t d = 0; d < dims; ++d) {
        const int64_t k = pick(1, dims == 3 ? 3 : 4), s = pick(1, 3), dil = pick(1, 2);
        xs.push_back(pick(1, dims == 3 ? 5 : 9));
        ws.push_back(k);
        strides.push_back(s);
        dilations.push_back(dil);
        pads[d] = pick(0, static_cast<int>((k - 1) * dil));
        pads[d + dims] = pick(0, static_cast<int>((k - 1) * dil));
        outpads.push_back(pick(0, static_cast<int>(std::max(s, dil) - 1)));
      }
      Tensor x = random_f32(xs, rng), wt = random_f32(ws, rng), b = random_f32({g * mg}, rng);
      Attributes a;
      a.set("group", attr_int(g));
      a.set("strides", attr_ints(strides));
      a.set("dilations", attr_ints(dilations));
      a.set("pads", attr_ints(pads));
      a.set("output_padding", attr_ints(outpads));
      const std::string what = "deconv " + shape_str(x.shape()) + " w " + shape_str(wt.shape()) +
                               " group " + std::to_string(g) + " strides " + shape_str(strides) +
                               " dilations " + shape_str(dilations) + " pads " + shape_str(pads) +
                               " output_padding " + shape_str(outpads);
      // Without a bias every third trial.
      const std::vector<Tensor*> ins =
          trial % 3 == 2 ? std::vector<Tensor*>{&x, &wt} : std::vector<Tensor*>{&x, &wt, &b};
      const std::vector<bool> constant = {false, true, true};
      RefContext ref_ctx("ConvTranspose", a, std::vector<const Tensor*>(ins.begin(), ins.end()));
      auto params = ops::parse_conv_transpose(ref_ctx.ctx);
      if (!params.has_value()) {  // pads larger than the output: refused alike
        CHECK_MESSAGE(params.status().message().find("empty") != std::string::npos, what);
        continue;
      }
      std::vector<float> ref(static_cast<size_t>(numel(params->y)));
      ops::conv_transpose_reference(*params, x.data<float>(), wt.data<float>(),
                                    ins.size() == 3 ? b.data<float>() : nullptr, ref.data());
      const std::vector<bool> marks(constant.begin(),
                                    constant.begin() + static_cast<std::ptrdiff_t>(ins.size()));
      Prepared one = run_cpu("ConvTranspose", a, ins, marks, 0, 0, 1);
      CHECK_MESSAGE(one.kernel.rfind(kGroupedRows, 0) == 0, what, ": ", one.kernel);
      check_close(one.outputs[0], ref, what);
      // Each element sums its terms in one order: the same bits at 3 threads.
      Prepared three = run_cpu("ConvTranspose", a, ins, marks, 0, 0, 3);
      CHECK_MESSAGE(bitwise_equal(three.outputs[0], one.outputs[0]), what);
    }
    {  // Many rows over 3 threads, chunks starting inside the second image: the same bits.
      std::mt19937 r3(9);
      Tensor x = random_f32({2, 16, 40, 40}, r3), wt = random_f32({16, 1, 3, 3}, r3),
             b = random_f32({16}, r3);
      Attributes a;
      a.set("group", attr_int(16));
      a.set("strides", attr_ints({2, 2}));
      a.set("pads", attr_ints({1, 1, 1, 1}));
      a.set("output_padding", attr_ints({1, 1}));
      RefContext ref_ctx("ConvTranspose", a, {&x, &wt, &b});
      auto params = ops::parse_conv_transpose(ref_ctx.ctx).value();
      std::vector<float> ref(static_cast<size_t>(numel(params.y)));
      ops::conv_transpose_reference(params, x.data<float>(), wt.data<float>(), b.data<float>(),
                                    ref.data());
      Prepared one = run_cpu("ConvTranspose", a, {&x, &wt, &b}, {false, true, true}, 0, 0, 1);
      Prepared three = run_cpu("ConvTranspose", a, {&x, &wt, &b}, {false, true, true}, 0, 0, 3);
      check_close(three.outputs[0], ref, "depthwise [2,16,40,40] stride 2 at 3 threads");
      CHECK(bitwise_equal(three.outputs[0], one.outputs[0]));
    }
    // Wider groups stay on oneDNN's deconvolution.
    if (tern_onednn_is_available()) {
      std::mt19937 r2(5);
      Tensor x = random_f32({1, 18, 5, 5}, r2), wt = random_f32({18, 2, 3, 3}, r2),
             b = random_f32({4}, r2);
      Attributes a;
      a.set("group", attr_int(2));
      Prepared p = run_cpu("ConvTranspose", a, {&x, &wt, &b}, {false, true, true});
      CHECK(p.kernel.rfind("onednn", 0) == 0);
    }
  }

  TEST_CASE("MatMul (batch broadcast, 1-D operands) and Gemm on cpu_sgemm match the references") {
    // OpenBLAS in full builds, own_sgemm without it (TERN_MINIMAL).
    const std::string gemm = cpu_gemm_name();
    MESSAGE("GEMM: ", gemm);
    std::mt19937 rng(42);
    struct Case {
      Shape a, b;
    };
    for (const Case& c : {Case{{3, 5}, {5, 4}}, Case{{2, 1, 3, 5}, {4, 5, 2}}, Case{{5}, {2, 5, 3}},
                          Case{{2, 3, 5}, {5}}, Case{{64, 300}, {300, 70}}}) {
      Tensor a = random_f32(c.a, rng), b = random_f32(c.b, rng);
      Prepared p = run_cpu("MatMul", {}, {&a, &b}, {false, false});
      CHECK(p.kernel == gemm);
      RefContext ref_ctx("MatMul", {}, {&a, &b});
      auto params = ops::parse_matmul(ref_ctx.ctx).value();
      CHECK(p.outputs[0].shape() == params.out);
      std::vector<float> ref(static_cast<size_t>(numel(params.out)));
      ops::matmul_reference(params, a.data<float>(), b.data<float>(), ref.data());
      check_close(p.outputs[0], ref, "matmul " + shape_str(c.a) + " x " + shape_str(c.b));
    }
    // M = 3, and M = 1 (a matrix-vector product: the batch-1 classifier layer)
    for (int64_t m : {3, 1})
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb)
          for (const Shape& cshape : {Shape{}, Shape{4}, Shape{m, 1}, Shape{m, 4}}) {
            Tensor a = random_f32(ta ? Shape{6, m} : Shape{m, 6}, rng);
            Tensor b = random_f32(tb ? Shape{4, 6} : Shape{6, 4}, rng);
            Tensor cm = random_f32(cshape, rng);
            Attributes at;
            at.set("transA", attr_int(ta));
            at.set("transB", attr_int(tb));
            at.set("alpha", attr_float(0.5f));
            at.set("beta", attr_float(2.0f));
            Prepared p = run_cpu("Gemm", at, {&a, &b, &cm}, {false, false, false});
            CHECK(p.kernel == gemm);
            RefContext ref_ctx("Gemm", at, {&a, &b, &cm});
            auto params = ops::parse_gemm(ref_ctx.ctx).value();
            std::vector<float> ref(static_cast<size_t>(m * 4));
            ops::gemm_reference(params, a.data<float>(), b.data<float>(), cm.data<float>(),
                                ref.data());
            check_close(p.outputs[0], ref, "gemm");
          }
  }

  TEST_CASE("packed_gemm: products by constant weights match a double reference at every ISA") {
    const unsigned seed = std::random_device{}();
    INFO("seed ", seed);
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int64_t> dim(1, 200);
    const char* acts[] = {"", "Relu", "Gelu"};
    for (const char* cap : {"AVX512", "AVX2", "DEFAULT"}) {
      CAPTURE(cap);
      FlagRestore restore;
      REQUIRE(tern_flag_set("cpu.max_capability", cap) == TERN_OK);
      for (int iter = 0; iter < 24; ++iter) {
        // Rows 1..13 cover every tile height and a partial row block; N past and short of a
        // multiple of 16; K = 0, odd and long.
        const int64_t m = iter < 13 ? iter + 1 : dim(rng), n = iter == 3 ? 16 : dim(rng);
        const int64_t k = iter == 5 ? 0 : iter == 7 ? 1 : dim(rng) * (iter % 4 == 0 ? 5 : 1);
        const int kind = iter % 3;  // MatMul, FusedMatMul, Gemm
        CAPTURE(m);
        CAPTURE(n);
        CAPTURE(k);
        CAPTURE(kind);
        const bool batch = kind == 0 && iter % 2;  // [2, m, k] folds into 2m rows
        Tensor a = random_f32(batch ? Shape{2, m, k} : Shape{m, k}, rng);
        const bool tb = kind == 2 && iter % 2;
        Tensor b = random_f32(tb ? Shape{n, k} : Shape{k, n}, rng);
        Tensor bias = random_f32({n}, rng);
        Attributes at;
        std::string op = kind == 0 ? "MatMul" : kind == 1 ? "FusedMatMul" : "Gemm";
        const char* act = acts[iter % 3];
        std::vector<Tensor*> ins = {&a, &b};
        if (kind == 1) {
          at.set("activation", attr_string(act));
          ins.push_back(&bias);
        } else if (kind == 2) {
          at.set("transB", attr_int(tb));
          at.set("alpha", attr_float(0.5f));
          at.set("beta", attr_float(2.0f));
          ins.push_back(&bias);
        }
        Prepared p = run_cpu(op, at, ins, {false, true, true});
        // What the cap gives on this machine (an AVX2-only CPU or aarch64 has less).
        const std::string isa = tern_cpu_get_capability();
        const std::string want_name = isa == "AVX512" ? "packed_gemm.avx512"
                                      : isa == "AVX2" ? "packed_gemm.avx2"
                                                      : "packed_gemm";
        CHECK(p.kernel == want_name);
        const int64_t rows = (batch ? 2 : 1) * m;
        size_t bad = 0;
        for (int64_t i = 0; i < rows; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double acc = 0, mag = 0;
            for (int64_t q = 0; q < k; ++q) {
              const double x = a.data<float>()[i * k + q];
              const double y = tb ? b.data<float>()[j * k + q] : b.data<float>()[q * n + j];
              acc += x * y;
              mag += std::fabs(x * y);
            }
            double want = acc;
            if (kind == 2) want = 0.5 * acc + 2.0 * bias.data<float>()[j];
            if (kind == 1) {
              want += bias.data<float>()[j];
              if (std::string(act) == "Relu") want = std::max(want, 0.0);
              if (std::string(act) == "Gelu")
                want = 0.5 * want * (1 + std::erf(want / std::sqrt(2.0)));
            }
            const double got = p.outputs[0].data<float>()[i * n + j];
            bad += !(std::fabs(got - want) <= 1e-5 * (mag + 2) + 1e-6);
          }
        }
        CHECK(bad == 0);
      }
    }
  }

  TEST_CASE("packed_gemm: results do not depend on the thread count") {
    std::mt19937 rng(3);
    Tensor a = random_f32({137, 70}, rng), b = random_f32({70, 90}, rng);
    Prepared one = run_cpu("MatMul", {}, {&a, &b}, {false, true}, 0, 0, 1);
    Prepared three = run_cpu("MatMul", {}, {&a, &b}, {false, true}, 0, 0, 3);
    CHECK(one.kernel.rfind("packed_gemm", 0) == 0);
    REQUIRE(one.outputs[0].numel() == three.outputs[0].numel());
    CHECK(std::memcmp(one.outputs[0].raw(), three.outputs[0].raw(), one.outputs[0].byte_size()) ==
          0);
  }

  TEST_CASE(
      "transpose_cpu: every permutation of ranks 1..5 and element sizes match the reference") {
    const unsigned seed = std::random_device{}();
    INFO("seed ", seed);
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int64_t> dim(1, 7);
    for (DType dt : {DType::kFloat32, DType::kInt64, DType::kUInt8, DType::kFloat16}) {
      for (int iter = 0; iter < 40; ++iter) {
        const size_t rank = 1 + static_cast<size_t>(iter % 5);
        Shape shape;
        for (size_t d = 0; d < rank; ++d) shape.push_back(iter == 7 && d == 0 ? 0 : dim(rng));
        std::vector<int64_t> perm(rank);
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        Tensor x = Tensor::allocate(dt, shape).value();
        for (size_t b = 0; b < x.byte_size(); ++b)
          static_cast<uint8_t*>(x.raw())[b] = static_cast<uint8_t>(rng());
        Attributes at;
        at.set("perm", attr_ints(perm));
        auto k = inferred("Transpose", at, {&x}, {false});
        auto kernel = backends::get("cpu").value()->prepare(k->ctx);
        REQUIRE(kernel.has_value());
        // A perm that keeps the dims of size > 1 in order moves no bytes: a plain copy.
        int64_t last = -1;
        bool in_order = true;
        for (int64_t a : perm) {
          if (shape[static_cast<size_t>(a)] == 1) continue;
          in_order = in_order && a > last;
          last = a;
        }
        CHECK(std::string((*kernel)->name()) == (in_order ? "copy" : "transpose_cpu"));
        Tensor y = run_kernel(**kernel, k->ctx, {&x}, 3);
        Tensor want = run_reference("Transpose", at, {&x});
        CHECK_MESSAGE(std::memcmp(y.raw(), want.raw(), y.byte_size()) == 0, shape_str(shape));
      }
    }
  }

  TEST_CASE("Transpose NCHW <-> NHWC reads and writes blocked and channels-last data directly") {
    // ConvNeXt's hand-over from its depthwise convolution to the per-pixel layers, and back.
    std::mt19937 rng(91);
    Tensor x = random_f32({2, 48, 5, 3}, rng);
    Attributes nhwc, nchw;
    nhwc.set("perm", attr_ints({0, 2, 3, 1}));
    nchw.set("perm", attr_ints({0, 3, 1, 2}));
    Tensor want = run_reference("Transpose", nhwc, {&x});
    for (int block : {8, 16, 48}) {
      Tensor xin = to_blocked(x, block);
      Prepared p = run_cpu("Transpose", nhwc, {&xin}, {false}, block, 0);
      CHECK(p.kernel == "transpose_blocked_nhwc");
      REQUIRE(p.outputs[0].shape() == want.shape());
      CHECK_MESSAGE(std::memcmp(p.outputs[0].raw(), want.raw(), want.byte_size()) == 0, "block ",
                    block);
      // Another perm on a blocked input is declined (the planner then makes the input plain).
      auto k = inferred("Transpose", nchw, {&xin}, {false}, block);
      auto kernel = backends::get("cpu").value()->prepare(k->ctx);
      REQUIRE_FALSE(kernel.has_value());
      CHECK(kernel.status().code() == Code::kUnsupported);
    }
    // The way back: a plain NHWC [2, 5, 3, 48] into an NCHW output blocked by 8, 16 or 48.
    Tensor back = run_reference("Transpose", nchw, {&want});
    for (int block : {8, 16, 48}) {
      Prepared p = run_cpu("Transpose", nchw, {&want}, {false}, 0, block);
      CHECK(p.kernel == "transpose_nhwc_blocked");
      std::vector<float> got = from_blocked(p.outputs[0], block);
      CHECK_MESSAGE(std::memcmp(got.data(), back.raw(), back.byte_size()) == 0, "block ", block);
      CHECK(std::memcmp(back.raw(), x.raw(), x.byte_size()) == 0);
    }
  }

  TEST_CASE("binary vec: Add/Sub/Mul/Div with broadcasting match the reference at every ISA") {
    const unsigned seed = std::random_device{}();
    INFO("seed ", seed);
    std::mt19937 rng(seed);
    struct Case {
      Shape a, b;
    };
    const std::vector<Case> cases = {{{3, 5}, {3, 5}},
                                     {{2, 3, 40000}, {2, 3, 40000}},
                                     {{4, 7}, {7}},
                                     {{4, 7}, {1}},
                                     {{1}, {6, 33}},
                                     {{2, 1, 5}, {3, 1}},
                                     {{3, 1, 17}, {1, 4, 17}},
                                     {{1, 1, 1, 300}, {2, 4, 9, 300}},
                                     {{5, 1}, {5, 70000}}};
    for (const char* cap : {"AVX512", "AVX2", "DEFAULT"}) {
      CAPTURE(cap);
      FlagRestore restore;
      REQUIRE(tern_flag_set("cpu.max_capability", cap) == TERN_OK);
      for (const Case& c : cases) {
        for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
          Tensor a = random_f32(c.a, rng), b = random_f32(c.b, rng);
          for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] += 2.5f;  // no division by ~0
          Prepared p = run_cpu(op, {}, {&a, &b}, {false, false}, 0, 0, 2);
          CHECK(p.kernel.rfind("binary.", 0) == 0);
          Tensor want = run_reference(op, {}, {&a, &b});
          REQUIRE(want.numel() == p.outputs[0].numel());
          CHECK_MESSAGE(std::memcmp(want.raw(), p.outputs[0].raw(), want.byte_size()) == 0, op, " ",
                        shape_str(c.a), " ", shape_str(c.b));
        }
      }
    }
  }

  TEST_CASE(
      "own_sgemm: packed GEMM matches a double-precision reference; splits are bitwise equal") {
    const unsigned seed = std::random_device{}();
    INFO("seed ", seed);
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int64_t> dim(1, 300);
    MESSAGE("own_sgemm micro-kernel: ", std::string(own_sgemm_kernel_name()));
    for (int iter = 0; iter < 40; ++iter) {
      GemmShape s;
      s.trans_a = rng() & 1;
      s.trans_b = rng() & 1;
      s.m = iter < 4 ? iter + 1 : dim(rng);
      s.n = dim(rng);
      s.k =
          iter == 5 ? 0 : (iter % 3 == 0 ? dim(rng) + kGemmKc : dim(rng));  // one and two K blocks
      // Leading dimensions past the minimum: strided operands.
      s.lda = (s.trans_a ? s.m : s.k) + static_cast<int64_t>(rng() % 3);
      s.ldb = (s.trans_b ? s.k : s.n) + static_cast<int64_t>(rng() % 3);
      s.ldc = s.n + static_cast<int64_t>(rng() % 3);
      const float alpha = iter % 2 ? 1.0f : 0.75f, beta = iter % 4 == 1 ? 0.5f : 0.0f;
      Tensor a = random_f32({(s.trans_a ? s.k : s.m) + 1, s.lda}, rng);
      Tensor b = random_f32({(s.trans_b ? s.n : s.k) + 1, s.ldb}, rng);
      Tensor c0 = random_f32({s.m, s.ldc}, rng);
      std::vector<float> whole(c0.data<float>(), c0.data<float>() + c0.numel()), split = whole;
      const std::vector<float> before = whole;
      own_sgemm(s, alpha, a.data<float>(), b.data<float>(), beta, whole.data(), 0, s.m, 0, s.n);
      // Four sub-blocks at odd boundaries, as the threaded driver may cut them.
      const int64_t mh = s.m / 3, nh = (s.n * 2) / 3;
      for (auto [i0, i1, j0, j1] : {std::array<int64_t, 4>{0, mh, 0, nh},
                                    {0, mh, nh, s.n},
                                    {mh, s.m, 0, nh},
                                    {mh, s.m, nh, s.n}}) {
        own_sgemm(s, alpha, a.data<float>(), b.data<float>(), beta, split.data(), i0, i1, j0, j1);
      }
      CHECK_MESSAGE(whole == split, "m=", s.m, " n=", s.n, " k=", s.k);
      size_t bad = 0;
      double max_err = 0;
      for (int64_t i = 0; i < s.m; ++i) {
        for (int64_t j = 0; j < s.ldc; ++j) {
          const size_t at = static_cast<size_t>(i * s.ldc + j);
          if (j >= s.n) {  // outside the matrix: untouched
            bad += whole[at] != before[at];
            continue;
          }
          double acc = 0, mag = 0;
          for (int64_t p = 0; p < s.k; ++p) {
            const double x =
                s.trans_a ? a.data<float>()[p * s.lda + i] : a.data<float>()[i * s.lda + p];
            const double y =
                s.trans_b ? b.data<float>()[j * s.ldb + p] : b.data<float>()[p * s.ldb + j];
            acc += x * y;
            mag += std::fabs(x * y);
          }
          const double want = alpha * acc + (beta == 0 ? 0.0 : beta * before[at]);
          const double err = std::fabs(whole[at] - want);
          max_err = std::max(max_err, err);
          bad += !(err <= 1e-5 * (mag + std::fabs(before[at])) + 1e-6);
        }
      }
      CHECK_MESSAGE(bad == 0, "m=", s.m, " n=", s.n, " k=", s.k, " ta=", s.trans_a,
                    " tb=", s.trans_b, " max err ", max_err);
    }
  }

  TEST_CASE(
      "conv1x1_avx512: pointwise FusedConv on 8- and 16-blocked activations matches the "
      "reference") {
    if (std::string(tern_cpu_get_capability()) != "AVX512") {
      MESSAGE("skipped: the CPU lacks AVX-512");
      return;
    }
    const unsigned seed = std::random_device{}();
    INFO("seed ", seed);
    std::mt19937 rng(seed);
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    const float nan = std::numeric_limits<float>::quiet_NaN();
    // Logical NCHW -> nChw{bl}c with the padding channels set to `pad` (NaN: must never be read).
    auto blocked = [&](const Tensor& t, int64_t bl, float pad,
                       std::shared_ptr<std::vector<float>>* keep) {
      const Shape& d = t.shape();
      const int64_t cb = (d[1] + bl - 1) / bl, hw = d[2] * d[3];
      *keep = std::make_shared<std::vector<float>>(static_cast<size_t>(d[0] * cb * hw * bl), pad);
      for (int64_t n = 0; n < d[0]; ++n)
        for (int64_t c = 0; c < d[1]; ++c)
          for (int64_t i = 0; i < hw; ++i) {
            (**keep)[static_cast<size_t>(((n * cb + c / bl) * hw + i) * bl + c % bl)] =
                t.data<float>()[(n * d[1] + c) * hw + i];
          }
      return Tensor::wrap(DType::kFloat32, d, (*keep)->data(), *keep);
    };
    const std::vector<std::pair<std::vector<std::string>, std::vector<float>>> epilogues = {
        {{}, {}},
        {{"Relu"}, {}},
        {{"Clip"}, {0.0f, 6.0f}},
        {{"Affine", "HardSwish", "Affine"}, {1.5f, -0.25f, 0.5f, 0.125f}},
        {{"LeakyRelu", "HardSigmoid"}, {0.1f, 0.2f, 0.5f}},
        {{"Swish"}, {1.0f}},
        {{"Affine", "Swish"}, {4.0f, 0.0f, 1.5f}},
        {{"Sigmoid"}, {}},
        {{"Affine", "Sigmoid"}, {2.0f, 0.5f}}};
    auto fused_attrs = [](const std::pair<std::vector<std::string>, std::vector<float>>& ep) {
      Attributes a;
      a.set("activations", attr_strings(ep.first));
      a.set("activation_params", attr_floats(ep.second));
      return a;
    };
    for (int trial = 0; trial < 80; ++trial) {
      // Input and output blocked by 8 or 16 each (MobileNetV3's 24 -> 72 is 8 -> 8, 72 -> 24
      // too, 40 -> 240 is 8 -> 16); an 8-blocked output has whole blocks, as the planner gives.
      const int ib = pick(0, 1) ? 8 : 16, ob = pick(0, 1) ? 8 : 16;
      // A plain input (MaxViT's after window attention), transposed into blocks in the
      // workspace, in one trial of four: more than one pixel, and more channels than a block out.
      const bool plain_in = trial % 4 == 1;
      const int64_t n = pick(1, 2), ic = pick(1, 70),
                    oc = ob == 8 ? 8 * pick(plain_in ? 2 : 1, 9) : pick(plain_in ? 17 : 1, 70),
                    h = pick(plain_in ? 2 : 1, 9), w = pick(1, 9);
      const bool has_sum = pick(0, 1) == 1;
      const auto& ep = epilogues[static_cast<size_t>(pick(0, 8))];
      // Strided (a downsampling shortcut) in one trial of three (blocked inputs).
      const bool strided = trial % 3 == 2 && !plain_in;
      const int64_t sh = strided ? pick(1, 3) : 1, sw = strided ? pick(1, 3) : 1;
      const int64_t oh = (h - 1) / sh + 1, ow = (w - 1) / sw + 1;
      CAPTURE(trial);
      CAPTURE(ib);
      CAPTURE(ob);
      CAPTURE(sh);
      CAPTURE(sw);
      CAPTURE(plain_in);
      Tensor x = random_f32({n, ic, h, w}, rng), wt = random_f32({oc, ic, 1, 1}, rng);
      Tensor b = random_f32({oc}, rng), z = random_f32({n, oc, oh, ow}, rng);
      Attributes a = fused_attrs(ep);
      a.set("strides", attr_ints({sh, sw}));
      std::vector<std::shared_ptr<std::vector<float>>> keep(3);
      Tensor xb = plain_in ? x : blocked(x, ib, nan, &keep[0]), zb = blocked(z, ob, 0.0f, &keep[1]);
      Tensor yb =
          blocked(Tensor::allocate(DType::kFloat32, {n, oc, oh, ow}).value(), ob, nan, &keep[2]);
      std::vector<Tensor*> ins = {&xb, &wt, &b};
      if (has_sum) ins.push_back(&zb);
      auto fc = fused_conv_context(a, ins, plain_in ? 0 : ib, ob);
      OpContext& ctx = fc->ctx;
      auto kernel = backends::get("cpu").value()->prepare(ctx);
      REQUIRE_MESSAGE(kernel.has_value(), kernel.status().message());
      CHECK(std::string((*kernel)->name()) == "conv1x1_avx512");
      KernelArgs args;
      for (Tensor* t : ins) args.inputs.push_back(t);
      args.outputs.push_back(&yb);
      std::vector<float> workspace((*kernel)->workspace_bytes() / 4 + 1, nan);
      args.workspace = workspace.data();
      REQUIRE((*kernel)->run(args, ExecContext{2}).is_ok());
      const std::vector<float> two = *keep[2];
      REQUIRE((*kernel)->run(args, ExecContext{1}).is_ok());
      CHECK(std::memcmp(two.data(), keep[2]->data(), two.size() * 4) == 0);  // thread-independent
      const std::vector<float> ref = fused_conv_reference(ctx, x, wt, b, has_sum ? &z : nullptr);
      const std::vector<float> got = from_blocked(yb, ob);
      Comparison c = compare(got.data(), ref.data(), ref.size(), 1e-4, 1e-4);
      CHECK_MESSAGE(c.mismatches == 0, shape_str(x.shape()), " -> ", oc, " sum ", has_sum,
                    ": max abs ", c.max_abs);
      int bad_padding = 0;  // channels past oc are written as zeros
      const int64_t cb = (oc + ob - 1) / ob, hw = oh * ow;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t c2 = oc; c2 < cb * ob; ++c2)
          for (int64_t p = 0; p < hw; ++p) {
            bad_padding +=
                (*keep[2])[static_cast<size_t>(((i * cb + c2 / ob) * hw + p) * ob + c2 % ob)] !=
                0.0f;
          }
      CHECK(bad_padding == 0);
      // A second kernel finds the packed weights (as a saved optimized model carries them) and
      // uses them in place, with the same result.
      check_packed_weights_reused(**kernel, ctx, args, two);
    }
    // One pixel (squeeze-excitation after a global pool), planned plain on either side: the
    // kernel reads and writes it as blocks where the layouts agree.
    for (int trial = 0; trial < 60; ++trial) {
      const int64_t n = pick(1, 2), ic = pick(1, 70), oc = pick(1, 70);
      const bool plain_in = pick(0, 1) == 1, plain_out = pick(0, 1) == 1;
      const bool has_sum = pick(0, 1) == 1;
      const auto& ep = epilogues[static_cast<size_t>(pick(0, 8))];
      CAPTURE(trial);
      CAPTURE(plain_in);
      CAPTURE(plain_out);
      const int ib = plain_in ? 0 : 16;
      const int ob = plain_out ? 0 : oc % 16 == 0 ? 16 : oc % 8 == 0 ? 8 : 16;
      Tensor x = random_f32({n, ic, 1, 1}, rng), wt = random_f32({oc, ic, 1, 1}, rng);
      Tensor b = random_f32({oc}, rng), z = random_f32({n, oc, 1, 1}, rng);
      std::vector<std::shared_ptr<std::vector<float>>> keep(3);
      Tensor xb = ib ? blocked(x, ib, nan, &keep[0]) : x;
      Tensor zb = ob ? blocked(z, ob, 0.0f, &keep[1]) : z;
      Tensor yb = Tensor::allocate(DType::kFloat32, {n, oc, 1, 1}).value();
      if (ob) yb = blocked(yb, ob, nan, &keep[2]);
      std::vector<Tensor*> ins = {&xb, &wt, &b};
      if (has_sum) ins.push_back(&zb);
      auto fc = fused_conv_context(fused_attrs(ep), ins, ib, ob);
      OpContext& ctx = fc->ctx;
      auto kernel = backends::get("cpu").value()->prepare(ctx);
      REQUIRE_MESSAGE(kernel.has_value(), kernel.status().message());
      const bool in_ok = !plain_in || ic % 8 == 0 || n == 1;
      const bool out_ok = !plain_out || oc % 8 == 0;
      const bool ours = std::string((*kernel)->name()) == "conv1x1_avx512";
      CHECK(ours == (in_ok && out_ok));
      // (Another kernel reads blocked padding, NaN here; the planner gives whole blocks.)
      if (!ours) continue;
      KernelArgs args;
      for (Tensor* t : ins) args.inputs.push_back(t);
      args.outputs.push_back(&yb);
      std::vector<float> workspace((*kernel)->workspace_bytes() / sizeof(float) + 16);
      args.workspace = workspace.data();
      REQUIRE((*kernel)->run(args, ExecContext{2}).is_ok());
      const std::vector<float> ref = fused_conv_reference(ctx, x, wt, b, has_sum ? &z : nullptr);
      const std::vector<float> got = ob ? from_blocked(yb, ob) : values_f32(yb);
      Comparison c = compare(got.data(), ref.data(), ref.size(), 1e-4, 1e-4);
      CHECK_MESSAGE(c.mismatches == 0, n, "x", ic, " -> ", oc, " sum ", has_sum, ": max abs ",
                    c.max_abs);
    }
  }

  TEST_CASE("ReorderToPlain: 16-channel blocks and channels-last (one block of all channels)") {
    std::mt19937 rng(5);
    for (int block : {16, 48}) {                    // 48 channels: nChw16c, and NHWC
      Tensor x = random_f32({2, 48, 13, 10}, rng);  // 130 pixels: tiles of 64 and a rest
      Prepared p = run_cpu("ReorderToPlain", {}, {&x}, {false}, block);
      const float* s = x.data<float>();
      const float* y = p.outputs[0].data<float>();
      const int64_t hw = 130, cb = 48 / block;
      int wrong = 0;
      for (int64_t n = 0; n < 2; ++n)
        for (int64_t c = 0; c < 48; ++c)
          for (int64_t i = 0; i < hw; ++i) {
            const float want = s[((n * cb + c / block) * hw + i) * block + c % block];
            wrong += y[(n * 48 + c) * hw + i] != want;
          }
      CHECK_MESSAGE(wrong == 0, "block ", block);
    }
  }

  TEST_CASE("oneDNN pooling: 1-D to 3-D windows, ends short of the input or of the padding") {
    if (!tern_onednn_is_available()) {
      MESSAGE("skipped: built without oneDNN");
      return;
    }
    struct Case {
      const char* op;
      Shape x;
      std::vector<int64_t> kernel, strides, pads;
      int64_t ceil, include_pad;
      const char* what;
    };
    const Case cases[] = {
        {"MaxPool", {1, 8, 31}, {3}, {2}, {1, 1}, 0, 0, "1-D"},
        {"AveragePool", {1, 4, 5, 9, 9}, {2, 3, 3}, {2, 2, 2}, {0, 1, 1, 0, 1, 1}, 0, 0, "3-D"},
        {"AveragePool",
         {1, 8, 16, 16},
         {3, 3},
         {2, 2},
         {1, 1, 1, 1},
         0,
         1,
         "count_include_pad, end padding never read (MaxViT)"},
        {"AveragePool", {1, 8, 15, 15}, {3, 3}, {2, 2}, {0, 0, 0, 0}, 0, 1, "last row unread"},
        {"MaxPool", {1, 8, 16, 16}, {3, 3}, {2, 2}, {0, 0, 0, 0}, 1, 0, "ceil_mode"},
        {"MaxPool", {1, 64, 576}, {2}, {2}, {0, 0}, 0, 0, "1-D, an audio stack's"},
        {"AveragePool", {1, 20, 37}, {4}, {3}, {1, 2}, 0, 1, "1-D, 20 channels, include_pad"},
    };
    // Plain 1-D and 3-D activations have only oneDNN's plain C++ loops: they pool a blocked copy
    // on its JIT kernels (where the CPU has AVX2 or AVX-512).
    const std::string cap = tern_cpu_get_capability();
    const bool jit = cap == "AVX2" || cap == "AVX512";
    for (const Case& cs : cases) {
      Tensor x = random_f32(cs.x, 17u);
      Attributes a;
      a.set("kernel_shape", attr_ints(cs.kernel));
      a.set("strides", attr_ints(cs.strides));
      a.set("pads", attr_ints(cs.pads));
      a.set("ceil_mode", attr_int(cs.ceil));
      if (std::string(cs.op) == "AveragePool") a.set("count_include_pad", attr_int(cs.include_pad));
      Tensor want = run_reference(cs.op, a, {&x});
      Prepared p = run_cpu(cs.op, a, {&x}, {false});
      CHECK_MESSAGE(p.kernel.rfind("onednn", 0) == 0, std::string(cs.what), ": ", p.kernel);
      CHECK_MESSAGE(p.kernel != "onednn(ref)", std::string(cs.what));
      if (jit) CHECK_MESSAGE(p.kernel == "onednn(jit)", std::string(cs.what), ": ", p.kernel);
      REQUIRE(p.outputs[0].shape() == want.shape());
      Comparison c = compare(p.outputs[0].data<float>(), want.data<float>(),
                             static_cast<size_t>(want.numel()), 1e-5, 1e-5);
      CHECK_MESSAGE(c.mismatches == 0, cs.what, ": max abs ", c.max_abs);
    }
  }
}
