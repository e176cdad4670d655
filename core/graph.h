// The graph IR every loader produces and every later stage reads: values (with symbolic shapes and
// optional constant data), nodes in any order, graph inputs and outputs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/attribute.h"
#include "core/tensor.h"

namespace tern {

// A dim is a known size (>= 0) or a symbol ("batch", or "" when anonymous) with value -1.
struct Dim {
  int64_t value = -1;
  std::string symbol;
  bool known() const { return value >= 0; }
};

struct ValueType {
  DType dtype = DType::kUndefined;  // kSequence / kOptional for values that are not tensors
  bool has_shape = false;           // false: rank unknown (a tensor's, or a sequence element's)
  std::vector<Dim> dims;
  // A sequence's element dtype; an optional's element: a tensor dtype or kSequence (then
  // seq_elem is the sequence's element dtype).
  DType elem = DType::kUndefined;
  DType seq_elem = DType::kUndefined;
};

// A constant's data already laid out for one kernel family (weights packed ahead of time by
// `tern convert --optimize`). `key` names the family and the version of its layout description;
// the kernel that finds a matching key checks the rest before it uses `data` in place.
struct PackedData {
  std::string key;
  Tensor data;  // uint8 bytes, 64-byte aligned
};

struct Value {
  std::string name;
  ValueType type;
  std::optional<Tensor> constant;  // initializer / folded constant data
  std::vector<PackedData> packed;  // layouts of `constant` for kernels (empty for most values)
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;        // "" for ai.onnx
  std::vector<int> inputs;   // value ids; -1 marks an omitted optional input
  std::vector<int> outputs;  // value ids; -1 marks an omitted optional output
  Attributes attrs;
};

struct Graph {
  std::vector<Value> values;
  std::vector<Node> nodes;
  // Values fed by the caller; one with a constant is an optional input whose default is that
  // constant (an ONNX graph input with an initializer).
  std::vector<int> inputs;
  std::vector<int> outputs;
  // A subgraph (an If branch, a Loop or Scan body) reads values of the graphs around it by name.
  // The importer resolves those names once: the last `captured` entries of `inputs` stand for
  // them, and the node that holds the subgraph passes the outer values as its own inputs after its
  // formal ones (see captured_inputs), so every stage sees an ordinary dependency. 0 for a model's
  // main graph.
  size_t captured = 0;
  int64_t opset = 0;  // ai.onnx opset version the nodes follow
  std::string producer;
  std::vector<std::pair<std::string, std::string>> metadata;

  int add_value(std::string name, ValueType type = {});
  // `base`, or `base` with a "_2", "_3", ... suffix when a value already has that name (value
  // names are unique in a graph, as the .tern format requires). Linear in the number of values.
  std::string unused_name(const std::string& base) const;
  // "node 'conv1' (Conv)"; falls back to the node's index when it has no name.
  std::string describe_node(size_t index) const;
  const std::string& value_name(int id) const { return values[static_cast<size_t>(id)].name; }

  // Structural checks: ids in range, each value produced once, graph inputs not produced by a
  // node, every node input defined, outputs defined, no cycle; the same for every subgraph (at
  // most kMaxSubgraphDepth deep), and each node holding subgraphs passes their captured values.
  // Returns INVALID_MODEL naming the offending node or value.
  Status validate() const;
  static constexpr int kMaxSubgraphDepth = 16;  // real models nest 2 or 3 deep
  // Node indices in dependency order (validate() first).
  Expected<std::vector<size_t>> topological_order() const;

 private:
  Status validate_at(int depth) const;
};

// The subgraphs a node holds (kGraph and kGraphs attributes), in attribute-name order: the order
// their captured values follow the node's formal inputs.
std::vector<const Graph*> subgraphs_of(const Node& node);
// How many of node.inputs are captured outer values (the sum of its subgraphs' `captured`).
size_t captured_inputs(const Node& node);
// node.inputs without the captured values: what the op's schema counts.
size_t formal_inputs(const Node& node);

}  // namespace tern
