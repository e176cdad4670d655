// backends/cpu: the vectorised element-wise, normalisation and data-movement kernels, Resize,
// reductions and Einsum against the op's reference kernels (suite cpu_kernels; the convolution
// and GEMM kernels are in cpu_kernels_test.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "backends/cpu/transpose_f32.h"
#include "backends/cpu/vec/vec.h"
#include "backends/registry.h"
#include "backends_util.h"
#include "core/op_registry.h"
#include "test_util.h"
#include "unit/cpu_kernel_harness.h"

using namespace tern;
using namespace tern_test;
using namespace tern_test::cpu_kernels;

TEST_SUITE("cpu_kernels") {
  TEST_CASE("vectorised Softmax and LogSoftmax over any axis match a double reference") {
    // [outer, len, inner] with inner > 1: columns of each block, in runs of 512 (inner 700 takes
    // two), or under 16 columns one at a time (1500 rows: two stack runs), and rows (the last
    // axis; LogSoftmax's own row form), at 1 and 2 threads; a -inf entry and a large one.
    struct Case {
      Shape shape;
      int64_t axis;
    };
    const Case cases[] = {{{2, 16, 4, 37}, 1}, {{3, 5, 700}, 1}, {{7, 9}, 0},
                          {{2, 3, 5, 6}, -3},  {{1, 1, 9}, 1},   {{3, 67}, -1},
                          {{2, 1500, 3}, 1}};
    const float inf = std::numeric_limits<float>::infinity();
    for (const Case& c : cases) {
      CAPTURE(shape_str(c.shape));
      CAPTURE(c.axis);
      Tensor x = random_f32(c.shape, 17u, -6.0f, 6.0f);
      float* xv = x.data<float>();
      xv[3] = -inf;
      xv[x.numel() - 2] = 80.0f;
      const int64_t rank = static_cast<int64_t>(c.shape.size());
      const int64_t axis = c.axis < 0 ? c.axis + rank : c.axis;
      int64_t outer = 1, inner = 1;
      for (int64_t d = 0; d < axis; ++d) outer *= c.shape[static_cast<size_t>(d)];
      for (int64_t d = axis + 1; d < rank; ++d) inner *= c.shape[static_cast<size_t>(d)];
      const int64_t len = c.shape[static_cast<size_t>(axis)];
      Attributes attrs;
      attrs.set("axis", attr_int(c.axis));
      for (const char* op : {"Softmax", "LogSoftmax"})
        for (const char* cap : {"AVX512", "AVX2", "DEFAULT"}) {
          for (int threads : {1, 2}) {
            CAPTURE(std::string(op));
            CAPTURE(std::string(cap));
            CAPTURE(threads);
            FlagRestore restore;
            REQUIRE(tern_flag_set("cpu.max_capability", cap) == TERN_OK);
            const bool log = std::string(op) == "LogSoftmax";
            auto k = inferred(op, attrs, {&x}, {false});
            auto kernel = backends::get("cpu").value()->prepare(k->ctx);
            REQUIRE_MESSAGE(kernel.has_value(), kernel.status().message());
#if defined(__x86_64__)
            CHECK(std::string((*kernel)->name()).rfind(log ? "log_softmax." : "softmax.", 0) == 0);
#endif
            const Tensor y = run_kernel(**kernel, k->ctx, {&x}, threads);
            // In place too where the kernel may overwrite its input (Kernel::inplace_input, as
            // the vectorised ones do): the same bits.
#if defined(__x86_64__)
            CHECK((*kernel)->inplace_input() == 0);
#endif
            if ((*kernel)->inplace_input() == 0) {
              Tensor same = x.clone().value();
              KernelArgs args;
              args.inputs.push_back(&same);
              args.outputs.push_back(&same);
              REQUIRE((*kernel)->run(args, ExecContext{threads}).is_ok());
              CHECK(std::memcmp(same.raw(), y.raw(), y.byte_size()) == 0);
            }
            const float* yv = y.data<float>();
            for (int64_t o = 0; o < outer; ++o) {
              for (int64_t j = 0; j < inner; ++j) {
                auto at = [&](int64_t r) { return (o * len + r) * inner + j; };
                double m = -1e300, sum = 0;
                for (int64_t r = 0; r < len; ++r) m = std::max(m, double{xv[at(r)]});
                for (int64_t r = 0; r < len; ++r) sum += std::exp(double{xv[at(r)]} - m);
                for (int64_t r = 0; r < len; ++r) {
                  // (A column of one -inf is NaN, as in the reference: -inf - -inf.)
                  const double want = log ? double{xv[at(r)]} - m - std::log(sum)
                                          : std::exp(double{xv[at(r)]} - m) / sum;
                  if (std::isnan(want) || std::isinf(want)) {
                    CHECK((std::isnan(want) ? std::isnan(yv[at(r)]) : yv[at(r)] == want));
                  } else {
                    CHECK(std::abs(yv[at(r)] - want) <= 1e-6 + 1e-5 * std::abs(want));
                  }
                }
              }
            }
          }
        }
    }
  }

  TEST_CASE("vectorised Erf, Sigmoid, Softmax match double-precision references at every ISA") {
    Tensor x = random_f32({3, 5, 67}, 7u, -4.0f, 4.0f);
    float* xv = x.data<float>();
    xv[0] = 0.0f;
    xv[1] = 1e-6f;
    xv[2] = -0.4999f;
    xv[3] = 0.5001f;
    xv[4] = 9.0f;
    xv[5] = -9.0f;
    const auto n = static_cast<size_t>(x.numel());
    for (const char* cap : {"AVX512", "AVX2", "DEFAULT"}) {
      CAPTURE(cap);
      FlagRestore restore;
      REQUIRE(tern_flag_set("cpu.max_capability", cap) == TERN_OK);
      Prepared e = run_cpu("Erf", {}, {&x}, {false});
      CHECK(e.kernel.rfind("erf.", 0) == 0);
      double worst = 0;
      for (size_t i = 0; i < n; ++i) {
        const double want = std::erf(static_cast<double>(xv[i]));
        const double err = std::abs(e.outputs[0].data<float>()[i] - want);
        worst = std::max(worst, err);
        // Absolute error below 3e-7; near zero, relative error below 1e-6.
        CHECK(err <= 3e-7 + 1e-6 * std::abs(want));
      }
      MESSAGE(std::string(cap), ": Erf max abs error ", worst);
      Prepared g = run_cpu("Sigmoid", {}, {&x}, {false});
      CHECK(g.kernel.rfind("sigmoid.", 0) == 0);
      for (size_t i = 0; i < n; ++i) {
        const double want = 1.0 / (1.0 + std::exp(-static_cast<double>(xv[i])));
        CHECK(std::abs(g.outputs[0].data<float>()[i] - want) <= 1e-6 * want);
      }
      Prepared s = run_cpu("Softmax", {}, {&x}, {false});
      CHECK(s.kernel.rfind("softmax.", 0) == 0);
      for (size_t row = 0; row < n / 67; ++row) {
        double m = -1e30, sum = 0;
        for (size_t i = 0; i < 67; ++i) m = std::max(m, static_cast<double>(xv[row * 67 + i]));
        for (size_t i = 0; i < 67; ++i) sum += std::exp(xv[row * 67 + i] - m);
        for (size_t i = 0; i < 67; ++i) {
          const double want = std::exp(xv[row * 67 + i] - m) / sum;
          CHECK(std::abs(s.outputs[0].data<float>()[row * 67 + i] - want) <= 1e-6 + 1e-5 * want);
        }
      }
    }
    // NaN and infinities: NaN stays NaN (no float -> int conversion of it), the limits hold.
    const float inf = std::numeric_limits<float>::infinity();
    Tensor odd = make_f32({1, 4}, {std::nanf(""), inf, -inf, 0.0f});
    for (const char* cap : {"AVX512", "AVX2", "DEFAULT"}) {
      CAPTURE(cap);
      FlagRestore restore;
      REQUIRE(tern_flag_set("cpu.max_capability", cap) == TERN_OK);
      const Prepared pe = run_cpu("Erf", {}, {&odd}, {false});
      const float* e = pe.outputs[0].data<float>();
      CHECK(std::isnan(e[0]));
      CHECK(e[1] == 1.0f);
      CHECK(e[2] == -1.0f);
      const Prepared pg = run_cpu("Sigmoid", {}, {&odd}, {false});
      const float* g = pg.outputs[0].data<float>();
      CHECK(std::isnan(g[0]));
      CHECK(g[1] == 1.0f);
      CHECK(g[2] == 0.0f);
      CHECK(g[3] == 0.5f);
      const Prepared ps = run_cpu("Softmax", {}, {&odd}, {false});
      CHECK(std::isnan(ps.outputs[0].data<float>()[0]));  // a row holding NaN is NaN
    }
    // Softmax over an inner axis: the strided form on x86 (its own test below), the portable
    // kernel elsewhere.
    Attributes a;
    a.set("axis", attr_int(1));
#if defined(__x86_64__)
    CHECK(run_cpu("Softmax", a, {&x}, {false}).kernel.rfind("softmax.", 0) == 0);
#else
    CHECK(run_cpu("Softmax", a, {&x}, {false}).kernel == "reference");
#endif
  }

  TEST_CASE("vectorised Softmax: every row length's tail, masked (-inf) entries, at every ISA") {
    // Rows of 1..40 and window attention's 49: whole registers, partial ones, both. Every third
    // row has masked entries (-inf, as attention masks write): exactly 0 there.
    std::vector<int64_t> lengths;
    for (int64_t len = 1; len <= 40; ++len) lengths.push_back(len);
    lengths.push_back(49);
    for (int64_t len : lengths) {
      CAPTURE(len);
      Tensor x = random_f32({7, len}, static_cast<unsigned>(len), -6.0f, 6.0f);
      float* xv = x.data<float>();
      for (int64_t r = 0; r < 7; r += 3) {
        for (int64_t i = 1; i < len; i += 2)
          xv[r * len + i] = -std::numeric_limits<float>::infinity();
      }
      for (const char* cap : {"AVX512", "AVX2", "DEFAULT"}) {
        CAPTURE(cap);
        FlagRestore restore;
        REQUIRE(tern_flag_set("cpu.max_capability", cap) == TERN_OK);
        Prepared s = run_cpu("Softmax", {}, {&x}, {false});
        const float* y = s.outputs[0].data<float>();
        int bad = 0;
        for (int64_t r = 0; r < 7; ++r) {
          double m = -1e30, sum = 0;
          for (int64_t i = 0; i < len; ++i) m = std::max(m, static_cast<double>(xv[r * len + i]));
          for (int64_t i = 0; i < len; ++i) sum += std::exp(xv[r * len + i] - m);
          for (int64_t i = 0; i < len; ++i) {
            const double want = std::exp(xv[r * len + i] - m) / sum;
            const float got = y[r * len + i];
            bad += want == 0 ? got != 0.0f : !(std::abs(got - want) <= 1e-6 + 1e-5 * want);
          }
        }
        CHECK(bad == 0);
      }
    }
  }

  TEST_CASE("vectorised row primitives: nothing past a row is read or written; NaN in max") {
    // Rows of 1..40 floats followed by sentinels: +inf past the row (a max or a sum that read it
    // would show it), and output slots past the row that must keep their value.
    const float inf = std::numeric_limits<float>::infinity();
    for (CpuIsa isa : {CpuIsa::kAvx512, CpuIsa::kAvx2, CpuIsa::kScalar}) {
      const VecOps& v = vec_ops(isa);
      CAPTURE(v.isa);
      for (int64_t n = 1; n <= 40; ++n) {
        CAPTURE(n);
        std::vector<float> x(static_cast<size_t>(n + 32), inf), y(x.size(), -7.0f);
        for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i % 7) - 3;
        CHECK(v.max(x.data(), n) == static_cast<float>(std::min<int64_t>(n - 1, 6) - 3));
        const double sum = v.exp_sum(x.data(), 3.0f, y.data(), n);
        double want = 0;
        for (int64_t i = 0; i < n; ++i) want += std::exp(static_cast<double>(x[i]) - 3.0);
        CHECK(std::abs(sum - want) <= 1e-5 * want);
        v.erf(x.data(), y.data(), n);
        v.scale(y.data(), 2.0f, n);
        int touched = 0;
        for (size_t i = static_cast<size_t>(n); i < y.size(); ++i) touched += y[i] != -7.0f;
        CHECK(touched == 0);
        // sub = -inf: exp of each number is +inf, and the lanes past n add nothing (padded with
        // -inf they would add -inf - -inf = NaN).
        std::vector<float> z(static_cast<size_t>(n), 0.0f);
        CHECK(std::isinf(v.exp_sum(z.data(), -inf, y.data(), n)));
        // NaN is skipped wherever it sits (attention's FLASH kernel takes the running maximum).
        for (int64_t at = 0; at < n; ++at) {
          std::vector<float> w(x.begin(), x.begin() + n);
          w[static_cast<size_t>(at)] = std::nanf("");
          float m = -inf;
          for (int64_t i = 0; i < n; ++i) {
            if (i != at) m = std::max(m, w[static_cast<size_t>(i)]);
          }
          CHECK(v.max(w.data(), n) == m);
        }
      }
    }
  }

  TEST_CASE("vectorised Tanh, Gelu, LeakyRelu, Elu, Relu, Swish match the reference at every ISA") {
    Tensor x = random_f32({2, 3, 61}, 11u, -6.0f, 6.0f);
    float* xv = x.data<float>();
    xv[0] = 0.0f;
    xv[1] = -1e-6f;
    xv[2] = 20.0f;
    xv[3] = -20.0f;
    struct Op {
      const char* type;
      Attributes attrs;
      const char* kernel;
    };
    std::vector<Op> ops;
    ops.push_back({"Tanh", {}, "tanh."});
    ops.push_back({"Gelu", {}, "gelu."});
    Attributes tanh_form;
    tanh_form.set("approximate", attr_string("tanh"));
    ops.push_back({"Gelu", tanh_form, "gelu."});
    Attributes alpha;
    alpha.set("alpha", attr_float(0.2f));
    ops.push_back({"LeakyRelu", alpha, "leaky_relu."});
    ops.push_back({"Elu", alpha, "elu."});
    ops.push_back({"Relu", {}, "relu."});
    Attributes swish_alpha;
    swish_alpha.set("alpha", attr_float(1.7f));
    ops.push_back({"Swish", {}, "swish."});
    ops.push_back({"Swish", swish_alpha, "swish."});
    for (const Op& op : ops) {
      Tensor want = run_reference(op.type, op.attrs, {&x});
      for (const char* cap : {"AVX512", "AVX2", "DEFAULT"}) {
        FlagRestore restore;
        REQUIRE(tern_flag_set("cpu.max_capability", cap) == TERN_OK);
        Prepared p = run_cpu(op.type, op.attrs, {&x}, {false});
        CHECK_MESSAGE(p.kernel.rfind(op.kernel, 0) == 0, op.type, " at ", cap, ": ", p.kernel);
        Comparison c = compare(p.outputs[0].data<float>(), want.data<float>(),
                               static_cast<size_t>(x.numel()), 1e-5, 1e-5);
        CHECK_MESSAGE(c.mismatches == 0, op.type, " at ", cap, ": max abs ", c.max_abs);
      }
    }
  }

  TEST_CASE("data movement (strided copies, row copies, row gathers) matches the reference") {
    auto ints = [](std::vector<int64_t> v) {
      Tensor t = Tensor::allocate(DType::kInt64, {static_cast<int64_t>(v.size())}).value();
      std::copy(v.begin(), v.end(), t.data<int64_t>());
      return t;
    };
    auto same = [](const Tensor& got, const Tensor& want, const std::string& what) {
      REQUIRE_MESSAGE(got.shape() == want.shape(), what);
      CHECK_MESSAGE(std::memcmp(got.raw(), want.raw(), got.byte_size()) == 0, what);
    };
    Tensor x = random_f32({2, 12, 6, 10}, 23u);
    struct SliceCase {
      std::vector<int64_t> starts, ends, axes, steps;
    };
    const SliceCase slices[] = {{{1}, {7}, {1}, {1}},
                                {{0, 2}, {6, 9}, {2, 3}, {1, 1}},
                                {{9}, {-11}, {3}, {-2}},
                                {{-1, 1}, {-100, 12}, {1, 3}, {-3, 4}},
                                {{0}, {1}, {0}, {1}},
                                {{3}, {3}, {2}, {1}},
                                {{0, 0}, {2, 12}, {0, 1}, {1, 5}}};
    for (const SliceCase& cs : slices) {
      Tensor st = ints(cs.starts), en = ints(cs.ends), ax = ints(cs.axes), sp = ints(cs.steps);
      std::vector<Tensor*> ins = {&x, &st, &en, &ax, &sp};
      const std::vector<bool> known = {false, true, true, true, true};
      Tensor want = run_reference("Slice", {}, ins, known);
      for (int threads : {1, 2}) {
        auto k = inferred("Slice", {}, ins, known);
        auto kernel = backends::get("cpu").value()->prepare(k->ctx);
        REQUIRE(kernel.has_value());
        CHECK((*kernel)->name() == std::string("strided_copy"));
        same(run_kernel(**kernel, k->ctx, ins, threads), want, "Slice");
      }
    }
    for (const char* mode : {"DCR", "CRD"}) {
      Attributes a;
      a.set("blocksize", attr_int(2));
      a.set("mode", attr_string(mode));
      Prepared p = run_cpu("DepthToSpace", a, {&x}, {false});
      CHECK(p.kernel == "depth_space");
      same(p.outputs[0], run_reference("DepthToSpace", a, {&x}), std::string("D2S ") + mode);
    }
    Attributes b2;
    b2.set("blocksize", attr_int(2));
    Prepared s2d = run_cpu("SpaceToDepth", b2, {&x}, {false});
    CHECK(s2d.kernel == "depth_space");
    same(s2d.outputs[0], run_reference("SpaceToDepth", b2, {&x}), "S2D");
    Tensor y = random_f32({2, 5, 6, 10}, 24u), z = random_f32({2, 1, 6, 10}, 25u);
    for (int64_t axis : {1, -3}) {
      Attributes a;
      a.set("axis", attr_int(axis));
      Prepared p = run_cpu("Concat", a, {&x, &y, &z}, {false, false, false});
      CHECK(p.kernel == "concat_rows");
      same(p.outputs[0], run_reference("Concat", a, {&x, &y, &z}), "Concat");
    }
    {
      // Large enough for two threads: pieces of very different sizes, one empty, several rows;
      // then split back.
      Tensor big = random_f32({3, 9000, 7}, 26u), one = random_f32({3, 1, 7}, 27u);
      Tensor none = random_f32({3, 0, 7}, 28u), mid = random_f32({3, 2500, 7}, 29u);
      Attributes a;
      a.set("axis", attr_int(1));
      std::vector<Tensor*> ins = {&big, &one, &none, &mid};
      auto k = inferred("Concat", a, ins, {false, false, false, false});
      auto kernel = backends::get("cpu").value()->prepare(k->ctx);
      REQUIRE(kernel.has_value());
      const Tensor want = run_reference("Concat", a, ins);
      for (int threads : {1, 2}) {
        const Tensor got = run_kernel(**kernel, k->ctx, ins, threads);
        same(got, want, "Concat of uneven pieces at " + std::to_string(threads) + " threads");
      }
      Attributes sa;
      sa.set("axis", attr_int(1));
      sa.set("split", attr_ints({9000, 1, 0, 2500}));
      Tensor joined = want;
      auto sk = inferred("Split", sa, {&joined}, {false});
      sk->ctx.outputs.assign(4, TensorInfo{true, DType::kUndefined, {}, nullptr});
      sk->node.outputs = {0, 1, 2, 3};
      sk->ctx.opset = 11;
      REQUIRE(infer_node(*OpRegistry::global().find("Split"), sk->ctx).is_ok());
      auto split = backends::get("cpu").value()->prepare(sk->ctx);
      REQUIRE(split.has_value());
      std::vector<Tensor> parts;
      for (int i = 0; i < 4; ++i) {
        parts.push_back(Tensor::allocate(DType::kFloat32, sk->ctx.outputs[i].shape).value());
      }
      KernelArgs args;
      args.inputs = {&joined};
      for (Tensor& t : parts) args.outputs.push_back(&t);
      REQUIRE((*split)->run(args, ExecContext{2}).is_ok());
      for (int i = 0; i < 4; ++i)
        same(parts[static_cast<size_t>(i)], *ins[static_cast<size_t>(i)], "Split back");
    }
    {
      Attributes a;
      a.set("axis", attr_int(3));
      a.set("split", attr_ints({3, 7}));
      auto k = inferred("Split", a, {&x}, {false});
      k->ctx.outputs.assign(2, TensorInfo{true, DType::kUndefined, {}, nullptr});
      k->node.outputs = {0, 1};
      k->ctx.opset = 11;
      REQUIRE(infer_node(*OpRegistry::global().find("Split"), k->ctx).is_ok());
      auto fast = backends::get("cpu").value()->prepare(k->ctx);
      auto ref = OpRegistry::global().find("Split")->reference(k->ctx);
      REQUIRE((fast.has_value() && ref.has_value()));
      CHECK((*fast)->name() == std::string("split_rows"));
      std::vector<Tensor> got, want;
      for (int i = 0; i < 2; ++i) {
        got.push_back(Tensor::allocate(DType::kFloat32, k->ctx.outputs[i].shape).value());
        want.push_back(Tensor::allocate(DType::kFloat32, k->ctx.outputs[i].shape).value());
      }
      for (auto* pair : {&got, &want}) {
        KernelArgs args;
        args.inputs = {&x};
        args.outputs = {&(*pair)[0], &(*pair)[1]};
        const Kernel& kern = pair == &got ? **fast : **ref;
        REQUIRE(kern.run(args, ExecContext{2}).is_ok());
      }
      same(got[0], want[0], "Split 0");
      same(got[1], want[1], "Split 1");
    }
    Tensor idx = ints({1, -1, 0, 1});
    for (int64_t axis : {0, 1, 3}) {
      Attributes a;
      a.set("axis", attr_int(axis));
      Prepared p = run_cpu("Gather", a, {&x, &idx}, {false, false});
      CHECK(p.kernel == "gather_rows");
      same(p.outputs[0], run_reference("Gather", a, {&x, &idx}), "Gather");
    }
    Tensor nd = Tensor::allocate(DType::kInt64, {3, 2}).value();
    const int64_t tuples[] = {1, 11, 0, -2, 1, 0};
    std::copy(std::begin(tuples), std::end(tuples), nd.data<int64_t>());
    Prepared g = run_cpu("GatherND", {}, {&x, &nd}, {false, false});
    CHECK(g.kernel == "gather_rows");
    same(g.outputs[0], run_reference("GatherND", {}, {&x, &nd}), "GatherND");
    // An index out of range fails the run with a message, as the reference does.
    Tensor bad = ints({12});
    Attributes a1;
    a1.set("axis", attr_int(1));
    auto k = inferred("Gather", a1, {&x, &bad}, {false, false});
    auto kernel = backends::get("cpu").value()->prepare(k->ctx);
    REQUIRE(kernel.has_value());
    Tensor out = Tensor::allocate(DType::kFloat32, k->ctx.outputs[0].shape).value();
    KernelArgs args;
    args.inputs = {&x, &bad};
    args.outputs = {&out};
    const Status st = (*kernel)->run(args, ExecContext{1});
    CHECK(st.code() == Code::kInvalidArgument);
    CHECK(st.message().find("out of range") != std::string::npos);
  }

  TEST_CASE("resize_separable: nearest and linear Resize match the reference kernel") {
    struct Case {
      Shape x;
      std::vector<int64_t> sizes;
      const char* mode;
      const char* transform;
      const char* nearest_mode;
    };
    const Case cases[] = {
        {{1, 3, 7, 5}, {1, 3, 19, 23}, "linear", "half_pixel", "round_prefer_floor"},
        {{2, 2, 9, 12}, {2, 2, 4, 5}, "linear", "half_pixel", "round_prefer_floor"},
        {{1, 2, 6, 6}, {1, 2, 11, 13}, "linear", "align_corners", "round_prefer_floor"},
        {{1, 2, 6, 6}, {1, 2, 12, 12}, "linear", "pytorch_half_pixel", "round_prefer_floor"},
        {{1, 2, 5, 4}, {1, 2, 15, 12}, "nearest", "asymmetric", "floor"},
        {{2, 3, 5, 4}, {4, 6, 7, 9}, "nearest", "half_pixel", "round_prefer_ceil"},
        {{3, 1, 4}, {3, 2, 10}, "nearest", "asymmetric", "floor"},
        {{2, 1, 3, 4, 4}, {2, 1, 3, 8, 8}, "linear", "asymmetric", "round_prefer_floor"},
    };
    for (const Case& cs : cases) {
      Tensor x = random_f32(cs.x, 31u);
      Tensor sizes =
          Tensor::allocate(DType::kInt64, {static_cast<int64_t>(cs.sizes.size())}).value();
      std::copy(cs.sizes.begin(), cs.sizes.end(), sizes.data<int64_t>());
      Attributes a;
      a.set("mode", attr_string(cs.mode));
      a.set("coordinate_transformation_mode", attr_string(cs.transform));
      a.set("nearest_mode", attr_string(cs.nearest_mode));
      std::vector<Tensor*> ins = {&x, nullptr, nullptr, &sizes};
      const std::vector<bool> known = {false, false, false, true};
      const std::string what = std::string(cs.mode) + " " + cs.transform + " " + shape_str(cs.x) +
                               " -> " + shape_str(Shape(cs.sizes));
      Tensor want = run_reference("Resize", a, ins, known);
      for (int threads : {1, 2}) {
        auto k = inferred("Resize", a, ins, known);
        auto kernel = backends::get("cpu").value()->prepare(k->ctx);
        REQUIRE(kernel.has_value());
        CHECK_MESSAGE((*kernel)->name() == std::string("resize_separable"), what);
        Tensor got = run_kernel(**kernel, k->ctx, ins, threads);
        REQUIRE(got.shape() == want.shape());
        Comparison c = compare(got.data<float>(), want.data<float>(),
                               static_cast<size_t>(want.numel()), 1e-6, 1e-6);
        CHECK_MESSAGE(c.mismatches == 0, what, ": max abs ", c.max_abs);
      }
    }
  }

  TEST_CASE("reduce_rows, compare_vec, where_vec, not_vec, expand_rows match the reference") {
    auto same = [](const Tensor& got, const Tensor& want, const std::string& what) {
      REQUIRE_MESSAGE(got.shape() == want.shape(), what);
      CHECK_MESSAGE(std::memcmp(got.raw(), want.raw(), got.byte_size()) == 0, what);
    };
    Tensor x = random_f32({2, 8, 6, 20}, 41u, -2.0f, 2.0f);
    x.data<float>()[77] = std::nanf("");
    for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSumSquare",
                           "ReduceL1", "ReduceL2"}) {
      for (const std::vector<int64_t>& axes :
           std::vector<std::vector<int64_t>>{{3}, {1}, {2, 3}, {0, 1}, {1, 2}, {0, 1, 2, 3}}) {
        for (int64_t keep : {0, 1}) {
          Attributes a;
          a.set("axes", attr_ints(axes));
          a.set("keepdims", attr_int(keep));
          Tensor want = run_reference(op, a, {&x});
          Prepared p = run_cpu(op, a, {&x}, {false});
          const std::string what = std::string(op) + " axes " + shape_str(Shape(axes));
          CHECK_MESSAGE(p.kernel == "reduce_rows", what);
          REQUIRE(p.outputs[0].shape() == want.shape());
          // Float accumulation against the reference's double: NaN where it has NaN.
          Comparison c = compare(p.outputs[0].data<float>(), want.data<float>(),
                                 static_cast<size_t>(want.numel()), 1e-4, 1e-5);
          CHECK_MESSAGE(c.mismatches == 0, what, ": max abs ", c.max_abs);
        }
      }
    }
    // Comparisons and Where over broadcasts of every kind (scalar, row, column, full).
    Tensor a = random_f32({3, 1, 5}, 42u), b = random_f32({4, 1}, 43u), sc = random_f32({}, 44u);
    for (int i = 0; i < 5; ++i) b.data<float>()[i % 4] = a.data<float>()[i];  // some equal
    Tensor full = random_f32({3, 4, 5}, 45u);
    const std::pair<Tensor*, Tensor*> pairs[] = {
        {&a, &b}, {&full, &sc}, {&sc, &full}, {&full, &a}, {&full, &full}};
    for (const char* op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}) {
      for (auto [l, r] : pairs) {
        Prepared p = run_cpu(op, {}, {l, r}, {false, false});
        CHECK(p.kernel == "compare_vec");
        same(p.outputs[0], run_reference(op, {}, {l, r}), op);
      }
    }
    Tensor cond = run_reference("Less", {}, {&a, &b});    // [3, 4, 5]
    Tensor c1 = run_reference("Greater", {}, {&b, &sc});  // [4, 1]
    for (const char* op : {"And", "Or", "Xor"}) {
      Prepared p = run_cpu(op, {}, {&cond, &c1}, {false, false});
      CHECK(p.kernel == "compare_vec");
      same(p.outputs[0], run_reference(op, {}, {&cond, &c1}), op);
    }
    Prepared n = run_cpu("Not", {}, {&cond}, {false});
    CHECK(n.kernel == "not_vec");
    same(n.outputs[0], run_reference("Not", {}, {&cond}), "Not");
    const std::tuple<Tensor*, Tensor*, Tensor*> wheres[] = {
        {&cond, &full, &sc}, {&c1, &a, &full}, {&cond, &sc, &b}, {&c1, &sc, &sc}};
    for (auto [c, l, r] : wheres) {
      Prepared p = run_cpu("Where", {}, {c, l, r}, {false, false, false});
      CHECK(p.kernel == "where_vec");
      same(p.outputs[0], run_reference("Where", {}, {c, l, r}), "Where");
    }
    Tensor shape = Tensor::allocate(DType::kInt64, {4}).value();
    const int64_t dims[] = {2, 3, 4, 5};
    std::copy(std::begin(dims), std::end(dims), shape.data<int64_t>());
    for (Tensor* t : {&a, &b, &sc, &cond}) {
      Prepared p = run_cpu("Expand", {}, {t, &shape}, {false, true});
      CHECK(p.kernel == "expand_rows");
      same(p.outputs[0], run_reference("Expand", {}, {t, &shape}, {false, true}), "Expand");
    }
  }

  TEST_CASE("Einsum contractions read operands in place (transposed) and write the output") {
    struct Case {
      const char* eq;
      Shape a, b;
    };
    const Case cases[] = {
        {"bghid,bghjd->bghij", {1, 3, 2, 5, 4}, {1, 3, 2, 6, 4}},  // MaxViT's q k^T: B read as B^T
        {"bhdi,bhdj->bhij", {2, 3, 4, 5}, {2, 3, 4, 6}},           // A read as A^T
        {"bij,bjk->bik", {3, 4, 5}, {3, 5, 6}},                    // both in place
        {"bij,bjk->bki", {3, 4, 5}, {3, 5, 6}},                    // output permuted after
        {"ij,kj->ik", {4, 7}, {5, 7}},
        {"bid,bjd->ij", {2, 4, 3}, {2, 5, 3}},  // batch summed away
    };
    for (const Case& cs : cases) {
      Tensor a = random_f32(cs.a, 71u), b = random_f32(cs.b, 72u);
      Attributes at;
      at.set("equation", attr_string(cs.eq));
      Tensor want = run_reference("Einsum", at, {&a, &b});
      Prepared p = run_cpu("Einsum", at, {&a, &b}, {false, false});
      CHECK_MESSAGE(p.kernel.rfind("gemm.", 0) == 0, cs.eq, ": ", p.kernel);
      REQUIRE(p.outputs[0].shape() == want.shape());
      Comparison c = compare(p.outputs[0].data<float>(), want.data<float>(),
                             static_cast<size_t>(want.numel()), 1e-5, 1e-5);
      CHECK_MESSAGE(c.mismatches == 0, cs.eq, ": max abs ", c.max_abs);
    }
  }

  TEST_CASE("vectorised InstanceNormalization and GroupNormalization match the reference") {
    Tensor x = random_f32({2, 6, 5, 7}, 5u, -3.0f, 5.0f);
    Tensor scale6 = random_f32({6}, 6u, 0.5f, 1.5f), bias6 = random_f32({6}, 7u, -1.0f, 1.0f);
    Tensor scale3 = random_f32({3}, 8u, 0.5f, 1.5f), bias3 = random_f32({3}, 9u, -1.0f, 1.0f);
    Attributes eps;
    eps.set("epsilon", attr_float(1e-3f));
    Attributes groups = eps;
    groups.set("num_groups", attr_int(3));
    struct Case {
      const char* type;
      Attributes attrs;
      Tensor *scale, *bias;
      const char* kernel;
    };
    const Case cases[] = {{"InstanceNormalization", eps, &scale6, &bias6, "instance_norm."},
                          {"GroupNormalization", groups, &scale6, &bias6, "group_norm."},
                          {"GroupNormalization", groups, &scale3, &bias3, "group_norm."}};
    for (const Case& cs : cases) {
      Tensor want = run_reference(cs.type, cs.attrs, {&x, cs.scale, cs.bias});
      for (const char* cap : {"AVX512", "AVX2", "DEFAULT"}) {
        FlagRestore restore;
        REQUIRE(tern_flag_set("cpu.max_capability", cap) == TERN_OK);
        Prepared p = run_cpu(cs.type, cs.attrs, {&x, cs.scale, cs.bias}, {false, true, true});
        CHECK_MESSAGE(p.kernel.rfind(cs.kernel, 0) == 0, cs.type, " at ", cap, ": ", p.kernel);
        Comparison c = compare(p.outputs[0].data<float>(), want.data<float>(),
                               static_cast<size_t>(x.numel()), 1e-5, 1e-5);
        CHECK_MESSAGE(c.mismatches == 0, cs.type, " at ", cap, ": max abs ", c.max_abs);
      }
    }
  }

  TEST_CASE("InstanceNormalization and GroupNormalization on blocked and channels-last data") {
    // Groups narrower than a block (8 groups of 4), as wide (2 of 16), wider (1 of 32), and one
    // channel each (instance); per-channel and per-group scales; batch 2; blocks 8, 16 and 32
    // (channels-last). Offsets far from 0 check the two-pass variance.
    Tensor x = random_f32({2, 32, 9, 11}, 21u, 40.0f, 44.0f);
    Tensor scale32 = random_f32({32}, 22u, 0.5f, 1.5f), bias32 = random_f32({32}, 23u, -1.0f, 1.0f);
    Tensor scale8 = random_f32({8}, 24u, 0.5f, 1.5f), bias8 = random_f32({8}, 25u, -1.0f, 1.0f);
    struct Case {
      const char* type;
      int64_t groups;
      Tensor *scale, *bias;
    };
    const Case cases[] = {{"InstanceNormalization", 0, &scale32, &bias32},
                          {"GroupNormalization", 8, &scale32, &bias32},
                          {"GroupNormalization", 8, &scale8, &bias8},
                          {"GroupNormalization", 2, &scale32, &bias32},
                          {"GroupNormalization", 1, &scale32, &bias32}};
    for (const Case& cs : cases) {
      Attributes a;
      a.set("epsilon", attr_float(1e-5f));
      if (cs.groups) a.set("num_groups", attr_int(cs.groups));
      Tensor want = run_reference(cs.type, a, {&x, cs.scale, cs.bias});
      for (int block : {8, 16, 32}) {
        Tensor xin = to_blocked(x, block);
        Prepared p =
            run_cpu(cs.type, a, {&xin, cs.scale, cs.bias}, {false, true, true}, block, block);
        CHECK_MESSAGE(p.kernel.find("_blocked") != std::string::npos, p.kernel);
        std::vector<float> got = from_blocked(p.outputs[0], block);
        Comparison c = compare(got.data(), want.data<float>(), got.size(), 2e-4, 2e-4);
        CHECK_MESSAGE(c.mismatches == 0, cs.type, " groups ", cs.groups, " block ", block,
                      ": max abs ", c.max_abs);
      }
    }
  }

  TEST_CASE("BatchNormalization in plain, 8/16-blocked and channels-last layouts") {
    // What DenseNet needs: a BatchNormalization after a channel Concat keeps the Concat's layout.
    Tensor x = random_f32({2, 32, 5, 3}, 11u, -3.0f, 5.0f);
    Tensor scale = random_f32({32}, 12u, 0.5f, 1.5f), bias = random_f32({32}, 13u, -1.0f, 1.0f);
    Tensor mean = random_f32({32}, 14u, -1.0f, 1.0f), var = random_f32({32}, 15u, 0.1f, 2.0f);
    Attributes a;
    a.set("epsilon", attr_float(1e-3f));
    std::vector<float> want(static_cast<size_t>(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t c = (i / 15) % 32;
      const double k = scale.data<float>()[c] / std::sqrt(double(var.data<float>()[c]) + 1e-3);
      want[static_cast<size_t>(i)] = static_cast<float>(
          (x.data<float>()[i] - mean.data<float>()[c]) * k + bias.data<float>()[c]);
    }
    for (int block : {0, 8, 16, 32}) {
      Tensor xin = block ? to_blocked(x, block) : x;
      Prepared p = run_cpu("BatchNormalization", a, {&xin, &scale, &bias, &mean, &var},
                           {false, true, true, true, true}, block, block);
      CHECK_MESSAGE(p.kernel == (block ? "batch_norm_blocked" : "batch_norm"), p.kernel);
      std::vector<float> got = block ? from_blocked(p.outputs[0], block) : values_f32(p.outputs[0]);
      Comparison c = compare(got.data(), want.data(), want.size(), 1e-5, 1e-5);
      CHECK_MESSAGE(c.mismatches == 0, "block ", block, ": max abs ", c.max_abs);
    }
    // An input in another layout than the output's is declined (the planner then plans plain).
    Tensor xin = to_blocked(x, 8);
    auto k = inferred("BatchNormalization", a, {&xin, &scale, &bias, &mean, &var},
                      {false, true, true, true, true}, 8);
    k->ctx.outputs[0].block = 16;
    auto kernel = backends::get("cpu").value()->prepare(k->ctx);
    REQUIRE_FALSE(kernel.has_value());
    CHECK(kernel.status().code() == Code::kUnsupported);
  }

  TEST_CASE("transpose_f32: strided matrices of any size, 8 x 8 blocks and edges") {
    if (tern_cpu_get_capability() != std::string("AVX512") &&
        tern_cpu_get_capability() != std::string("AVX2")) {
      MESSAGE("skipped: the CPU lacks AVX2");
      return;
    }
    std::mt19937 rng(11);
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    for (int trial = 0; trial < 60; ++trial) {
      const int64_t rows = pick(1, 37), cols = pick(1, 37);
      const int64_t lds = cols + pick(0, 5), ldd = rows + pick(0, 5);
      std::vector<float> src(static_cast<size_t>(rows * lds)),
          dst(static_cast<size_t>(cols * ldd), -1.0f);
      for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i);
      transpose_f32(src.data(), lds, rows, cols, dst.data(), ldd);
      int64_t wrong = 0, touched = 0;
      for (int64_t c = 0; c < cols; ++c) {
        for (int64_t r = 0; r < ldd; ++r) {
          const float got = dst[static_cast<size_t>(c * ldd + r)];
          if (r < rows) {
            wrong += got != src[static_cast<size_t>(r * lds + c)];
          } else {
            touched += got != -1.0f;  // past the rows: left alone
          }
        }
      }
      CAPTURE(rows);
      CAPTURE(cols);
      CHECK(wrong == 0);
      CHECK(touched == 0);
    }
  }
}
