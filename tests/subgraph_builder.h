// Builds graphs with subgraphs (If, Loop and Scan bodies) in code, as the ONNX importer would.
#pragma once

#include <doctest/doctest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/graph.h"

namespace tern_test {

// A graph under construction: the main graph or a subgraph. A subgraph's `capture(name)` makes a
// local value standing for the enclosing graph's value of that name (Graph::captured), as the
// ONNX importer does.
struct SubgraphBuilder {
  tern::Graph g;
  std::vector<std::string> captured;

  int input(const std::string& name, tern::DType dtype, tern::Shape shape = {},
            bool known_shape = true) {
    tern::ValueType t{dtype, known_shape, {}};
    for (int64_t d : shape) t.dims.push_back(tern::Dim{d, ""});
    const int id = g.add_value(name, t);
    g.inputs.push_back(id);
    return id;
  }
  int constant(const std::string& name, const tern::Tensor& t) {
    const int id = g.add_value(name, tern::ValueType{t.dtype(), false, {}});
    g.values[static_cast<size_t>(id)].constant = t;
    return id;
  }
  int capture(const std::string& name) {
    for (size_t v = 0; v < g.values.size(); ++v) {
      if (g.values[v].name == name) return static_cast<int>(v);
    }
    captured.push_back(name);
    return g.add_value(name);
  }
  int id(const std::string& name) const {
    for (size_t v = 0; v < g.values.size(); ++v) {
      if (g.values[v].name == name) return static_cast<int>(v);
    }
    FAIL("no value ", name);
    return -1;
  }
  // A node with one output named `out` (or several: outs).
  std::vector<int> node(const std::string& op, const std::vector<int>& ins,
                        const std::vector<std::string>& outs, tern::Attributes attrs = {}) {
    tern::Node n{
        "n" + std::to_string(g.nodes.size()) + "_" + op, op, "", ins, {}, std::move(attrs)};
    std::vector<int> ids;
    for (const std::string& o : outs) {
      ids.push_back(g.add_value(o));
      n.outputs.push_back(ids.back());
    }
    g.nodes.push_back(std::move(n));
    return ids;
  }
  int node1(const std::string& op, const std::vector<int>& ins, const std::string& out,
            tern::Attributes attrs = {}) {
    return node(op, ins, {out}, std::move(attrs))[0];
  }
  // A node holding subgraphs (attribute name -> subgraph): their captured values are passed
  // after the formal inputs, in attribute-name order, looked up (or captured) here by name.
  std::vector<int> control(const std::string& op, std::vector<int> ins,
                           const std::vector<std::string>& outs,
                           std::map<std::string, SubgraphBuilder*> subs,
                           tern::Attributes attrs = {}) {
    for (auto& [name, sub] : subs) {
      tern::Attribute a;
      a.kind = tern::Attribute::Kind::kGraph;
      a.g = sub->finish(g.opset);
      attrs.set(name, a);
      for (const std::string& c : sub->captured) ins.push_back(capture(c));
    }
    return node(op, ins, outs, std::move(attrs));
  }
  std::shared_ptr<const tern::Graph> finish(int64_t opset) {
    for (const std::string& c : captured) g.inputs.push_back(id(c));
    g.captured = captured.size();
    g.opset = opset;
    return std::make_shared<const tern::Graph>(g);
  }
  void outputs(const std::vector<int>& ids) { g.outputs = ids; }
};

// h_final = Loop(M, h0): h' = Tanh(h W) for M iterations, W [n, n] a constant of the body, M an
// int64 scalar input and h0 [1, n]: a model whose runs take as long as a test asks (the
// cancellation tests of the C API and the CLI).
inline tern::Graph tanh_loop_graph(const tern::Tensor& w) {
  const int64_t n = w.shape()[0];
  SubgraphBuilder m;
  m.g.opset = 17;
  const int trips = m.input("M", tern::DType::kInt64);
  const int h0 = m.input("h0", tern::DType::kFloat32, {1, n});
  SubgraphBuilder body;
  body.input("i", tern::DType::kInt64);
  const int cond = body.input("cond", tern::DType::kBool);
  const int h = body.input("h", tern::DType::kFloat32);
  const int wid = body.constant("W", w);
  const int next = body.node1("Tanh", {body.node1("MatMul", {h, wid}, "hw")}, "next");
  body.outputs({body.node1("Identity", {cond}, "cond_out"), next});
  m.outputs(m.control("Loop", {trips, -1, h0}, {"h_final"}, {{"body", &body}}));
  return m.g;
}

}  // namespace tern_test
