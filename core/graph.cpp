#include "core/graph.h"

#include <algorithm>
#include <deque>

namespace tern {

int Graph::add_value(std::string name, ValueType type) {
  values.push_back(Value{std::move(name), std::move(type), std::nullopt, {}});
  return static_cast<int>(values.size() - 1);
}

std::string Graph::unused_name(const std::string& base) const {
  auto taken = [&](const std::string& n) {
    return std::any_of(values.begin(), values.end(), [&](const Value& v) { return v.name == n; });
  };
  if (!taken(base)) return base;
  int k = 2;
  while (taken(str_cat(base, "_", k))) ++k;
  return str_cat(base, "_", k);
}

std::string Graph::describe_node(size_t index) const {
  const Node& n = nodes[index];
  std::string name = n.name.empty() ? str_cat("#", index) : n.name;
  return str_cat("node '", name, "' (", n.op_type, ")");
}

std::vector<const Graph*> subgraphs_of(const Node& node) {
  std::vector<const Graph*> out;
  for (const auto& [name, a] : node.attrs.all()) {
    if (a.kind == Attribute::Kind::kGraph && a.g) out.push_back(a.g.get());
    if (a.kind == Attribute::Kind::kGraphs) {
      for (const auto& g : a.graphs) {
        if (g) out.push_back(g.get());
      }
    }
  }
  return out;
}

size_t captured_inputs(const Node& node) {
  size_t n = 0;
  for (const Graph* g : subgraphs_of(node)) n += g->captured;
  return n;
}

size_t formal_inputs(const Node& node) {
  const size_t c = captured_inputs(node);
  return node.inputs.size() > c ? node.inputs.size() - c : 0;
}

Status Graph::validate() const {
  return validate_at(0);
}

Status Graph::validate_at(int depth) const {
  const int nv = static_cast<int>(values.size());
  if (captured > inputs.size()) {
    return invalid_model("the subgraph captures ", captured, " outer values but has ",
                         inputs.size(), " inputs");
  }
  // Node index, or -2 for graph input/constant (-3 while inputs are checked for repeats).
  std::vector<int> producer(values.size(), -1);
  for (size_t v = 0; v < values.size(); ++v) {
    if (values[v].constant) producer[v] = -2;
  }
  for (int id : inputs) {
    if (id < 0 || id >= nv) return invalid_model("graph input refers to value ", id, " of ", nv);
    if (producer[static_cast<size_t>(id)] == -3) {
      return invalid_model("graph input '", value_name(id), "' is listed twice");
    }
    producer[static_cast<size_t>(id)] = -3;
  }
  for (int id : inputs) producer[static_cast<size_t>(id)] = -2;
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int id : nodes[i].outputs) {
      if (id == -1) continue;
      if (id < -1 || id >= nv) {
        return invalid_model(describe_node(i), ": output refers to value ", id, " of ", nv);
      }
      if (producer[static_cast<size_t>(id)] != -1) {
        return invalid_model(describe_node(i), ": output '", value_name(id),
                             "' is already defined by ",
                             producer[static_cast<size_t>(id)] == -2
                                 ? std::string("a graph input or initializer")
                                 : describe_node(static_cast<size_t>(producer[id])));
      }
      producer[static_cast<size_t>(id)] = static_cast<int>(i);
    }
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int id : nodes[i].inputs) {
      if (id == -1) continue;
      if (id < -1 || id >= nv) {
        return invalid_model(describe_node(i), ": input refers to value ", id, " of ", nv);
      }
      if (producer[static_cast<size_t>(id)] == -1) {
        return invalid_model(describe_node(i), ": input '", value_name(id),
                             "' is not produced by any node, graph input or initializer");
      }
    }
  }
  for (int id : outputs) {
    if (id < 0 || id >= nv) return invalid_model("graph output refers to value ", id, " of ", nv);
    if (producer[static_cast<size_t>(id)] == -1) {
      return invalid_model("graph output '", value_name(id), "' is never produced");
    }
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const auto& [name, a] : nodes[i].attrs.all()) {
      std::vector<const Graph*> subs;
      if (a.kind == Attribute::Kind::kGraph) {
        subs.push_back(a.g.get());
      } else if (a.kind == Attribute::Kind::kGraphs) {
        for (const auto& g : a.graphs) subs.push_back(g.get());
      } else {
        continue;
      }
      if (depth + 1 > kMaxSubgraphDepth) {
        return invalid_model(describe_node(i), ": subgraphs nest deeper than ", kMaxSubgraphDepth,
                             " levels");
      }
      for (const Graph* sub : subs) {
        if (!sub)
          return invalid_model(describe_node(i), ": subgraph attribute '", name, "' is empty");
        TERN_RETURN_IF_ERROR(sub->validate_at(depth + 1).with_prefix(
            str_cat(describe_node(i), ": subgraph '", name, "'")));
      }
    }
    if (captured_inputs(nodes[i]) > nodes[i].inputs.size()) {
      return invalid_model(describe_node(i), ": its subgraphs capture ", captured_inputs(nodes[i]),
                           " outer values, the node passes only ", nodes[i].inputs.size(),
                           " inputs");
    }
  }
  return topological_order().status();
}

Expected<std::vector<size_t>> Graph::topological_order() const {
  std::vector<int> producer(values.size(), -1);
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int id : nodes[i].outputs) {
      if (id >= 0 && static_cast<size_t>(id) < values.size()) producer[id] = static_cast<int>(i);
    }
  }
  // Kahn's algorithm; ties keep file order so runs are reproducible.
  std::vector<int> pending(nodes.size(), 0);
  std::vector<std::vector<size_t>> consumers(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int id : nodes[i].inputs) {
      if (id < 0 || static_cast<size_t>(id) >= values.size()) continue;
      int p = producer[static_cast<size_t>(id)];
      if (p >= 0) {
        ++pending[i];
        consumers[static_cast<size_t>(p)].push_back(i);
      }
    }
  }
  std::deque<size_t> ready;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (pending[i] == 0) ready.push_back(i);
  }
  std::vector<size_t> order;
  order.reserve(nodes.size());
  while (!ready.empty()) {
    size_t n = ready.front();
    ready.pop_front();
    order.push_back(n);
    for (size_t c : consumers[n]) {
      if (--pending[c] == 0) ready.push_back(c);
    }
  }
  if (order.size() != nodes.size()) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (pending[i] > 0) return invalid_model("the graph has a cycle through ", describe_node(i));
    }
  }
  return order;
}

}  // namespace tern
