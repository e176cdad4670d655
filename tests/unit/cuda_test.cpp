// The CUDA suite: the CUDA kernels against the CPU's, op family by op family (each graph runs once
// in a session whose only backend is CUDA, so every node must have a CUDA kernel, and once on the
// CPU), each cuda.* and cudnn.* flag's effect (the kernel a plan picks, and the numbers), capture
// and replay of device stretches (cuda.graphs) with changing inputs and changing device addresses,
// many threads on one session, the caller's current device kept, cuda:1, model constants uploaded
// once per session, device out-of-memory, cancellation and deadlines (paced queueing), and the
// module's own answers. It needs a GPU: without one every case prints "CUDA suite skipped: <why>"
// and ctest reports the suite skipped.
//
// Tolerances: float32 kernels accumulate in float32 in another order than the CPU's (rtol 1e-4);
// convolutions run with cudnn.allow_tf32 off unless a case is about TF32 (its default is on, as
// in PyTorch, and TF32 keeps 10 mantissa bits); half-precision results are compared with the
// float32 CPU result at float16's resolution.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "backend_compare.h"
#include "backends/cuda/cuda_module.h"
#include "backends_util.h"
#include "c_api.h"
#include "cancel_util.h"

using namespace tern;
using namespace tern_test;

namespace {

std::string cuda_missing() {
  if (!tern_cuda_is_built()) return "no CUDA module: " + backends::record("cuda")->report();
  if (!tern_cuda_is_available()) return "no CUDA device: " + backends::record("cuda")->report();
  return "";
}

#define SKIP_WITHOUT_CUDA() TERN_SKIP_UNLESS_USABLE("CUDA suite skipped: ", cuda_missing())

// The loaded module; libtern has the loader only in builds with CUDA (none in cross, sanitizer
// and fuzz builds), where every case skips before asking.
const CudaModule* loaded_module() {
#if defined(TERN_HAVE_CUDA)
  return backends::cuda_module();
#else
  return nullptr;
#endif
}

// Strict float32 comparisons: convolutions off TF32 (cudnn.allow_tf32 defaults to on).
const FlagList kNoTf32 = {{FlagId::kCudnnAllowTf32, 0}, {FlagId::kCudaAllowTf32, 0}};

// A session of `m` through the C API on CUDA alone, cuda.graphs on or off.
tern_session* cuda_c_session(tern_model* m, bool graphs) {
  tern_session_options* o = nullptr;
  REQUIRE(tern_session_options_create(&o) == TERN_OK);
  REQUIRE(tern_session_options_set_backends(o, "cuda") == TERN_OK);
  REQUIRE(tern_session_options_set_cpu_fallback(o, 0) == TERN_OK);
  REQUIRE(tern_session_options_set_flag(o, "cuda.graphs", graphs ? "1" : "0") == TERN_OK);
  tern_session* s = nullptr;
  const tern_status st = tern_session_create(m, o, &s);
  tern_session_options_destroy(o);
  REQUIRE_MESSAGE(st == TERN_OK, tern_last_error());
  return s;
}

void check_op(SingleOp op, const std::string& what, double rtol = 1e-4, double atol = 1e-5) {
  check_op_on("cuda", std::move(op), what, rtol, atol, kNoTf32);
}

void check_graph(const GraphMaker& m, const std::vector<Tensor>& inputs, const std::string& what,
                 FlagList flags = {}, double rtol = 1e-4, double atol = 1e-4) {
  flags.insert(flags.begin(), kNoTf32.begin(), kNoTf32.end());  // later entries win
  check_graph_on("cuda", m, inputs, what, flags, rtol, atol);
}

Tensor to_bf16(const Tensor& f) {
  Tensor t = Tensor::allocate(DType::kBFloat16, f.shape()).value();
  for (int64_t i = 0; i < f.numel(); ++i) {
    t.data<uint16_t>()[i] = float_to_bfloat16(f.data<float>()[i]);
  }
  return t;
}

// A half-precision result against a float32 one, at the half type's resolution.
void check_close(const Tensor& got, const Tensor& want, const std::string& what, double rtol,
                 double atol) {
  REQUIRE_MESSAGE(got.shape() == want.shape(), what);
  const std::vector<float> a = as_floats(got), b = as_floats(want);
  const Comparison c = compare(a.data(), b.data(), a.size(), rtol, atol);
  CHECK_MESSAGE(c.mismatches == 0, what, ": ", c.mismatches, " of ", a.size(),
                " differ, max abs err ", c.max_abs);
}

// A session over `m` on `backends` with `flags`, kept for several runs.
std::unique_ptr<Session> make_session(const GraphMaker& m, const std::vector<std::string>& backends,
                                      const FlagList& flags = {}) {
  Graph g = m.g;
  g.opset = 13;
  auto model = Model::create(std::move(g), nullptr, "cuda_test").value();
  SessionConfig cfg;
  for (const std::string& b : backends) cfg.backends.push_back(backends::get(b).value());
  for (const auto& [id, v] : flags) cfg.overrides.set(id, v);
  auto s = Session::create(model, cfg);
  REQUIRE_MESSAGE(s.has_value(), s.status().message());
  return std::move(s).value();
}

std::vector<Tensor> run_on(Session& s, const std::vector<const Tensor*>& inputs,
                           const Device* output_device = nullptr) {
  std::vector<std::string> names, outs;
  for (size_t i = 0; i < inputs.size(); ++i) names.push_back("x" + std::to_string(i));
  for (int id : s.graph().outputs) outs.push_back(s.graph().value_name(id));
  std::vector<Tensor> result;
  const Status st = s.run(names, inputs, outs, &result, nullptr, output_device);
  REQUIRE_MESSAGE(st.is_ok(), st.message());
  return result;
}

// The kernel names of a plan's steps for these input shapes, in order.
std::vector<std::string> kernel_names(Session& s, const std::vector<Shape>& shapes) {
  auto plan = s.plan_for(shapes);
  REQUIRE_MESSAGE(plan.has_value(), plan.status().message());
  std::vector<std::string> names;
  for (const PlanStep& st : (*plan)->steps) names.emplace_back(st.kernel->name());
  return names;
}

bool has_kernel(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Replays and concurrent runs execute the same kernels as an eager run; the bound is far below
// what reading a wrong buffer would give, and leaves room for a library whose split-K reduction
// order is not fixed.
bool same_result(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  const std::vector<float> x = as_floats(a), y = as_floats(b);
  return compare(x.data(), y.data(), x.size(), 1e-5, 1e-6).mismatches == 0;
}

// One Conv of x with random weights of shape w, padded to keep the spatial size.
GraphMaker conv_model(const Tensor& x, const Shape& w, unsigned seed) {
  GraphMaker m;
  const std::vector<int> in = add_inputs(m, {x});
  const int64_t p = w.back() / 2;
  m.g.outputs = {m.node("Conv", {in[0], m.constant("w", random_f32(w, seed))},
                        attrs({{"pads", attr_ints({p, p, p, p})}}))};
  return m;
}

// x0 [n, 64] -> Gemm(W [64, 96], b) -> Relu -> Reshape [n, 6, 4, 4] -> Conv 3x3 (6 -> 8) ->
// Softmax(axis 1) -> y: a GEMM, a convolution and device element-wise work in one device stretch.
GraphMaker mixed_model() {
  GraphMaker m;
  ValueType t{DType::kFloat32, true, {Dim{-1, "n"}, Dim{64, ""}}};
  const int x = m.g.add_value("x0", t);
  m.g.inputs = {x};
  const int g = m.node("Gemm", {x, m.constant("w", random_f32({64, 96}, 1, -0.2f, 0.2f)),
                                m.constant("b", random_f32({96}, 2))});
  const int r = m.node("Relu", {g});
  const int s = m.node("Reshape", {r, m.constant("shape", make_i64({4}, {-1, 6, 4, 4}))});
  const int c = m.node("Conv", {s, m.constant("k", random_f32({8, 6, 3, 3}, 3, -0.3f, 0.3f))},
                       attrs({{"pads", attr_ints({1, 1, 1, 1})}}));
  m.g.outputs = {m.node("Softmax", {c}, attrs({{"axis", attr_int(1)}}))};
  return m;
}

}  // namespace

TEST_SUITE("cuda") {
  TEST_CASE("binary ops with broadcasting match the CPU (float32, float16, int64)") {
    SKIP_WITHOUT_CUDA();
    const std::vector<std::pair<Shape, Shape>> shapes = broadcast_cases();
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "PRelu"}) {
      unsigned seed = 1;
      const bool pow = std::string(op) == "Pow";
      for (const auto& [a, b] : shapes) {
        const Tensor x = random_f32(a, seed++, pow ? 0.1f : -2.f, 2.f);
        const Tensor y = random_f32(b, seed++, pow ? -2.f : 0.5f, 2.f);
        const std::string what = std::string(op) + " " + shape_str(a) + " " + shape_str(b);
        check_op(SingleOp{op, {}, {x, y}, {}}, what);
        if (pow || std::string(op) == "PRelu") continue;
        // float16: the CPU's float16 kernel is the reference, one half-precision rounding apart.
        check_op(SingleOp{op, {}, {to_f16(x), to_f16(y)}, {}}, what + " f16", 2e-3, 2e-3);
      }
    }
    const Tensor a = make_i64({6}, {1, -7, 5000000000LL, 3, -4, 9});
    const Tensor b = make_i64({6}, {2, 3, 2, -3, 4, 9});
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"}) {
      check_op(SingleOp{op, {}, {a, b}, {}}, std::string(op) + " int64", 0, 0);
    }
  }

  TEST_CASE("unary ops and activations match the CPU") {
    SKIP_WITHOUT_CUDA();
    for (const char* op : {"Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Neg", "Abs", "Softplus",
                           "HardSwish", "Floor", "Ceil", "Round", "Sin", "Cos", "Sign", "Mish"}) {
      check_op(SingleOp{op, {}, {random_f32({2, 3, 8, 9}, 3, -4, 4)}, {}}, op);
    }
    const Tensor x = random_f32({4, 32}, 5, -5, 5);
    for (const auto& [what, op] : activation_cases(x, random_f32({4, 33}, 4, 0.1f, 4))) {
      check_op(op, what);
    }
    check_op(SingleOp{"Sigmoid", {}, {to_f16(x)}, {}}, "Sigmoid f16", 2e-3, 2e-3);
  }

  TEST_CASE("Cast between float32, float16, int32 and int64 matches the CPU") {
    SKIP_WITHOUT_CUDA();
    for (const auto& [what, op] : integer_cast_cases()) check_op(op, what, 0, 0);
    check_op(SingleOp{"Cast", attrs({{"to", attr_int(10)}}), {random_f32({5, 7}, 6, -9, 9)}, {}},
             "float32->float16", 0, 0);
    check_op(SingleOp{"Cast", attrs({{"to", attr_int(1)}}), {to_f16(random_f32({5, 7}, 7))}, {}},
             "float16->float32", 0, 0);
  }

  TEST_CASE("reductions, softmax, layer and batch norm match the CPU") {
    SKIP_WITHOUT_CUDA();
    const Tensor x = random_f32({3, 4, 5, 6}, 8, -2, 2);
    for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                           "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSumExp"}) {
      for (const std::vector<int64_t>& axes :
           {std::vector<int64_t>{1}, std::vector<int64_t>{3}, std::vector<int64_t>{0, 2},
            std::vector<int64_t>{1, 2, 3}}) {
        for (int64_t keep : {0, 1}) {
          SingleOp r{op,
                     attrs({{"keepdims", attr_int(keep)}}),
                     {x},
                     {make_i64({static_cast<int64_t>(axes.size())}, axes)}};
          r.opset = 18;  // axes as an input
          check_op(r,
                   std::string(op) + " axes " + shape_str(axes) + " keep " + std::to_string(keep),
                   1e-4, 1e-4);
        }
      }
    }
    // One block per long contiguous row (the path whose shared-memory reuse needs a barrier),
    // values large enough that the max subtraction matters.
    SingleOp lse{"ReduceLogSumExp",
                 attrs({{"keepdims", attr_int(0)}}),
                 {random_f32({3, 5000}, 9, -60, 60)},
                 {make_i64({1}, {1})}};
    lse.opset = 18;
    for (int i = 0; i < 5; ++i) check_op(lse, "ReduceLogSumExp rows of 5000", 1e-5, 1e-4);
    for (const char* op : {"Softmax", "LogSoftmax"}) {
      for (int64_t axis : {-1, 1, 0}) {
        check_op(SingleOp{op, attrs({{"axis", attr_int(axis)}}), {x}, {}},
                 std::string(op) + " axis " + std::to_string(axis));
      }
      check_op(SingleOp{op, {}, {to_f16(x)}, {}}, std::string(op) + " f16", 2e-3, 2e-3);
    }
    SingleOp ln{"LayerNormalization",
                attrs({{"axis", attr_int(-1)}}),
                {random_f32({4, 7, 96}, 10)},
                {random_f32({96}, 11), random_f32({96}, 12)}};
    ln.opset = 17;
    check_op(ln, "LayerNormalization");
    check_batch_norms_on("cuda", 13, kNoTf32);
    check_op(SingleOp{"GlobalAveragePool", {}, {random_f32({2, 5, 9, 11}, 18)}, {}},
             "GlobalAveragePool");
  }

  TEST_CASE("MatMul and Gemm match the CPU under each cuda.preferred_blas_library") {
    SKIP_WITHOUT_CUDA();
    for (int64_t lib : {0, 1, 2}) {  // DEFAULT, CUBLAS, CUBLASLT
      const FlagList f = {{FlagId::kCudaBlasLibrary, lib}};
      const std::string l = " blas " + std::to_string(lib);
      for (const auto& [a, b] : std::vector<std::pair<Shape, Shape>>{{{1, 1}, {1, 1}},
                                                                     {{65, 130}, {130, 67}},
                                                                     {{3, 17, 32}, {3, 32, 9}},
                                                                     {{2, 3, 17, 32}, {32, 9}},
                                                                     {{4, 1, 5, 8}, {3, 8, 6}}}) {
        check_op_on("cuda", SingleOp{"MatMul", {}, {random_f32(a, 20), random_f32(b, 21)}, {}},
                    "MatMul " + shape_str(a) + " x " + shape_str(b) + l, 1e-4, 1e-4, f);
      }
      for (int64_t ta : {0, 1}) {
        for (int64_t tb : {0, 1}) {
          for (const Shape& c : {Shape{9}, Shape{7, 1}, Shape{7, 9}}) {
            const Tensor A = random_f32(ta ? Shape{12, 7} : Shape{7, 12}, 22);
            const Tensor B = random_f32(tb ? Shape{9, 12} : Shape{12, 9}, 23);
            SingleOp gemm{"Gemm",
                          attrs({{"transA", attr_int(ta)},
                                 {"transB", attr_int(tb)},
                                 {"alpha", attr_float(0.75f)},
                                 {"beta", attr_float(c.size() == 1 ? 1.0f : 0.5f)}}),
                          {A},
                          {B, random_f32(c, 24)}};
            check_op_on("cuda", gemm,
                        "Gemm tA" + std::to_string(ta) + " tB" + std::to_string(tb) + " C" +
                            shape_str(c) + l,
                        1e-4, 1e-4, f);
          }
        }
      }
    }
  }

  TEST_CASE("float16 and bfloat16 Gemm with a bias run on CUDA under every BLAS choice") {
    SKIP_WITHOUT_CUDA();
    // The bias of a half-precision Gemm on cuBLAS (no epilogue there) is decided at planning: it
    // used to fail at run time with UNSUPPORTED.
    const Tensor a = random_f32({33, 64}, 30), b = random_f32({64, 40}, 31);
    const Tensor c = random_f32({40}, 32);
    GraphMaker f32;
    const std::vector<int> in = add_inputs(f32, {a});
    f32.g.outputs = {f32.node("Gemm", {in[0], f32.constant("b", b), f32.constant("c", c)})};
    const Tensor want = run_graph(f32.g, {a}, {"cpu"})[0];
    for (DType t : {DType::kFloat16, DType::kBFloat16}) {
      const bool h = t == DType::kFloat16;
      const Tensor ah = h ? to_f16(a) : to_bf16(a);
      GraphMaker m;
      const std::vector<int> hin = add_inputs(m, {ah});
      m.g.outputs = {m.node("Gemm", {hin[0], m.constant("b", h ? to_f16(b) : to_bf16(b)),
                                     m.constant("c", h ? to_f16(c) : to_bf16(c))})};
      for (int64_t lib : {0, 1, 2}) {
        auto s = make_session(m, {"cuda"}, {{FlagId::kCudaBlasLibrary, lib}});
        const std::vector<std::string> k = kernel_names(*s, {ah.shape()});
        CHECK_MESSAGE((has_kernel(k, "cublas") || has_kernel(k, "cublasLt")), lib);
        if (lib == 1) CHECK(has_kernel(k, "cublas"));
        const Tensor got = run_on(*s, {&ah})[0];
        CHECK(got.dtype() == t);
        // Inputs rounded to 11 (float16) or 8 (bfloat16) significant bits, 64 products summed.
        check_close(got, want,
                    std::string(dtype_name(t)) + " Gemm + bias, blas " + std::to_string(lib),
                    h ? 1e-2 : 5e-2, h ? 2e-2 : 1.5e-1);
      }
    }
  }

  TEST_CASE("convolutions (cuDNN and direct), ConvTranspose and pooling match the CPU") {
    SKIP_WITHOUT_CUDA();
    struct Case {
      Shape x;
      int64_t m, k, stride, pad_begin, pad_end, dilation, group;
    };
    const Case cases[] = {
        {{1, 3, 17, 19}, 8, 3, 1, 1, 1, 1, 1}, {{2, 4, 16, 16}, 5, 3, 2, 1, 1, 1, 1},
        {{1, 8, 9, 9}, 8, 3, 1, 1, 1, 1, 8},   {{1, 6, 12, 10}, 4, 3, 1, 2, 2, 2, 2},
        {{1, 16, 8, 8}, 70, 1, 1, 0, 0, 1, 1}, {{1, 3, 23, 23}, 16, 7, 2, 3, 3, 1, 1},
        {{1, 4, 11, 9}, 6, 3, 2, 0, 1, 1, 1},  {{1, 4, 30}, 6, 5, 1, 2, 2, 1, 1},
        {{1, 2, 6, 7, 8}, 3, 3, 1, 1, 1, 1, 1}};
    unsigned seed = 40;
    for (const Case& c : cases) {
      const size_t sp = c.x.size() - 2;
      Shape wshape = {c.m, c.x[1] / c.group};
      for (size_t d = 0; d < sp; ++d) wshape.push_back(c.k);
      const Tensor x = random_f32(c.x, seed++);
      const Tensor w = random_f32(wshape, seed++, -0.5f, 0.5f);
      const Tensor b = random_f32({c.m}, seed++);
      std::vector<int64_t> pads(sp, c.pad_begin);
      pads.insert(pads.end(), sp, c.pad_end);  // asymmetric ones run on the direct kernel
      const Attributes a = attrs({{"strides", attr_ints(std::vector<int64_t>(sp, c.stride))},
                                  {"pads", attr_ints(pads)},
                                  {"dilations", attr_ints(std::vector<int64_t>(sp, c.dilation))},
                                  {"group", attr_int(c.group)}});
      for (int64_t cudnn : {1, 0}) {
        GraphMaker m;
        const std::vector<int> in = add_inputs(m, {x});
        const int y = m.node("Conv", {in[0], m.constant("w", w), m.constant("b", b)}, a);
        const std::string what = "conv " + shape_str(c.x) + " k" + std::to_string(c.k) + " s" +
                                 std::to_string(c.stride) + " g" + std::to_string(c.group) +
                                 " cudnn " + std::to_string(cudnn);
        m.g.outputs = {y};
        check_graph(m, {x}, what, {{FlagId::kCudnnEnabled, cudnn}});
        // Conv + bias -> Relu -> Add -> HardSigmoid: a FusedConv and its epilogue.
        GraphMaker fused = m;
        const int r = fused.node("Relu", {y});
        fused.g.outputs = {fused.node("HardSigmoid", {fused.node("Add", {r, y})})};
        check_graph(fused, {x}, what + " fused", {{FlagId::kCudnnEnabled, cudnn}});
      }
    }
    const Tensor xt = random_f32({1, 4, 7, 9}, 60);
    for (int64_t group : {1, 2}) {
      for (int64_t stride : {1, 2}) {
        const Attributes a = attrs({{"strides", attr_ints({stride, stride})},
                                    {"pads", attr_ints({1, 0, 1, 1})},
                                    {"output_padding", attr_ints({stride - 1, 0})},
                                    {"group", attr_int(group)}});
        check_op(SingleOp{"ConvTranspose",
                          a,
                          {xt},
                          {random_f32({4, 6 / group, 3, 3}, 61), random_f32({6}, 62)}},
                 "ConvTranspose g" + std::to_string(group) + " s" + std::to_string(stride));
      }
    }
    const Tensor xp = random_f32({2, 3, 13, 11}, 63);
    for (const char* op : {"MaxPool", "AveragePool"}) {
      for (int64_t ceil_mode : {0, 1}) {
        for (int64_t include_pad : {0, 1}) {
          Attributes a = attrs({{"kernel_shape", attr_ints({3, 2})},
                                {"strides", attr_ints({2, 2})},
                                {"pads", attr_ints({1, 0, 1, 1})},
                                {"ceil_mode", attr_int(ceil_mode)}});
          if (std::string(op) == "AveragePool") {
            a.set("count_include_pad", attr_int(include_pad));
          } else if (include_pad) {
            continue;
          }
          check_op(SingleOp{op, a, {xp}, {}}, std::string(op) + " ceil " +
                                                  std::to_string(ceil_mode) + " include_pad " +
                                                  std::to_string(include_pad));
        }
      }
    }
  }

  TEST_CASE("data movement matches the CPU: Transpose, Slice, Concat, Gather, Resize, Expand") {
    SKIP_WITHOUT_CUDA();
    const Tensor x = random_f32({2, 3, 4, 5}, 70);
    check_op(SingleOp{"Transpose", attrs({{"perm", attr_ints({0, 3, 1, 2})}}), {x}, {}},
             "Transpose", 0, 0);
    check_op(SingleOp{"Slice",
                      {},
                      {x},
                      {make_i64({2}, {1, 4}), make_i64({2}, {-100, 0}), make_i64({2}, {1, 3}),
                       make_i64({2}, {-1, -2})}},
             "Slice with negative steps", 0, 0);
    check_op(
        SingleOp{"Concat", attrs({{"axis", attr_int(2)}}), {x, random_f32({2, 3, 2, 5}, 71)}, {}},
        "Concat", 0, 0);
    check_op(
        SingleOp{"Gather", attrs({{"axis", attr_int(1)}}), {x}, {make_i64({4}, {2, 0, -1, 1})}},
        "Gather", 0, 0);
    check_op(SingleOp{"Expand", {}, {random_f32({3, 1}, 72)}, {make_i64({3}, {2, 3, 4})}}, "Expand",
             0, 0);
    for (const char* mode : {"nearest", "linear"}) {
      SingleOp r{"Resize",
                 attrs({{"mode", attr_string(mode)}}),
                 {random_f32({1, 2, 5, 7}, 73)},
                 {std::nullopt, make_f32({4}, {1, 1, 2, 1.5f})}};
      r.opset = 13;
      check_op(r, std::string("Resize ") + mode);
    }
    GraphMaker m;
    const std::vector<int> in = add_inputs(m, {x});
    const int f = m.node("Flatten", {in[0]}, attrs({{"axis", attr_int(2)}}));
    m.g.outputs = {m.node("Unsqueeze", {f, m.constant("axes", make_i64({1}, {0}))})};
    check_graph(m, {x}, "Flatten, Unsqueeze", {}, 0, 0);
  }

  TEST_CASE("Gather indices out of range at run time fail the run, with and without graphs") {
    SKIP_WITHOUT_CUDA();
    for (int64_t graphs : {0, 1}) {
      CAPTURE(graphs);
      FlagList flags = kNoTf32;
      flags.push_back({FlagId::kCudaGraphs, graphs});
      check_gather_out_of_range("cuda", flags);
    }
  }

  TEST_CASE("Attention: FLASH, MEM_EFFICIENT and MATH each match the reference") {
    SKIP_WITHOUT_CUDA();
    const Tensor q = random_f32({2, 4, 37, 32}, 80), k = random_f32({2, 4, 45, 32}, 81);
    const Tensor v = random_f32({2, 4, 45, 32}, 82);
    const Tensor mask = random_f32({2, 1, 37, 45}, 83, -2, 0);
    struct Kind {
      FlagId flag;
      const char* kernel;
    };
    for (const Kind& kind : {Kind{FlagId::kSdpFlash, "cuda_flash"},
                             Kind{FlagId::kSdpMemEfficient, "cuda_mem_efficient"},
                             Kind{FlagId::kSdpMath, "cuda_math"}}) {
      for (int variant = 0; variant < 3; ++variant) {  // plain, causal, float mask
        Attributes at;
        if (variant == 1) at.set("is_causal", attr_int(1));
        SingleOp op{"Attention", at, {q, k, v}, {}, 23, 1};
        if (variant == 2) op.runtime.push_back(mask);
        FlagList only = {{FlagId::kSdpFlash, 0},
                         {FlagId::kSdpMemEfficient, 0},
                         {FlagId::kSdpMath, 0},
                         {kind.flag, 1}};
        const std::string what = std::string(kind.kernel) + " variant " + std::to_string(variant);
        check_op_on("cuda", op, what, 1e-4, 2e-5, only);
        // The plan picked the kernel asked for.
        GraphMaker m;
        std::vector<Tensor> ins = {q, k, v};
        if (variant == 2) ins.push_back(mask);
        std::vector<int> ids = add_inputs(m, ins);
        m.g.outputs = {m.node("Attention", ids, at)};
        Graph g = m.g;
        g.opset = 23;
        SessionConfig cfg;
        cfg.backends = {backends::get("cuda").value()};
        for (const auto& [id, val] : only) cfg.overrides.set(id, val);
        auto s = Session::create(Model::create(std::move(g), nullptr, "attn").value(), cfg).value();
        std::vector<Shape> shapes;
        for (const Tensor& t : ins) shapes.push_back(t.shape());
        CHECK_MESSAGE(has_kernel(kernel_names(*s, shapes), kind.kernel), what);
      }
    }
  }

  TEST_CASE("flags: TF32 off keeps float32 accuracy, the BLAS and cuDNN flags pick the kernel") {
    SKIP_WITHOUT_CUDA();
    const Tensor a = random_f32({256, 512}, 90), b = random_f32({512, 256}, 91);
    GraphMaker mm;
    const std::vector<int> in = add_inputs(mm, {a});
    mm.g.outputs = {mm.node("MatMul", {in[0], mm.constant("b", b)})};
    const Tensor want = run_graph(mm.g, {a}, {"cpu"})[0];
    // cuda.matmul.allow_tf32: off is float32 (products of 512 terms of [-1, 1]); on may use TF32
    // tensor cores (10 mantissa bits), whose error is bounded looser.
    const Tensor fp32 = run_graph(mm.g, {a}, {"cuda"}, {{FlagId::kCudaAllowTf32, 0}})[0];
    check_close(fp32, want, "MatMul TF32 off", 1e-4, 2e-4);
    const Tensor tf32 = run_graph(mm.g, {a}, {"cuda"}, {{FlagId::kCudaAllowTf32, 1}})[0];
    check_close(tf32, want, "MatMul TF32 on", 1e-2, 5e-2);
    // cuda.preferred_blas_library: CUBLAS and CUBLASLT name their kernel.
    auto s1 = make_session(mm, {"cuda"}, {{FlagId::kCudaBlasLibrary, 1}});
    CHECK(has_kernel(kernel_names(*s1, {a.shape()}), "cublas"));
    auto s2 = make_session(mm, {"cuda"}, {{FlagId::kCudaBlasLibrary, 2}});
    CHECK(has_kernel(kernel_names(*s2, {a.shape()}), "cublasLt"));
    // The reduced-precision reductions only loosen half-precision GEMMs: both settings run, off
    // within the half type's resolution of the float32 result.
    for (DType t : {DType::kFloat16, DType::kBFloat16}) {
      const bool h = t == DType::kFloat16;
      const Tensor ah = h ? to_f16(a) : to_bf16(a);
      GraphMaker hm;
      const std::vector<int> hin = add_inputs(hm, {ah});
      hm.g.outputs = {hm.node("MatMul", {hin[0], hm.constant("b", h ? to_f16(b) : to_bf16(b))})};
      const FlagId flag = h ? FlagId::kCudaAllowFp16Reduced : FlagId::kCudaAllowBf16Reduced;
      for (int64_t reduced : {0, 1}) {
        const Tensor got = run_graph(hm.g, {ah}, {"cuda"}, {{flag, reduced}})[0];
        check_close(got, want,
                    std::string(dtype_name(t)) + " MatMul reduced " + std::to_string(reduced),
                    h ? 2e-2 : 5e-2, h ? 1e-1 : 3e-1);
      }
    }
    // cudnn.enabled picks cuDNN or Tern's direct kernel; cudnn.allow_tf32 bounds the error.
    const Tensor x = random_f32({2, 32, 20, 20}, 92);
    const GraphMaker cm = conv_model(x, {32, 32, 3, 3}, 93);
    const Tensor cwant = run_graph(cm.g, {x}, {"cpu"})[0];
    auto on = make_session(cm, {"cuda"}, {{FlagId::kCudnnEnabled, 1}});
    CHECK(has_kernel(kernel_names(*on, {x.shape()}), "cudnn"));
    auto off = make_session(cm, {"cuda"}, {{FlagId::kCudnnEnabled, 0}});
    CHECK(has_kernel(kernel_names(*off, {x.shape()}), "cuda_conv_direct"));
    check_close(run_on(*off, {&x})[0], cwant, "direct conv", 1e-4, 1e-4);
    for (int64_t tf32_on : {0, 1}) {
      const Tensor got = run_graph(cm.g, {x}, {"cuda"}, {{FlagId::kCudnnAllowTf32, tf32_on}})[0];
      // 288 products per output: float32 FMA math is within 1e-4; TF32 within its 10 bits.
      check_close(got, cwant, "cudnn tf32 " + std::to_string(tf32_on), tf32_on ? 1e-2 : 1e-4,
                  tf32_on ? 5e-2 : 1e-4);
    }
  }

  TEST_CASE("flags: cudnn.deterministic repeats bitwise, cudnn.benchmark and its limit run") {
    SKIP_WITHOUT_CUDA();
    const Tensor x = random_f32({4, 16, 28, 28}, 100);
    const GraphMaker m = conv_model(x, {32, 16, 5, 5}, 101);
    const Tensor want = run_graph(m.g, {x}, {"cpu"})[0];
    auto det =
        make_session(m, {"cuda"}, {{FlagId::kCudnnDeterministic, 1}, {FlagId::kCudnnAllowTf32, 0}});
    const Tensor first = run_on(*det, {&x})[0];
    for (int i = 0; i < 5; ++i) CHECK(bitwise_equal(run_on(*det, {&x})[0], first));
    check_close(first, want, "deterministic conv", 1e-4, 1e-4);
    for (int64_t limit : {0, 1, 3}) {
      auto bench = make_session(m, {"cuda"},
                                {{FlagId::kCudnnBenchmark, 1},
                                 {FlagId::kCudnnBenchmarkLimit, limit},
                                 {FlagId::kCudnnAllowTf32, 0}});
      // The timed search ran at planning; whichever algorithm won is float32 math.
      check_close(run_on(*bench, {&x})[0], want, "benchmark limit " + std::to_string(limit), 1e-4,
                  1e-4);
    }
  }

  TEST_CASE("cuda.graphs: replays match eager runs, inputs and device addresses changing") {
    SKIP_WITHOUT_CUDA();
    const GraphMaker m = mixed_model();
    auto eager =
        make_session(m, {"cuda"}, {{FlagId::kCudaGraphs, 0}, {FlagId::kCudnnDeterministic, 1}});
    auto graphs =
        make_session(m, {"cuda"}, {{FlagId::kCudaGraphs, 1}, {FlagId::kCudnnDeterministic, 1}});
    const Device cuda{DeviceType::kCuda, 0};
    for (int i = 0; i < 6; ++i) {
      const Tensor x = random_f32({3, 64}, 110 + static_cast<unsigned>(i));
      const Tensor want = run_on(*eager, {&x})[0];
      CHECK_MESSAGE(same_result(run_on(*graphs, {&x})[0], want), "host input, run ", i);
      // The same values bound on the device, in a new buffer each time (new addresses), the
      // output left there too.
      tern_tensor* host = nullptr;
      tern_tensor* dev = nullptr;
      const int64_t shape[] = {3, 64};
      REQUIRE(tern_tensor_create(TERN_FLOAT32, shape, 2, &host) == TERN_OK);
      std::memcpy(tern_tensor_data(host), x.raw(), x.byte_size());
      REQUIRE(tern_tensor_create_on_device(TERN_FLOAT32, shape, 2, "cuda", &dev) == TERN_OK);
      REQUIRE(tern_tensor_copy(host, dev) == TERN_OK);
      const Tensor bound =
          Tensor::wrap(DType::kFloat32, {3, 64}, tern_tensor_data(dev), nullptr, cuda);
      const std::vector<Tensor> out = run_on(*graphs, {&bound}, &cuda);
      REQUIRE(out[0].device() == cuda);
      Tensor back = Tensor::allocate(DType::kFloat32, out[0].shape()).value();
      REQUIRE(backends::get("cuda").value()->copy_to_host(out[0], back).is_ok());
      CHECK_MESSAGE(same_result(back, want), "device input, run ", i);
      tern_tensor_destroy(dev);
      tern_tensor_destroy(host);
    }
    // A new thread's first run with graphs on (its library handles are made then, which a capture
    // must not do), on a plan that already captures.
    const Tensor x = random_f32({3, 64}, 120);
    const Tensor want = run_on(*eager, {&x})[0];
    std::thread t([&] {
      const Tensor got = run_on(*graphs, {&x})[0];
      CHECK(same_result(got, want));
    });
    t.join();
  }

  TEST_CASE("many threads on one session match a serial run, with and without cuda.graphs") {
    SKIP_WITHOUT_CUDA();
    const GraphMaker m = mixed_model();
    for (int64_t graphs : {0, 1}) {
      auto s = make_session(m, {"cuda"},
                            {{FlagId::kCudaGraphs, graphs}, {FlagId::kCudnnDeterministic, 1}});
      std::vector<Tensor> inputs, want;
      for (unsigned i = 0; i < 8; ++i) {
        inputs.push_back(random_f32({2 + i % 3, 64}, 130 + i));
        want.push_back(run_on(*s, {&inputs.back()})[0]);
      }
      std::atomic<int> mismatches{0}, failures{0};
      std::vector<std::thread> threads;
      for (size_t t = 0; t < 8; ++t) {
        threads.emplace_back([&, t] {
          for (int r = 0; r < 50; ++r) {
            const size_t i = (t + static_cast<size_t>(r)) % inputs.size();
            std::vector<Tensor> out;
            const Status st =
                s->run({"x0"}, {&inputs[i]}, {s->graph().value_name(s->graph().outputs[0])}, &out);
            if (!st.is_ok()) {
              ++failures;
            } else if (!same_result(out[0], want[i])) {
              ++mismatches;
            }
          }
        });
      }
      for (std::thread& t : threads) t.join();
      CHECK_MESSAGE(failures.load() == 0, "graphs ", graphs);
      CHECK_MESSAGE(mismatches.load() == 0, "graphs ", graphs);
    }
  }

  TEST_CASE("runs keep the caller's current device; cuda:1 runs on device 1") {
    SKIP_WITHOUT_CUDA();
    const CudaModule* mod = loaded_module();
    REQUIRE(mod);
    const GraphMaker m = mixed_model();
    const Tensor x = random_f32({2, 64}, 140);
    const Tensor want = run_graph(m.g, {x}, {"cpu"}, kNoTf32)[0];
    const int before = mod->current_device();
    auto s0 = make_session(m, {"cuda"}, kNoTf32);
    check_close(run_on(*s0, {&x})[0], want, "cuda:0", 1e-4, 1e-4);
    CHECK(mod->current_device() == before);
    if (mod->device_count() < 2) {
      MESSAGE("one CUDA device: the cuda:1 part is not run");
      return;
    }
    const CudaMemoryStats d0 = mod->memory_stats(0), d1 = mod->memory_stats(1);
    auto s1 = make_session(m, {"cuda:1"}, kNoTf32);
    check_close(run_on(*s1, {&x})[0], want, "cuda:1", 1e-4, 1e-4);
    CHECK(mod->current_device() == before);  // the run made device 1 current and gave it back
    CHECK(mod->memory_stats(1).device_allocs > d1.device_allocs);
    CHECK(mod->memory_stats(0).in_use == d0.in_use);  // nothing of that session on device 0
  }

  TEST_CASE("model constants are uploaded once per session, whatever the plans") {
    SKIP_WITHOUT_CUDA();
    const CudaModule* mod = loaded_module();
    REQUIRE(mod);
    // x [n, 2048] x W [2048, 2048] (16 MiB): one plan per n.
    GraphMaker m;
    const int x =
        m.g.add_value("x0", ValueType{DType::kFloat32, true, {Dim{-1, "n"}, Dim{2048, ""}}});
    m.g.inputs = {x};
    m.g.outputs = {m.node("MatMul", {x, m.constant("w", random_f32({2048, 2048}, 150))})};
    auto s = make_session(m, {"cuda"});
    const uint64_t before = mod->memory_stats(0).in_use;
    uint64_t arenas = 0;
    for (int64_t n : {1, 2, 3, 4}) {
      const Tensor in = random_f32({n, 2048}, 151);
      CHECK(run_on(*s, {&in})[0].shape() == Shape{n, 2048});
      arenas += s->last_plan()->device_layout.bytes;
    }
    CHECK(s->device_constant_count() == 1);
    // What the session holds on the device: one copy of W and each plan's pooled arena (each
    // rounded up to the allocator's 2 MiB granule). A copy of W per plan would add 48 MiB.
    const uint64_t w = uint64_t{16} << 20, granule = uint64_t{2} << 20;
    const uint64_t grown = mod->memory_stats(0).in_use - before;
    CHECK(grown >= w);
    CHECK(grown <= w + arenas + 5 * granule);
  }

  TEST_CASE("device out of memory is TERN_ERR_OUT_OF_MEMORY and nothing else breaks") {
    SKIP_WITHOUT_CUDA();
    tern_tensor* t = nullptr;
    const int64_t huge[] = {int64_t{1} << 40};  // 4 TiB of float32
    CHECK(tern_tensor_create_on_device(TERN_FLOAT32, huge, 1, "cuda", &t) ==
          TERN_ERR_OUT_OF_MEMORY);
    CHECK(std::string(tern_last_error()).find("cannot allocate") != std::string::npos);
    // The device still works afterwards.
    const GraphMaker m = mixed_model();
    const Tensor x = random_f32({1, 64}, 160);
    check_close(run_graph(m.g, {x}, {"cuda"}, kNoTf32)[0], run_graph(m.g, {x}, {"cpu"})[0],
                "after an OOM", 1e-4, 1e-4);
  }

  TEST_CASE("cancel and deadline: a long CUDA run stops within two paced chunks; it goes on") {
    SKIP_WITHOUT_CUDA();
    // A MatMul -> Tanh chain on [2048, 2048], deep enough for a run of >= 200 ms on this device
    // (hundreds of steps on an H200; a smaller matrix would need tens of thousands). The host
    // queues kernels far faster than the device runs them: without pacing, a cancel would wait
    // for the whole queued run.
    constexpr int64_t n = 2048;
    const LongChain chain =
        long_chain(n, 64, 65536, [](tern_model* model) { return cuda_c_session(model, false); });
    tern_model* m = chain.model;
    tern_session* s = chain.session;
    const int depth = chain.depth;
    const double whole_ms = chain.whole_ms;
    const std::vector<float>& before = chain.outputs;
    MESSAGE("chain of ", depth, " MatMul -> Tanh on [", n, ", ", n, "]: a run takes ", whole_ms,
            " ms");
    const uint64_t in_use = loaded_module()->memory_stats(0).in_use;
    check_cancels_at_random_points(s, n, whole_ms, 8);
    check_deadline_50ms(s, n, whole_ms);
    // The same outputs after the stopped runs, and no device memory kept by them.
    std::vector<float> after;
    REQUIRE(run_chain(s, nullptr, n, &after) == TERN_OK);
    CHECK(after == before);
    CHECK(loaded_module()->memory_stats(0).in_use == in_use);
    tern_session_destroy(s);
    // With cuda.graphs a captured stretch replays whole: a cancel still ends the run with
    // CANCELLED (or it finishes first) and the session goes on.
    s = cuda_c_session(m, /*graphs=*/true);
    for (int i = 0; i < 2; ++i) REQUIRE(run_chain(s, nullptr, n) == TERN_OK);  // captured
    tern_run_options* r = nullptr;
    REQUIRE(tern_run_options_create(&r) == TERN_OK);
    double latency = 0;
    const tern_status st = cancel_during(
        r, static_cast<int>(whole_ms / 4), [&] { return run_chain(s, r, n); }, &latency);
    CHECK((st == TERN_ERR_CANCELLED || st == TERN_OK));
    tern_run_options_destroy(r);
    std::vector<float> graphed;
    REQUIRE(run_chain(s, nullptr, n, &graphed) == TERN_OK);
    const Comparison c = compare(graphed.data(), before.data(), before.size(), 1e-4, 1e-5);
    CHECK_MESSAGE(c.mismatches == 0, "max abs ", c.max_abs);
    tern_session_destroy(s);
    tern_model_destroy(m);
  }

  TEST_CASE("the module answers: devices, cuDNN, the SDPA refusals with a device") {
    SKIP_WITHOUT_CUDA();
    const CudaModule* mod = loaded_module();
    REQUIRE(mod);
    CHECK(mod->device_count() == tern_cuda_device_count());
    CHECK(tern_cudnn_version() > 0);
    CHECK(tern_cudnn_is_available() == 1);
    CHECK(backends::record("cuda")->report().find("cuda:0 ") != std::string::npos);
    tern_sdp_params p{sizeof(tern_sdp_params), 1, 4, 128, 128, 64, TERN_FLOAT32, 0, 0, 0.0f};
    char why[256];
    CHECK(tern_sdp_can_use(TERN_SDP_FLASH, &p, why, sizeof why) == 1);
    CHECK(tern_sdp_can_use(TERN_SDP_MEM_EFFICIENT, &p, why, sizeof why) == 1);
    p.head_dim = 200;
    CHECK(tern_sdp_can_use(TERN_SDP_FLASH, &p, why, sizeof why) == 0);
    CHECK(std::string(why).find("head_dim 200 > 128") != std::string::npos);
  }
}
