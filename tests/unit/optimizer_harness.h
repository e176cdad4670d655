// Helpers of the optimizer suites: an op run on its own (a one-node graph nothing can fuse), how
// many nodes of a kind a graph holds, and a graph's CPU session checked against the ops run one
// by one.
#pragma once

#include <doctest/doctest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends_util.h"
#include "core/graph.h"
#include "core/session.h"

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

// A float32 graph input "x" of static shape `dims`; returns its value id.
inline int image_input(Graph& g, const std::vector<int64_t>& dims) {
  ValueType type{DType::kFloat32, true, {}};
  for (int64_t d : dims) type.dims.push_back({d, ""});
  const int x = g.add_value("x", type);
  g.inputs.push_back(x);
  return x;
}

// Whether the CPU planner chooses blocked layouts here (oneDNN built, an ISA above the baseline).
inline bool plans_blocked_layouts() {
  return tern_onednn_is_available() && std::string(tern_cpu_get_capability()) != "DEFAULT";
}

// A session of `g` (optimised as every session is) on the CPU backend alone.
inline std::unique_ptr<Session> cpu_session(const Graph& g, const char* name) {
  SessionConfig cfg;
  cfg.backends.push_back(backends::get("cpu").value());
  return Session::create(Model::create(g, nullptr, name).value(), cfg).value();
}

// Runs `session` on x = `xin` and checks value `y` against `want`.
inline void check_run(Session& session, const Tensor& xin, int y, const Tensor& want, double atol,
                      double rtol) {
  std::vector<Tensor> out;
  REQUIRE(session.run({"x"}, {&xin}, {session.graph().value_name(y)}, &out).is_ok());
  REQUIRE(out[0].shape() == want.shape());
  Comparison cmp = compare(out[0].data<float>(), want.data<float>(),
                           static_cast<size_t>(want.numel()), atol, rtol);
  CHECK_MESSAGE(cmp.mismatches == 0, "max abs diff ", cmp.max_abs);
}

}  // namespace tern_test::optimizer
