// One ONNX backend node test (model.onnx + test_data_set_*/{input,output}_N.pb): loading,
// running on Tern, and comparing with the expected outputs the way ONNX's own runner does.
#pragma once

#include <string>
#include <vector>

namespace tern_conformance {

enum class Outcome { kPass, kFail, kUnsupported, kError };
const char* outcome_name(Outcome o);

struct CaseResult {
  std::string test;  // directory name
  std::string op;    // op under test
  Outcome outcome = Outcome::kError;
  std::string detail;  // why it failed / what is unsupported; the tolerance exception applied
  double seconds = 0;
  // The test's process ended abnormally: a signal, or a nonzero exit status (a sanitizer's
  // report, a leak found at its end), whether or not it had written its result first.
  bool abnormal_end = false;
};

struct RunConfig {
  std::vector<std::string> backends{"cpu"};
  int threads = 1;
  // The file of each test folder the model is loaded from (model.onnx: the ONNX file; a
  // converted model.tern runs the same references through the .tern loader). The graph's inputs
  // and outputs are read from model.onnx either way.
  std::string model_file = "model.onnx";
  // Set: every test compares with this tolerance (a model corpus: real models use rtol 1e-3,
  // atol 1e-4) instead of the node tests' own.
  bool tolerance_given = false;
  double rtol = 0, atol = 0;
};

// The op a test exercises: the single node's type, or for an `_expanded` test the op of the
// test it expands (read from the sibling directory), else the first node's type.
std::string op_under_test(const std::string& dir);

// Runs every data set of the test in `dir`. Never throws; a Tern status becomes kUnsupported
// (TERN_ERR_UNSUPPORTED) or kError (anything else).
CaseResult run_case(const std::string& dir, const RunConfig& cfg);

}  // namespace tern_conformance
