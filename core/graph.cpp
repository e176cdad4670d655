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

Status Graph::validate() const {
  const int nv = static_cast<int>(values.size());
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
