// The harness of the cpu_kernels suites: one op's context shape-inferred over given tensors,
// the CPU backend's kernel for it (or the op's reference kernel) run on them, blocked layouts
// converted, outputs compared.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "backends_util.h"
#include "c_api.h"
#include "core/kernel_registry.h"
#include "core/op_registry.h"
#include "ops/conv.h"
#include "ops/fused_conv.h"
#include "test_util.h"

namespace tern_test::cpu_kernels {

using namespace tern;

// Infers shapes, prepares the CPU kernel (constant inputs marked known), runs it.
struct Prepared {
  std::string kernel;
  std::vector<Tensor> outputs;
};
// One op's context over `ins` (those marked constant known), shape-inferred.
struct Inferred {
  Node node;
  OpContext ctx;
};
inline std::unique_ptr<Inferred> inferred(const std::string& op, const Attributes& attrs,
                                          const std::vector<Tensor*>& ins,
                                          const std::vector<bool>& constant, int in_block = 0) {
  auto k = std::make_unique<Inferred>();
  k->node = Node{"k", op, "", {}, {0}, attrs};
  OpContext& ctx = k->ctx;
  ctx.node = &k->node;
  ctx.where = "node 'k' (" + op + ")";
  ctx.opset = 13;
  for (size_t i = 0; i < ins.size(); ++i) {
    ctx.inputs.push_back(TensorInfo{ins[i] != nullptr, ins[i] ? ins[i]->dtype() : DType::kUndefined,
                                    ins[i] ? ins[i]->shape() : Shape{},
                                    ins[i] && constant[i] ? ins[i] : nullptr});
    ctx.input_names.push_back("in" + std::to_string(i));
  }
  if (!ctx.inputs.empty()) ctx.inputs[0].block = in_block;
  ctx.outputs.assign(1, TensorInfo{true, DType::kUndefined, {}, nullptr});
  Status s = infer_node(*OpRegistry::global().find(op), ctx);
  REQUIRE_MESSAGE(s.is_ok(), s.message());
  return k;
}

// Runs a prepared kernel on `ins` into a fresh output of the context's type and shape.
inline Tensor run_kernel(const Kernel& kernel, const OpContext& ctx,
                         const std::vector<Tensor*>& ins, int threads) {
  Tensor out = Tensor::allocate(ctx.outputs[0].dtype, ctx.outputs[0].shape).value();
  KernelArgs args;
  for (Tensor* t : ins) args.inputs.push_back(t);
  args.outputs.push_back(&out);
  // The workspace as the arena gives it: 64-byte aligned (panel-packed operands are read with
  // aligned loads).
  const int64_t ws =
      static_cast<int64_t>((kernel.workspace_bytes() + sizeof(float) - 1) / sizeof(float));
  Tensor workspace = Tensor::allocate(DType::kFloat32, {std::max<int64_t>(ws, 1)}).value();
  args.workspace = workspace.raw();
  const Status s = kernel.run(args, ExecContext{threads});
  REQUIRE_MESSAGE(s.is_ok(), s.message());
  return out;
}

inline Prepared run_cpu(const std::string& op, const Attributes& attrs,
                        const std::vector<Tensor*>& ins, const std::vector<bool>& constant,
                        int in_block = 0, int out_block = 0, int threads = 2) {
  auto k = inferred(op, attrs, ins, constant, in_block);
  k->ctx.outputs[0].block = out_block;
  auto kernel = backends::get("cpu").value()->prepare(k->ctx);
  REQUIRE_MESSAGE(kernel.has_value(), kernel.status().message());
  Prepared p;
  p.kernel = (*kernel)->name();
  p.outputs.push_back(run_kernel(**kernel, k->ctx, ins, threads));
  return p;
}

// The CPU backend's kernel for ctx whose name starts with `prefix` (Tern's int8 kernels sit
// below oneDNN's: asked for by name so x86 builds with oneDNN test them too).
inline std::unique_ptr<Kernel> kernel_named(const OpContext& ctx, const std::string& prefix) {
  REQUIRE(backends::get("cpu").has_value());  // registers the CPU kernels
  for (KernelFactory f :
       KernelRegistry::global().find(ctx.node->op_type, "cpu", ctx.inputs[0].dtype)) {
    auto k = f(ctx);
    if (k.has_value() && std::string((*k)->name()).rfind(prefix, 0) == 0) return std::move(*k);
  }
  FAIL("no kernel named ", prefix, "* for ", ctx.node->op_type);
  return nullptr;
}

// NCHW <-> channels blocked by b (nChw{b}c, channels a multiple of b; b = C is NHWC).
inline Tensor to_blocked(const Tensor& x, int64_t b) {
  const Shape& d = x.shape();
  Tensor y = Tensor::allocate(DType::kFloat32, d).value();
  const int64_t hw = d[2] * d[3], cb = d[1] / b;
  for (int64_t n = 0; n < d[0]; ++n)
    for (int64_t c = 0; c < d[1]; ++c)
      for (int64_t i = 0; i < hw; ++i) {
        y.data<float>()[((n * cb + c / b) * hw + i) * b + c % b] =
            x.data<float>()[(n * d[1] + c) * hw + i];
      }
  return y;
}
// The logical NCHW values of an nChw{b}c tensor (channels padded to a multiple of b).
inline std::vector<float> from_blocked(const Tensor& y, int64_t b) {
  const Shape& d = y.shape();
  std::vector<float> out(static_cast<size_t>(y.numel()));
  const int64_t hw = d[2] * d[3], cb = (d[1] + b - 1) / b;
  for (int64_t n = 0; n < d[0]; ++n)
    for (int64_t c = 0; c < d[1]; ++c)
      for (int64_t i = 0; i < hw; ++i) {
        out[static_cast<size_t>((n * d[1] + c) * hw + i)] =
            y.data<float>()[((n * cb + c / b) * hw + i) * b + c % b];
      }
  return out;
}

// The logical NC... values of y (shape [N, C', ...], C' the channels `oc` padded to whole blocks)
// in layout `block`: 0 plain, channels-last when it equals oc, else channel blocks of `block`;
// `padding_nonzero` counts padding channels that are not 0.
inline std::vector<float> from_layout(const Tensor& y, int64_t block, int64_t oc,
                                      int64_t* padding_nonzero) {
  const Shape& d = y.shape();
  const int64_t n = d[0], cp = d[1];
  int64_t pixels = 1;
  for (size_t i = 2; i < d.size(); ++i) pixels *= d[i];
  const float* v = y.data<float>();
  std::vector<float> out(static_cast<size_t>(n * oc * pixels));
  *padding_nonzero = 0;
  const int64_t b = block == 0 ? 1 : block;  // plain: blocks of one channel
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < cp; ++k)
      for (int64_t p = 0; p < pixels; ++p) {
        const float got = v[((i * (cp / b) + k / b) * pixels + p) * b + k % b];
        if (k < oc) {
          out[static_cast<size_t>((i * oc + k) * pixels + p)] = got;
        } else if (got != 0.0f) {
          ++*padding_nonzero;
        }
      }
  return out;
}
// x (NC..., any rank) in channel blocks of b, the channels padded to whole blocks with zeros: the
// shape [N, C', ...], C' the padded channels.
inline Tensor to_layout(const Tensor& x, int64_t b) {
  Shape d = x.shape();
  const int64_t n = d[0], c = d[1], cp = (c + b - 1) / b * b;
  int64_t pixels = 1;
  for (size_t i = 2; i < d.size(); ++i) pixels *= d[i];
  d[1] = cp;
  Tensor y = Tensor::allocate(DType::kFloat32, d).value();
  std::fill_n(y.data<float>(), y.numel(), 0.0f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t p = 0; p < pixels; ++p) {
        y.data<float>()[((i * (cp / b) + k / b) * pixels + p) * b + k % b] =
            x.data<float>()[(i * c + k) * pixels + p];
      }
  return y;
}

// fp32 kernels reassociate sums; the references accumulate in double. Over K <= ~600 terms of
// magnitude <= 1 the float error stays far below 1e-4 absolute.
inline void check_close(const Tensor& got, const std::vector<float>& want,
                        const std::string& what) {
  Comparison c = compare(got.data<float>(), want.data(), want.size(), 1e-4, 1e-4);
  INFO(what, ": max abs ", c.max_abs);
  CHECK(c.mismatches == 0);
}

// Context for calling an op's parse function directly (for the reference kernels).
struct RefContext {
  Node node;
  OpContext ctx;
  RefContext(const std::string& op, const Attributes& attrs, const std::vector<const Tensor*>& ins)
      : node{"k", op, "", {}, {0}, attrs} {
    ctx.node = &node;
    for (size_t i = 0; i < ins.size(); ++i) {
      ctx.inputs.push_back(TensorInfo{true, DType::kFloat32, ins[i]->shape(), nullptr});
      ctx.input_names.push_back("in" + std::to_string(i));
    }
  }
};

// Runs op's portable reference kernel (the ground truth) on `ins`; returns its output.
inline Tensor run_reference(const std::string& op, const Attributes& attrs,
                            const std::vector<Tensor*>& ins, std::vector<bool> constant = {}) {
  constant.resize(ins.size(), false);
  auto k = inferred(op, attrs, ins, constant);
  auto kernel = OpRegistry::global().find(op)->reference(k->ctx);
  REQUIRE_MESSAGE(kernel.has_value(), kernel.status().message());
  return run_kernel(**kernel, k->ctx, ins, 1);
}

// Randomised trials of the panel-GEMM kernels (AVX2 or AVX-512): `cap` the CPU's capability, or
// "" on a CPU without AVX2 (the test skips, saying so); `pick` draws from a generator whose seed
// the test logs.
struct PanelTrials {
  std::string cap;
  // TERN_TEST_SEED replays a logged seed.
  unsigned seed =
      std::getenv("TERN_TEST_SEED")
          ? static_cast<unsigned>(std::strtoul(std::getenv("TERN_TEST_SEED"), nullptr, 10))
          : std::random_device{}();
  std::mt19937 rng{seed};
  PanelTrials() {
    cap = tern_cpu_get_capability();
    if (cap != "AVX512" && cap != "AVX2") {
      MESSAGE("skipped: the CPU lacks AVX2");
      cap.clear();
    }
  }
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
  // fn(isa) for AVX512 (where the CPU has it) and AVX2, each set as cpu.max_capability meanwhile.
  template <class Fn>
  void each_isa(Fn&& fn) {
    for (const char* isa : {"AVX512", "AVX2"}) {
      if (cap == "AVX2" && std::string(isa) == "AVX512") continue;
      FlagRestore restore;
      REQUIRE(tern_flag_set("cpu.max_capability", isa) == TERN_OK);
      fn(isa);
    }
  }
};

// Runs `kernel` on `args` (its output set) at two threads and at one, each time on a workspace
// as the arena gives it (64-byte aligned, holding NaN from before, so that a value the kernel
// leaves unwritten shows; made into `workspace`, which args then point to); checks the two
// outputs are bitwise equal (results independent of the thread count) and returns the first.
inline std::vector<float> run_at_two_and_one(const Kernel& kernel, KernelArgs& args,
                                             Tensor* workspace) {
  const int64_t ws_floats = static_cast<int64_t>(kernel.workspace_bytes() / 4) + 1;
  *workspace = Tensor::allocate(DType::kFloat32, {ws_floats}).value();
  args.workspace = workspace->raw();
  auto poison = [&] {
    std::fill_n(workspace->data<float>(), ws_floats, std::numeric_limits<float>::quiet_NaN());
  };
  Tensor& y = *args.outputs[0];
  poison();
  REQUIRE(kernel.run(args, ExecContext{2}).is_ok());
  const std::vector<float> two(y.data<float>(), y.data<float>() + y.numel());
  poison();
  REQUIRE(kernel.run(args, ExecContext{1}).is_ok());
  CHECK(std::memcmp(two.data(), y.raw(), two.size() * 4) == 0);
  return two;
}

// FusedConv epilogues for the kernels' trials: (activations, activation_params), every step
// (with exponentials and without) alone or in chains.
using Epilogue = std::pair<std::vector<std::string>, std::vector<float>>;
inline const std::vector<Epilogue>& fused_epilogues() {
  static const std::vector<Epilogue> e = {{{}, {}},
                                          {{"Relu"}, {}},
                                          {{"Clip"}, {0.0f, 6.0f}},
                                          {{"Affine", "HardSwish"}, {1.5f, -0.25f}},
                                          {{"Sigmoid"}, {}},
                                          {{"Relu", "Affine"}, {2.0f, 0.5f}},
                                          {{"LeakyRelu"}, {0.1f}},
                                          {{"HardSigmoid"}, {0.2f, 0.5f}},
                                          {{"Tanh"}, {}},
                                          {{"Swish"}, {1.0f}},
                                          {{"Affine", "Swish", "Relu"}, {0.5f, 0.25f, 1.702f}}};
  return e;
}

// A FusedConv over `ins` = x, w, b[, z] (w and b constant; b null: absent) with x in layout
// `x_block` and the output and z in `out_block`, shape-inferred; `flags` null: the global values.
struct FusedConvContext {
  Node node;
  OpContext ctx;
};
inline std::unique_ptr<FusedConvContext> fused_conv_context(const Attributes& attrs,
                                                            const std::vector<Tensor*>& ins,
                                                            int x_block, int out_block,
                                                            const FlagValues* flags = nullptr) {
  auto f = std::make_unique<FusedConvContext>();
  f->node = Node{"k", "FusedConv", "", {}, {0}, attrs};
  OpContext& ctx = f->ctx;
  ctx.node = &f->node;
  ctx.where = "node 'k' (FusedConv)";
  ctx.opset = 13;
  ctx.flags = flags;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (!ins[i]) {  // an optional input left out (no bias before a residual)
      ctx.inputs.push_back(TensorInfo{false, DType::kUndefined, {}, nullptr});
      ctx.input_names.push_back("");
      continue;
    }
    ctx.inputs.push_back(
        TensorInfo{true, DType::kFloat32, ins[i]->shape(), i == 1 || i == 2 ? ins[i] : nullptr});
    ctx.inputs.back().block = i == 0 ? x_block : i == 3 ? out_block : 0;
    ctx.input_names.push_back("in" + std::to_string(i));
  }
  ctx.outputs.assign(1, TensorInfo{true, DType::kUndefined, {}, nullptr});
  REQUIRE(infer_node(*OpRegistry::global().find("FusedConv"), ctx).is_ok());
  ctx.outputs[0].block = out_block;
  return f;
}

// What ctx's FusedConv computes on NCHW x, w, b and z (null: no residual): the reference
// convolution + bias (+ z), then ctx's epilogue.
inline std::vector<float> fused_conv_reference(const OpContext& ctx, const Tensor& x,
                                               const Tensor& w, const Tensor& b, const Tensor* z) {
  Attributes conv;  // the convolution's own attributes
  for (const auto& kv : ctx.attrs().all()) {
    if (kv.first != "activations" && kv.first != "activation_params") conv.set(kv.first, kv.second);
  }
  RefContext ref_ctx("Conv", conv, {&x, &w, &b});
  auto cp = ops::parse_conv(ref_ctx.ctx).value();
  std::vector<float> ref(static_cast<size_t>(numel(cp.y)));
  ops::conv_reference(cp, x.data<float>(), w.data<float>(), b.data<float>(), ref.data());
  if (z) {
    for (size_t i = 0; i < ref.size(); ++i) ref[i] += z->data<float>()[i];
  }
  ops::apply_epilogue(ops::parse_fused_conv(ctx).value().epilogue, ref.data(),
                      static_cast<int64_t>(ref.size()));
  return ref;
}

// A second kernel for ctx finds `first`'s packed weights (input 1) where a saved optimized model
// carries them, uses them in place (no packed bytes of its own) and writes `want` to args' output.
inline void check_packed_weights_reused(const Kernel& first, OpContext& ctx, const KernelArgs& args,
                                        const std::vector<float>& want) {
  std::vector<Kernel::PackedWeight> packed = first.packed_weights();
  REQUIRE(packed.size() == 1);
  std::vector<PackedData> carried = {packed[0].packed};
  ctx.inputs[1].packed = &carried;
  auto again = backends::get("cpu").value()->prepare(ctx);
  ctx.inputs[1].packed = nullptr;
  REQUIRE(again.has_value());
  CHECK((*again)->packed_bytes() == 0);
  REQUIRE((*again)->run(args, ExecContext{2}).is_ok());
  CHECK(std::memcmp(want.data(), args.outputs[0]->raw(), want.size() * sizeof(float)) == 0);
}

}  // namespace tern_test::cpu_kernels
