// One op-test harness for the device backends (STYLE.md 5): a node or a small graph runs once in a
// session whose only backend is the device (so every node must have a kernel there) and once on
// the CPU, and every output must match within a tolerance. The Vulkan and CUDA suites use it.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/half.h"
#include "graph_builder.h"
#include "test_util.h"

namespace tern_test {

using FlagList = std::vector<std::pair<tern::FlagId, int64_t>>;

// Ends the test case with a message "<prefix><why>" when `why_expr` (why the device cannot be used,
// "" when it can) is not empty.
#define TERN_SKIP_UNLESS_USABLE(prefix, why_expr) \
  do {                                            \
    const std::string why_ = (why_expr);          \
    if (!why_.empty()) {                          \
      MESSAGE((std::string(prefix) + why_));      \
      return;                                     \
    }                                             \
  } while (0)

inline tern::Attributes attrs(std::initializer_list<std::pair<const char*, tern::Attribute>> list) {
  tern::Attributes a;
  for (const auto& [k, v] : list) a.set(k, v);
  return a;
}

inline tern::Tensor to_f16(const tern::Tensor& f) {
  tern::Tensor t = tern::Tensor::allocate(tern::DType::kFloat16, f.shape()).value();
  for (int64_t i = 0; i < f.numel(); ++i) {
    t.data<uint16_t>()[i] = tern::float_to_half(f.data<float>()[i]);
  }
  return t;
}

inline std::vector<float> as_floats(const tern::Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    v[static_cast<size_t>(i)] = static_cast<float>(t.float_at(i));
  }
  return v;
}

// Operand shapes of the binary-op cases: same shape, trailing vector, middle broadcast, outer
// product, scalar-like.
inline std::vector<std::pair<tern::Shape, tern::Shape>> broadcast_cases() {
  return {{{2, 3, 4, 5}, {2, 3, 4, 5}},
          {{2, 3, 4, 5}, {5}},
          {{2, 3, 4, 5}, {3, 1, 5}},
          {{4, 1}, {1, 6}},
          {{7}, {1}}};
}

// The activations with attributes or extra inputs, on x, and the ops defined for positive inputs,
// on pos: named cases each device suite runs.
inline std::vector<std::pair<std::string, SingleOp>> activation_cases(const tern::Tensor& x,
                                                                      const tern::Tensor& pos) {
  std::vector<std::pair<std::string, SingleOp>> cases;
  for (const char* op : {"Sqrt", "Log", "Reciprocal"})
    cases.push_back({op, SingleOp{op, {}, {pos}, {}}});
  cases.push_back(
      {"LeakyRelu", SingleOp{"LeakyRelu", attrs({{"alpha", attr_float(0.3f)}}), {x}, {}}});
  cases.push_back({"Elu", SingleOp{"Elu", attrs({{"alpha", attr_float(0.7f)}}), {x}, {}}});
  cases.push_back({"Selu", SingleOp{"Selu", {}, {x}, {}}});
  cases.push_back(
      {"HardSigmoid", SingleOp{"HardSigmoid", attrs({{"alpha", attr_float(0.25f)}}), {x}, {}}});
  SingleOp gelu{"Gelu", {}, {x}, {}};
  gelu.opset = 20;
  cases.push_back({"Gelu", gelu});
  cases.push_back(
      {"Clip", SingleOp{"Clip", {}, {x}, {make_f32({}, {-1.5f}), make_f32({}, {2.5f})}}});
  return cases;
}

// Casts between float32, int32 and int64, values past 32 bits and fractions of both signs among
// them.
inline std::vector<std::pair<std::string, SingleOp>> integer_cast_cases() {
  auto cast = [](int64_t to, tern::Tensor x) {
    return SingleOp{"Cast", attrs({{"to", attr_int(to)}}), {std::move(x)}, {}};
  };
  const tern::Tensor i64 =
      make_i64({8}, {0, 1, -1, 123456, -7000000000LL, 5000000000LL, 1LL << 40, -(1LL << 31)});
  return {{"int64->float32", cast(1, i64)},
          {"int64->int32", cast(6, make_i64({3}, {5, -5, 70000}))},
          {"float32->int64", cast(7, make_f32({6}, {0.5f, -0.5f, -2.7f, 3.9f, 1e6f, -3e9f}))},
          {"float32->int32", cast(6, make_f32({3}, {1.5f, -9.9f, 7}))}};
}

// Both results of one op: every output's dtype, shape and values within tolerance.
inline void compare_outputs(const std::vector<tern::Tensor>& dev,
                            const std::vector<tern::Tensor>& cpu, const std::string& what,
                            double rtol, double atol) {
  REQUIRE(dev.size() == cpu.size());
  for (size_t o = 0; o < dev.size(); ++o) {
    CHECK_MESSAGE(dev[o].dtype() == cpu[o].dtype(), what);
    CHECK_MESSAGE(dev[o].shape() == cpu[o].shape(), what);
    if (dev[o].shape() != cpu[o].shape()) continue;
    const std::vector<float> a = as_floats(dev[o]), b = as_floats(cpu[o]);
    Comparison c = compare(a.data(), b.data(), a.size(), rtol, atol);
    CHECK_MESSAGE(c.mismatches == 0, what, ": ", c.mismatches, " of ", a.size(),
                  " differ, max abs err ", c.max_abs, ", max rel err ", c.max_rel);
  }
}

// `op` on the CPU, then on `device` alone (with `device_flags` too).
inline void check_op_on(const std::string& device, SingleOp op, const std::string& what,
                        double rtol, double atol, const FlagList& device_flags = {}) {
  auto cpu = op.run();
  REQUIRE_MESSAGE(cpu.has_value(), what, ": cpu: ", cpu.status().message());
  op.backends = {device};
  op.flags.insert(op.flags.end(), device_flags.begin(), device_flags.end());
  auto dev = op.run();
  REQUIRE_MESSAGE(dev.has_value(), what, ": ", device, ": ", dev.status().message());
  compare_outputs(*dev, *cpu, what, rtol, atol);
}

// BatchNormalization, and FusedBatchNormalization (its Relu fused: a CPU session's optimized
// graph, saved and run on the device), on `device` against the CPU; `seed` draws the tensors.
inline void check_batch_norms_on(const std::string& device, unsigned seed,
                                 const FlagList& device_flags = {}) {
  std::mt19937 rng(seed);
  tern::Tensor var = random_f32({5}, rng);
  for (int64_t c = 0; c < 5; ++c) var.data<float>()[c] = std::abs(var.data<float>()[c]) + 0.5f;
  const tern::Tensor x = random_f32({2, 5, 6, 7}, rng), scale = random_f32({5}, rng),
                     bias = random_f32({5}, rng), mean = random_f32({5}, rng);
  for (const char* op : {"BatchNormalization", "FusedBatchNormalization"}) {
    const tern::Attributes a = std::string(op) == "BatchNormalization"
                                   ? tern::Attributes{}
                                   : attrs({{"activations", attr_strings({"Relu"})}});
    check_op_on(device, SingleOp{op, a, {x}, {scale, bias, mean, var}}, op, 1e-4, 1e-5,
                device_flags);
  }
}

// Gather with run-time indices outside the axis on `device` (with `flags`): the run fails with
// INVALID_ARGUMENT, as on the CPU (a device reports them through its error word), and the next run
// with good indices succeeds (the word is cleared).
inline void check_gather_out_of_range(const std::string& device, const FlagList& flags = {}) {
  tern::Tensor table = tern::Tensor::allocate(tern::DType::kFloat32, {10, 6}).value();
  for (int64_t i = 0; i < table.numel(); ++i) table.data<float>()[i] = static_cast<float>(i);
  tern::Tensor i32 = tern::Tensor::allocate(tern::DType::kInt32, {2}).value();
  i32.data<int32_t>()[0] = 1, i32.data<int32_t>()[1] = -11;
  const std::vector<std::pair<std::string, tern::Tensor>> bad = {
      {"int64 index 10 of a dim of 10", make_i64({2, 2}, {0, 3, 10, 1})},
      {"int32 index -11", i32},
      {"int64 index past 32 bits", make_i64({2}, {2, 4294967298LL})},
      {"int64 index -2^32 + 1", make_i64({1}, {-4294967295LL})}};
  for (const auto& entry : bad) {
    const std::string& what = entry.first;  // not a structured binding: CAPTURE is a lambda
    const tern::Tensor& idx = entry.second;
    CAPTURE(what);
    SingleOp op{"Gather", {}, {table, idx}, {}};
    const auto cpu = op.run();
    CHECK(cpu.status().code() == tern::Code::kInvalidArgument);
    op.backends = {device};
    op.flags = flags;
    const auto dev = op.run();
    REQUIRE_FALSE(dev.has_value());
    CHECK(dev.status().code() == tern::Code::kInvalidArgument);
    CHECK(dev.status().message().find("out of range") != std::string::npos);
    check_op_on(device, SingleOp{"Gather", {}, {table, make_i64({3}, {9, -10, 0})}, {}},
                "Gather after an out-of-range run", 0, 0, flags);
  }
}

// A graph with runtime inputs "x0".. run on `backends`.
inline std::vector<tern::Tensor> run_graph(tern::Graph g, const std::vector<tern::Tensor>& inputs,
                                           const std::vector<std::string>& backends,
                                           const FlagList& flags = {}) {
  g.opset = 13;
  std::vector<std::string> names;
  std::vector<const tern::Tensor*> ins;
  for (size_t i = 0; i < inputs.size(); ++i) {
    names.push_back("x" + std::to_string(i));
    ins.push_back(&inputs[i]);
  }
  std::vector<std::string> outs;
  for (int id : g.outputs) outs.push_back(g.values[static_cast<size_t>(id)].name);
  auto model = tern::Model::create(std::move(g), nullptr, "backend_compare").value();
  tern::SessionConfig cfg;
  for (const std::string& b : backends) cfg.backends.push_back(tern::backends::get(b).value());
  for (const auto& [id, v] : flags) cfg.overrides.set(id, v);
  auto session = tern::Session::create(model, cfg);
  REQUIRE_MESSAGE(session.has_value(), session.status().message());
  std::vector<tern::Tensor> result;
  const tern::Status st = (*session)->run(names, ins, outs, &result);
  REQUIRE_MESSAGE(st.is_ok(), st.message());
  return result;
}

// Graph inputs x0.. of the given tensors' types.
inline std::vector<int> add_inputs(GraphMaker& m, const std::vector<tern::Tensor>& inputs) {
  std::vector<int> ids;
  for (size_t i = 0; i < inputs.size(); ++i) {
    tern::ValueType type{inputs[i].dtype(), true, {}};
    for (int64_t d : inputs[i].shape()) type.dims.push_back(tern::Dim{d, ""});
    const int id = m.g.add_value("x" + std::to_string(i), type);
    m.g.inputs.push_back(id);
    ids.push_back(id);
  }
  return ids;
}

// The graph on the CPU, then on `device` alone (with `flags`).
inline void check_graph_on(const std::string& device, const GraphMaker& m,
                           const std::vector<tern::Tensor>& inputs, const std::string& what,
                           const FlagList& flags, double rtol, double atol) {
  const auto cpu = run_graph(m.g, inputs, {"cpu"});
  const auto dev = run_graph(m.g, inputs, {device}, flags);
  compare_outputs(dev, cpu, what, rtol, atol);
}

}  // namespace tern_test
