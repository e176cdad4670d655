// Helpers shared by the backends-API test files: flag save/restore, graph building, running,
// comparing, child-process CLI calls.
#pragma once

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <time.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "c_api.h"
#include "core/session.h"
#include "graph_builder.h"

namespace tern_test {

using namespace tern;

// Puts every flag back to its value at construction (tests share the process-wide registry).
struct FlagRestore {
  std::vector<std::pair<std::string, std::string>> saved;
  FlagRestore() {
    for (size_t i = 0; i < tern_flag_count(); ++i) {
      const char *name, *type, *doc;
      REQUIRE(tern_flag_info(i, &name, &type, &doc) == TERN_OK);
      char buf[512];
      REQUIRE(tern_flag_get(name, buf, sizeof buf) == TERN_OK);
      saved.emplace_back(name, buf);
    }
  }
  ~FlagRestore() {
    for (const auto& [name, value] : saved) (void)tern_flag_set(name.c_str(), value.c_str());
  }
};

inline std::string flag(const char* name) {
  char buf[512] = {};
  REQUIRE(tern_flag_get(name, buf, sizeof buf) == TERN_OK);
  return buf;
}

struct Cli {
  int code;
  std::string out;
};
inline Cli run_cli(const std::string& env, const std::string& args) {
  std::string cmd = env + " " + TERN_CLI_PATH + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  Cli r{-1, ""};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}
// The line of `tern info --flags` for one flag, split on runs of spaces: name, value, source...
inline std::vector<std::string> flag_row(const std::string& listing, const std::string& name) {
  std::istringstream in(listing);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + " ", 0) != 0) continue;
    std::vector<std::string> cols;
    std::istringstream ls(line);
    std::string c;
    for (int i = 0; i < 3 && ls >> c; ++i) cols.push_back(c);
    return cols;
  }
  return {};
}

inline Tensor random_f32(Shape shape, unsigned seed, float lo = -1, float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Tensor t = Tensor::allocate(DType::kFloat32, shape).value();
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// A graph under construction: inputs with static shapes, constants, nodes.
struct Builder {
  Graph g;
  Builder() { g.opset = 13; }
  int input(const std::string& name, const Shape& s, DType dt = DType::kFloat32) {
    ValueType t{dt, true, {}};
    for (int64_t d : s) t.dims.push_back(Dim{d, ""});
    int id = g.add_value(name, t);
    g.inputs.push_back(id);
    return id;
  }
  int constant(const std::string& name, Tensor t) {
    int id = g.add_value(name);
    g.values[static_cast<size_t>(id)].constant = std::move(t);
    return id;
  }
  int node(const std::string& op, std::vector<int> ins, Attributes attrs = {}) {
    int out = g.add_value("v" + std::to_string(g.values.size()));
    g.nodes.push_back(Node{
        "n" + std::to_string(g.nodes.size()), op, "", std::move(ins), {out}, std::move(attrs)});
    return out;
  }
  // profile_path: record a profile (Session::profiler), written only when asked.
  std::unique_ptr<Session> session(std::vector<int> outputs, FlagOverrides o = {},
                                   std::string profile_path = "") {
    g.outputs = std::move(outputs);
    auto model = Model::create(std::move(g), nullptr, "test").value();
    SessionConfig cfg;
    cfg.backends.push_back(backends::get("cpu").value());
    cfg.overrides = o;
    cfg.profile_path = std::move(profile_path);
    auto s = Session::create(model, cfg);
    REQUIRE_MESSAGE(s, s.status().message());
    return std::move(s).value();
  }
};

inline std::vector<Tensor> run(Session& s, const std::vector<std::string>& names,
                               const std::vector<const Tensor*>& ins, const std::string& out,
                               const FlagOverrides* run_flags = nullptr) {
  std::vector<Tensor> res;
  Status st = s.run(names, ins, {out}, &res, run_flags);
  REQUIRE_MESSAGE(st.is_ok(), st.message());
  return res;
}

inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.byte_size() == b.byte_size() && std::memcmp(a.raw(), b.raw(), a.byte_size()) == 0;
}

inline float max_abs_diff(const Tensor& a, const Tensor& b) {
  float m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    float d = std::fabs(a.data<float>()[i] - b.data<float>()[i]);
    if (std::isnan(d)) return INFINITY;
    m = std::max(m, d);
  }
  return m;
}

// The kernel names of a plan's steps, for dispatch checks.
inline std::vector<std::string> kernels(Session& s, const std::vector<Shape>& shapes,
                                        const FlagOverrides* run_flags = nullptr) {
  auto plan = s.plan_for(shapes, s.flags(run_flags)).value();
  std::vector<std::string> k;
  for (const PlanStep& st : plan->steps) k.push_back(st.kernel->name());
  return k;
}

inline Attributes attrs1(const std::string& name, Attribute a) {
  Attributes at;
  at.set(name, std::move(a));
  return at;
}

inline double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

}  // namespace tern_test
