// Nodes none of whose outputs is read or a graph output go, repeatedly until none is left; before
// that, Identity nodes whose output is not a graph output are bypassed (their readers read the
// input), so patterns that span them (Softmax -> Identity (an exported Dropout) -> MatMul in
// attention) match.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/opt/graph_util.h"
#include "core/opt/optimizer.h"

namespace tern {

Status bypass_identities(Graph& g, OptimizerReport* report) {
  const std::vector<bool> is_output = graph_output_mask(g);
  // Where each value's readers should read: itself, or an Identity's input (followed through
  // chains: nodes come in topological order, so an input is resolved before it is forwarded).
  std::vector<int> source(g.values.size());
  for (size_t v = 0; v < source.size(); ++v) source[v] = static_cast<int>(v);
  for (Node& n : g.nodes) {
    for (int& id : n.inputs) {
      if (id >= 0) id = source[static_cast<size_t>(id)];
    }
    if (n.op_type != "Identity" || !n.domain.empty() || n.inputs.size() != 1 || n.inputs[0] < 0 ||
        n.outputs.size() != 1 || n.outputs[0] < 0 || is_output[static_cast<size_t>(n.outputs[0])]) {
      continue;
    }
    source[static_cast<size_t>(n.outputs[0])] = n.inputs[0];
    ++report->identities_bypassed;  // the node itself goes as dead below
  }
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
