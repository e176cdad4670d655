#include "test_case.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "backends/registry.h"
#include "compare.h"
#include "core/session.h"
#include "serialization/model_io.h"
#include "serialization/onnx_tensor.h"

namespace fs = std::filesystem;

namespace tern_conformance {

using tern::Code;
using tern::Status;
using tern::Tensor;

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::kPass:
      return "pass";
    case Outcome::kFail:
      return "fail";
    case Outcome::kUnsupported:
      return "unsupported";
    case Outcome::kError:
      return "error";
  }
  return "error";
}

namespace {

// Tests whose expected outputs come from a random generator (see the corpus README).
enum class RandomCheck { kNone, kBernoulli, kDropout };
constexpr int kRandomRuns = 20;

RandomCheck random_check(const std::string& test) {
  if (test.rfind("test_bernoulli", 0) == 0) return RandomCheck::kBernoulli;
  if (test.rfind("test_training_dropout", 0) == 0 && test.find("zero_ratio") == std::string::npos) {
    return RandomCheck::kDropout;
  }
  return RandomCheck::kNone;
}

// Whether the graph computes Greater(RandomUniformLike(x), x): ONNX's function body of Bernoulli
// (the _expanded tests), which sets an element with probability 1 - x[i], not x[i] as the op
// does. The graph is what a runtime must follow, so its statistics are checked.
bool ones_where_uniform_exceeds(const onnx::GraphProto& gp) {
  for (const auto& greater : gp.node()) {
    if (greater.op_type() != "Greater" || greater.input_size() != 2) continue;
    for (const auto& random : gp.node()) {
      if (random.op_type() == "RandomUniformLike" && random.output_size() == 1 &&
          random.output(0) == greater.input(0) && random.input_size() == 1 &&
          random.input(0) == greater.input(1)) {
        return true;
      }
    }
  }
  return false;
}

// Looser bounds than ONNX's rtol 1e-3 / atol 1e-7, each with its reason; printed in the report.
struct ToleranceException {
  const char* test_prefix;
  Tolerance tol;
  const char* reason;
};
const ToleranceException kToleranceExceptions[] = {
    {"test_dft_inverse",
     {1e-3, 1e-6},
     "bins whose exact value is 0 hold float32 rounding noise (1.9e-7) in the reference; Tern "
     "transforms in double and gets ~1e-15"},
};

Tolerance tolerance_for(const std::string& test, std::string* note) {
  for (const auto& e : kToleranceExceptions) {
    if (*e.test_prefix && test.rfind(e.test_prefix, 0) == 0) {
      *note = tern::str_cat("tolerance exception rtol ", e.tol.rtol, " atol ", e.tol.atol, ": ",
                            e.reason);
      return e.tol;
    }
  }
  return Tolerance{};
}

bool read_model(const std::string& path, onnx::ModelProto* mp) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return f && mp->ParseFromString(ss.str());
}

std::string single_op(const std::string& dir) {
  onnx::ModelProto mp;
  if (!read_model(dir + "/model.onnx", &mp) || mp.graph().node_size() == 0) return "";
  return mp.graph().node_size() == 1 ? mp.graph().node(0).op_type() : "";
}

Outcome outcome_of(const Status& st) {
  return st.code() == Code::kUnsupported ? Outcome::kUnsupported : Outcome::kError;
}

std::string type_kind(const onnx::TypeProto& t) {
  if (t.has_sequence_type()) return "sequence";
  if (t.has_optional_type()) return "optional";
  if (t.has_map_type()) return "map";
  return "tensor";
}

// The graph input each input_<k>.pb of a data set feeds. Every input has a file (the usual
// case): by position. Fewer files: the inputs with an initializer are optional (their default
// the initializer) and the files feed the others, by the name each tensor carries when it names
// a graph input, else by position among the inputs without an initializer.
tern::Expected<std::vector<std::string>> input_names_for(const onnx::GraphProto& gp,
                                                         const std::string& set) {
  size_t files = 0;
  while (fs::exists(set + "/input_" + std::to_string(files) + ".pb")) ++files;
  std::set<std::string> inits, all;
  for (const auto& t : gp.initializer()) inits.insert(t.name());
  std::vector<std::string> required, names;
  for (const auto& vi : gp.input()) {
    all.insert(vi.name());
    if (!inits.count(vi.name())) required.push_back(vi.name());
  }
  if (files == static_cast<size_t>(gp.input_size())) {
    for (const auto& vi : gp.input()) names.push_back(vi.name());
    return names;
  }
  if (files < required.size()) {
    return tern::invalid_argument("the data set has ", files, " input files; the model needs ",
                                  required.size());
  }
  for (size_t k = 0; k < files; ++k) {
    onnx::TensorProto tp;
    std::ifstream f(set + "/input_" + std::to_string(k) + ".pb", std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    if (f && tp.ParseFromString(ss.str()) && all.count(tp.name())) {
      names.push_back(tp.name());
    } else if (k < required.size()) {
      names.push_back(required[k]);
    } else {
      return tern::invalid_argument("input_", k, ".pb names no graph input ('", tp.name(), "')");
    }
  }
  return names;
}

}  // namespace

std::string op_under_test(const std::string& dir) {
  std::string op = single_op(dir);
  if (!op.empty()) return op;
  const std::string name = fs::path(dir).filename().string();
  const size_t x = name.find("_expanded");
  if (x != std::string::npos) {
    op = single_op((fs::path(dir).parent_path() / name.substr(0, x)).string());
    if (!op.empty()) return op;
  }
  onnx::ModelProto mp;
  if (read_model(dir + "/model.onnx", &mp) && mp.graph().node_size() > 0) {
    return mp.graph().node(0).op_type();
  }
  return "(unknown)";
}

CaseResult run_case(const std::string& dir, const RunConfig& cfg) {
  const auto t0 = std::chrono::steady_clock::now();
  CaseResult r;
  r.test = fs::path(dir).filename().string();
  r.op = op_under_test(dir);
  auto finish = [&](Outcome o, std::string detail) {
    r.outcome = o;
    r.detail = std::move(detail);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  };
  onnx::ModelProto mp;
  if (!read_model(dir + "/model.onnx", &mp)) {
    return finish(Outcome::kError, "model.onnx is not a readable ModelProto");
  }
  const auto& gp = mp.graph();
  std::map<std::string, std::string> kinds;  // by graph input and output name
  for (const auto* list : {&gp.input(), &gp.output()}) {
    for (const auto& vi : *list) {
      kinds[vi.name()] = type_kind(vi.type());
      if (kinds[vi.name()] == "map") {
        return finish(Outcome::kUnsupported,
                      tern::str_cat("'", vi.name(), "' is a map; Tern has no map values"));
      }
    }
  }
  auto model = tern::serialization::load_model_file(dir + "/" + cfg.model_file);
  if (!model) return finish(outcome_of(model.status()), "load: " + model.status().message());

  tern::SessionConfig sc;
  for (const std::string& b : cfg.backends) {
    auto be = tern::backends::get(b);
    if (!be) return finish(Outcome::kError, be.status().message());
    sc.backends.push_back(*be);
  }
  sc.overrides.set(tern::FlagId::kNumThreads, cfg.threads);
  sc.overrides.set(tern::FlagId::kNumInteropThreads, 1);
  auto session = tern::Session::create(*model, sc);
  if (!session)
    return finish(outcome_of(session.status()), "session: " + session.status().message());

  std::vector<std::string> sets;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (e.is_directory() && n.rfind("test_data_set_", 0) == 0) sets.push_back(e.path().string());
  }
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return finish(Outcome::kError, "no test_data_set_* directory");

  std::string note;
  Tolerance tol = tolerance_for(r.test, &note);
  if (cfg.tolerance_given) {
    tol.rtol = cfg.rtol;
    tol.atol = cfg.atol;
    note.clear();
  }
  const RandomCheck rc = random_check(r.test);
  for (const std::string& set : sets) {
    auto names = input_names_for(gp, set);
    if (!names) return finish(Outcome::kError, names.status().message());
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < names->size(); ++i) {
      auto t = tern::serialization::read_onnx_value_file(
          set + "/input_" + std::to_string(i) + ".pb", kinds[(*names)[i]]);
      if (!t) {
        return finish(outcome_of(t.status()),
                      tern::str_cat("input ", i, ": ", t.status().message()));
      }
      inputs.push_back(std::move(*t));
    }
    std::vector<const Tensor*> ptrs;
    for (const Tensor& t : inputs) ptrs.push_back(&t);
    std::vector<std::string> out_names;
    for (const auto& vi : gp.output()) out_names.push_back(vi.name());
    // Random outputs: several runs, for the statistics (an unseeded op draws afresh each run).
    const int runs = rc == RandomCheck::kNone ? 1 : kRandomRuns;
    std::vector<std::vector<Tensor>> per_run(static_cast<size_t>(runs));
    for (auto& outs : per_run) {
      Status st = (*session)->run(*names, ptrs, out_names, &outs);
      if (!st.is_ok()) return finish(outcome_of(st), "run: " + st.message());
    }
    const std::vector<Tensor>& outs = per_run[0];
    for (size_t k = 0; k < out_names.size(); ++k) {
      auto want = tern::serialization::read_onnx_value_file(
          set + "/output_" + std::to_string(k) + ".pb", kinds[out_names[k]]);
      if (!want) {
        return finish(outcome_of(want.status()),
                      "expected output " + std::to_string(k) + ": " + want.status().message());
      }
      std::string why;
      bool ok = true;
      if (rc == RandomCheck::kNone) {
        ok = outputs_match(outs[k], *want, tol, &why);
      }
      for (size_t run = 0; ok && rc != RandomCheck::kNone && run < per_run.size(); ++run) {
        const Tensor& got = per_run[run][k];
        if (rc == RandomCheck::kBernoulli) {
          ok = bernoulli_matches(got, *want, &why);
        } else if (k == 0) {
          ok = dropout_matches(got, *want, inputs[0], &why);
        } else {
          ok = dropout_mask_matches(got, *want, per_run[run][0], &why);
        }
      }
      if (ok && rc != RandomCheck::kNone && k == 0) {
        // The draws of runs that differ are independent; identical runs are one draw.
        std::vector<Tensor> draws;
        for (const auto& run : per_run) {
          const bool repeat = run[0].byte_size() == outs[0].byte_size() &&
                              std::memcmp(run[0].raw(), outs[0].raw(), outs[0].byte_size()) == 0;
          if (draws.empty() || !repeat) draws.push_back(run[0]);
        }
        ok =
            rc == RandomCheck::kBernoulli
                ? bernoulli_statistics_match(draws, inputs[0], &why, ones_where_uniform_exceeds(gp))
                : dropout_statistics_match(draws, *want, inputs[0], &why);
      }
      if (!ok) {
        return finish(Outcome::kFail, tern::str_cat("output ", k, " '", out_names[k], "': ", why));
      }
    }
  }
  if (rc != RandomCheck::kNone) {
    note = tern::str_cat("random outputs: shape, dtype, value set and statistics over ",
                         kRandomRuns, " runs checked");
  }
  return finish(Outcome::kPass, note);
}

}  // namespace tern_conformance
