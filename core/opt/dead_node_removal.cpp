// Nodes none of whose outputs is read or a graph output go, repeatedly until none is left. Identity
// nodes whose output is not a graph output go too, their readers reading the input, so patterns
// that span them (Softmax -> Identity (an exported Dropout) -> MatMul in attention, Conv ->
// Dropout -> BatchNormalization) match.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/opt/graph_util.h"
#include "core/opt/optimizer.h"

namespace tern {

Status bypass_identities(Graph& g, OptimizerReport* report) {
  const std::vector<bool> is_output = graph_output_mask(g);
  // Where each value's readers should read: itself, or a bypassed Identity's input.
  std::vector<int> source(g.values.size());
  for (size_t v = 0; v < source.size(); ++v) source[v] = static_cast<int>(v);
  std::vector<bool> removed(g.nodes.size(), false);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    if (node.op_type != "Identity" || !node.domain.empty() || node.inputs.size() != 1 ||
        node.inputs[0] < 0 || node.outputs.size() != 1 || node.outputs[0] < 0 ||
        is_output[static_cast<size_t>(node.outputs[0])]) {
      continue;
    }
    source[static_cast<size_t>(node.outputs[0])] = node.inputs[0];
    removed[n] = true;
    ++report->identities_bypassed;
  }
  // Chains of Identities, in any node order (a cycle, which a valid graph has not, stops after
  // as many steps as there are values).
  auto resolve = [&](int id) {
    for (size_t steps = 0; steps < source.size() && source[static_cast<size_t>(id)] != id;
         ++steps) {
      id = source[static_cast<size_t>(id)];
    }
    return id;
  };
  for (Node& node : g.nodes) {
    for (int& id : node.inputs) {
      if (id >= 0) id = resolve(id);
    }
  }
  // Gone at once, so the passes after this one count their readers right (Conv -> Dropout ->
  // BatchNormalization folds).
  erase_nodes(g, removed);
  return Status::ok();
}

Status remove_dead_nodes(Graph& g, OptimizerReport* report) {
  for (bool changed = true; changed;) {
    changed = false;
    auto consumers = value_consumers(g);
    auto is_output = graph_output_mask(g);
    std::vector<bool> removed(g.nodes.size(), false);
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      bool used = std::any_of(g.nodes[n].outputs.begin(), g.nodes[n].outputs.end(), [&](int id) {
        return id >= 0 &&
               (is_output[static_cast<size_t>(id)] || !consumers[static_cast<size_t>(id)].empty());
      });
      if (!used) {
        removed[n] = changed = true;
        ++report->dead_nodes_removed;
      }
    }
    erase_nodes(g, removed);
  }
  return Status::ok();
}

}  // namespace tern
