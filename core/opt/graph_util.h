// What the optimizer's passes share: who produces and who reads each value, constants by value
// id, adding a constant, erasing nodes, and PatternView, the view a pattern-matching pass walks.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/graph.h"

namespace tern {

// For every value, the indices of the nodes reading it, in node order (a node reading a value
// twice appears twice). One flat array: every pass of the optimizer makes one, and a vector per
// value cost each pass ~0.15 ms of allocations on a 3,000-node graph.
class ValueConsumers {
 public:
  explicit ValueConsumers(const Graph& g);
  std::span<const size_t> operator[](size_t v) const {
    return {nodes_.data() + start_[v], nodes_.data() + start_[v + 1]};
  }

 private:
  std::vector<size_t> start_;  // value v's readers are nodes_[start_[v], start_[v + 1])
                               // (one more entry, used while counting)
  std::vector<size_t> nodes_;
};
inline ValueConsumers value_consumers(const Graph& g) {
  return ValueConsumers(g);
}
// For every value, the node that produces it (-1: graph input, constant or unproduced).
std::vector<int> value_producers(const Graph& g);
// Removes the nodes marked in `removed` (one flag per node), keeping the others' order.
void erase_nodes(Graph& g, const std::vector<bool>& removed);

// Value v's constant data, or null.
const Tensor* constant_of(const Graph& g, int v);
// Value v as a float32 scalar constant, when it is one of float32, float16 or bfloat16 (a half
// model's constants are of its type).
std::optional<float> scalar_of(const Graph& g, int v);
// How close a constant scalar_of v read can be to a value it stands for: relative 1e-4 for a
// float32 constant, half a unit in the last place of its type for float16 / bfloat16 (sqrt 2 is
// 1.4140625 in bfloat16).
float scalar_tolerance(const Graph& g, int v);
// One flag per value: a graph output.
std::vector<bool> graph_output_mask(const Graph& g);
// True when value v is read by exactly one node, `reader`, and is not a graph output.
bool only_read_by(const ValueConsumers& consumers, const std::vector<bool>& is_output, int v,
                  size_t reader);
// True for the ops that draw random values (and Dropout, which may): their outputs are made at
// each run, never folded into constants nor computed while planning.
bool random_op(const std::string& op_type);
// True when this build registers `op_type`: a pass makes no node of an op a selective build
// (TERN_SELECTED_OPS) left out.
bool op_built(const std::string& op_type);

// The ops a pass looks for or makes, which decide whether it can do anything: a graph has no node
// of an op the build left out (loading refuses it), and a pass makes none. Numbered for
// kBuiltOptimizerOps; cmake/TernSelectiveOps.cmake reads the names from this list.
enum class OptOp : uint32_t {
  kAttention,
  kBatchNormalization,
  kDequantizeLinear,
  kDropout,
  kFusedBatchNormalization,
  kFusedConv,
  kFusedMatMul,
  kGelu,
  kGroupNormalization,
  kHardSwish,
  kLayerNormalization,
  kPad,
  kSwish,
  kTranspose,
};
// Bit N: OptOp N is registered (every bit but in a selective build). The generated registration
// defines it, so link-time optimisation folds op_built(OptOp) and drops the passes a selective
// build cannot use, as kBuiltDTypes drops kernels of left-out types (core/dtype.h).
extern const uint64_t kBuiltOptimizerOps;
[[gnu::always_inline]] inline bool op_built(OptOp op) {
  return ((kBuiltOptimizerOps >> static_cast<uint32_t>(op)) & 1) != 0;
}
// A new constant value named after `name` (made unique); returns its id.
int add_constant(Graph& g, std::string name, Tensor t);

// What pattern-matching passes look at: who produces and reads each value, and the nodes a pass
// has already taken (removed at its end).
struct PatternView {
  Graph& g;
  ValueConsumers consumers = value_consumers(g);
  std::vector<int> producers = value_producers(g);
  std::vector<bool> is_output = graph_output_mask(g);
  std::vector<bool> removed = std::vector<bool>(g.nodes.size(), false);

  // The node of type `op` that produces v, unless taken already.
  Node* node_at(int v, const char* op) {
    int p = v < 0 ? -1 : producers[static_cast<size_t>(v)];
    if (p < 0 || removed[static_cast<size_t>(p)]) return nullptr;
    Node& n = g.nodes[static_cast<size_t>(p)];
    return n.op_type == op && n.domain.empty() ? &n : nullptr;
  }
  size_t index_of(const Node* n) const { return static_cast<size_t>(n - g.nodes.data()); }
  // Read only by `reader` and not a graph output.
  bool only(int v, const Node* reader) const {
    return only_read_by(consumers, is_output, v, index_of(reader));
  }
  // `head` takes over the output of `tail` (an element-wise step it absorbed), which goes.
  void absorb(Node& head, size_t tail) {
    head.outputs[0] = g.nodes[tail].outputs[0];
    producers[static_cast<size_t>(head.outputs[0])] = static_cast<int>(index_of(&head));
    removed[tail] = true;
  }
};

}  // namespace tern
