// Nodes none of whose outputs is read or a graph output go, repeatedly until none is left.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/opt/graph_util.h"
#include "core/opt/optimizer.h"

namespace tern {

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
