// Helpers of the optimizer suites: an op run on its own (a one-node graph nothing can fuse), and
// how many nodes of a kind a graph holds.
#pragma once

#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "backends_util.h"
#include "core/graph.h"

namespace tern_test::optimizer {

using namespace tern;

inline Tensor one(const std::string& op, std::vector<Tensor> runtime,
                  std::vector<std::optional<Tensor>> constants, Attributes attrs = {}) {
  SingleOp s{op, std::move(attrs), std::move(runtime), std::move(constants)};
  auto r = s.run();
  REQUIRE_MESSAGE(r, r.status().message());
  return (*r)[0];
}

inline size_t count_ops(const Graph& g, const std::string& op) {
  size_t n = 0;
  for (const Node& node : g.nodes) n += node.op_type == op;
  return n;
}

}  // namespace tern_test::optimizer
