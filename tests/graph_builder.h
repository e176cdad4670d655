// Builds small graphs in code for op and session tests.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "core/half.h"
#include "core/session.h"

namespace tern_test {

inline tern::Tensor make_f32(tern::Shape shape, std::vector<float> v) {
  tern::Tensor t = tern::Tensor::allocate(tern::DType::kFloat32, std::move(shape)).value();
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}
inline tern::Tensor make_i64(tern::Shape shape, std::vector<int64_t> v) {
  tern::Tensor t = tern::Tensor::allocate(tern::DType::kInt64, std::move(shape)).value();
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}
// y = Relu(x) over a [2] tensor of `dt`, opset 13: the smallest model of a given element type.
inline tern::Graph relu_graph(tern::DType dt) {
  tern::Graph g;
  g.opset = 13;
  const int x = g.add_value("x", tern::ValueType{dt, true, {tern::Dim{2, ""}}});
  const int y = g.add_value("y", tern::ValueType{dt, true, {tern::Dim{2, ""}}});
  g.nodes.push_back(tern::Node{"relu", "Relu", "", {x}, {y}, {}});
  g.inputs = {x};
  g.outputs = {y};
  return g;
}
// A float32 tensor rounded to float16 or bfloat16 (`dt`), and a half tensor widened to float32.
inline tern::Tensor to_half_type(const tern::Tensor& t, tern::DType dt) {
  tern::Tensor h = tern::Tensor::allocate(dt, t.shape()).value();
  auto* p = static_cast<uint16_t*>(h.raw());
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float f = t.data<float>()[i];
    p[i] = dt == tern::DType::kFloat16 ? tern::float_to_half(f) : tern::float_to_bfloat16(f);
  }
  return h;
}
inline tern::Tensor widen_half_type(const tern::Tensor& h) {
  tern::Tensor t = tern::Tensor::allocate(tern::DType::kFloat32, h.shape()).value();
  const auto* p = static_cast<const uint16_t*>(h.raw());
  for (int64_t i = 0; i < h.numel(); ++i) {
    t.data<float>()[i] = h.dtype() == tern::DType::kFloat16 ? tern::half_to_float(p[i])
                                                            : tern::bfloat16_to_float(p[i]);
  }
  return t;
}
inline std::vector<float> values_f32(const tern::Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

// One node: `runtime` inputs are graph inputs fed at run time, `constants` follow as initializers
// (nullopt entries give omitted optional inputs).
struct SingleOp {
  std::string op;
  tern::Attributes attrs;
  std::vector<tern::Tensor> runtime;
  std::vector<std::optional<tern::Tensor>> constants;
  int64_t opset = 13;
  int outputs = 1;
  std::vector<std::string> backends = {"cpu"};  // the session's backend list
  std::vector<std::pair<tern::FlagId, int64_t>> flags = {};

  tern::Expected<std::vector<tern::Tensor>> run() const {
    tern::Graph g;
    g.opset = opset;
    tern::Node n;
    n.op_type = op;
    n.name = "n0";
    n.attrs = attrs;
    for (size_t i = 0; i < runtime.size(); ++i) {
      tern::ValueType type{runtime[i].dtype(), true, {}};
      for (int64_t d : runtime[i].shape()) type.dims.push_back(tern::Dim{d, ""});
      int id = g.add_value("in" + std::to_string(i), type);
      g.inputs.push_back(id);
      n.inputs.push_back(id);
    }
    for (size_t i = 0; i < constants.size(); ++i) {
      if (!constants[i]) {
        n.inputs.push_back(-1);
        continue;
      }
      int id = g.add_value("c" + std::to_string(i));
      g.values[static_cast<size_t>(id)].constant = *constants[i];
      n.inputs.push_back(id);
    }
    for (int o = 0; o < outputs; ++o) {
      int id = g.add_value("out" + std::to_string(o));
      n.outputs.push_back(id);
      g.outputs.push_back(id);
    }
    g.nodes.push_back(n);
    TERN_ASSIGN_OR_RETURN(auto model, tern::Model::create(std::move(g), nullptr, "test"));
    tern::SessionConfig cfg;
    for (const std::string& b : backends) {
      TERN_ASSIGN_OR_RETURN(tern::Backend * backend, tern::backends::get(b));
      cfg.backends.push_back(backend);
    }
    cfg.overrides.set(tern::FlagId::kNumThreads, 2);
    for (const auto& [id, v] : flags) cfg.overrides.set(id, v);
    TERN_ASSIGN_OR_RETURN(auto session, tern::Session::create(model, cfg));
    std::vector<std::string> names, outs;
    std::vector<const tern::Tensor*> ins;
    for (size_t i = 0; i < runtime.size(); ++i) {
      names.push_back("in" + std::to_string(i));
      ins.push_back(&runtime[i]);
    }
    for (int o = 0; o < outputs; ++o) outs.push_back("out" + std::to_string(o));
    std::vector<tern::Tensor> result;
    TERN_RETURN_IF_ERROR(session->run(names, ins, outs, &result));
    return result;
  }
};

// Builds a graph node by node: constant() adds an initializer, node() a one-output node whose
// output value it returns.
struct GraphMaker {
  tern::Graph g;
  int constant(const std::string& name, const tern::Tensor& t) {
    int id = g.add_value(name);
    g.values[static_cast<size_t>(id)].constant = t;
    return id;
  }
  // A float32 graph input of `dims` (-1 for a dynamic dim).
  int input(const std::string& name, std::vector<tern::Dim> dims) {
    const int id = g.add_value(name, tern::ValueType{tern::DType::kFloat32, true, std::move(dims)});
    g.inputs.push_back(id);
    return id;
  }
  int node(const std::string& op, std::vector<int> inputs, tern::Attributes attrs = {}) {
    int out = g.add_value(op + std::to_string(g.nodes.size()));
    g.nodes.push_back(tern::Node{
        "n" + std::to_string(g.nodes.size()), op, "", std::move(inputs), {out}, std::move(attrs)});
    return out;
  }
};

inline tern::Attribute attr_int(int64_t v) {
  tern::Attribute a;
  a.kind = tern::Attribute::Kind::kInt;
  a.i = v;
  return a;
}
inline tern::Attribute attr_float(float v) {
  tern::Attribute a;
  a.kind = tern::Attribute::Kind::kFloat;
  a.f = v;
  return a;
}
inline tern::Attribute attr_ints(std::vector<int64_t> v) {
  tern::Attribute a;
  a.kind = tern::Attribute::Kind::kInts;
  a.ints = std::move(v);
  return a;
}
inline tern::Attribute attr_string(std::string v) {
  tern::Attribute a;
  a.kind = tern::Attribute::Kind::kString;
  a.s = std::move(v);
  return a;
}
inline tern::Attribute attr_floats(std::vector<float> v) {
  tern::Attribute a;
  a.kind = tern::Attribute::Kind::kFloats;
  a.floats = std::move(v);
  return a;
}
inline tern::Attribute attr_strings(std::vector<std::string> v) {
  tern::Attribute a;
  a.kind = tern::Attribute::Kind::kStrings;
  a.strings = std::move(v);
  return a;
}

}  // namespace tern_test
