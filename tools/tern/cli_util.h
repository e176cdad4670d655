// Pieces the `tern` subcommands share: status reporting, RAII holders, argument parsing, inputs.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "c_api.h"
#include "tools/tern/npy.h"

namespace tern_cli {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t);

// Prints "tern: WHAT failed: STATUS: last error" and returns exit code 1.
int fail(const char* what, tern_status s);

struct ModelPtr {
  tern_model* p = nullptr;
  ~ModelPtr() { tern_model_destroy(p); }
};
struct TensorList {
  std::vector<tern_tensor*> v;
  ~TensorList() {
    for (tern_tensor* t : v) tern_tensor_destroy(t);
  }
};
struct ValueList {
  std::vector<tern_value*> v;
  ~ValueList() {
    for (tern_value* x : v) tern_value_destroy(x);
  }
  void reset(size_t n) {
    for (tern_value* x : v) tern_value_destroy(x);
    v.assign(n, nullptr);
  }
};
// "float32 [1,3]", "sequence of float32 [2]", "optional sequence of int64 [?]": what a model
// input or output is.
std::string io_type_text(tern_value_kind kind, int holds_sequence, tern_dtype dt,
                         const int64_t* shape, size_t rank);

std::string shape_text(const int64_t* shape, size_t rank);
bool parse_int(const std::string& s, int lo, int hi, int* out);
// "1,2,4": integers in lo..hi separated by commas, at least one.
bool parse_int_list(const std::string& s, int lo, int hi, std::vector<int>* out);

// Random (or zero) data for input i (for a sequence or optional input, one of its tensors): the
// given shape, else the declared one with dynamic dims 1.
tern_status make_input(const tern_model* m, size_t i, bool zeros, std::mt19937& rng,
                       const std::vector<int64_t>* given_shape, tern_tensor** out);

// The options `run` and `bench` share, and what preparing them yields.
struct RunSetup {
  std::string model_path, backends = "cpu", profile_path;
  // --input NAME=FILE.npy; for a sequence input NAME=A.npy,B.npy,... (NAME= for an empty one);
  // for an optional input NAME=none gives an empty optional.
  std::map<std::string, std::string> input_files;
  std::map<std::string, std::vector<int64_t>> input_shapes;        // --shape NAME=1x3x8x8
  std::vector<std::pair<std::string, std::string>> session_flags;  // --flag
  std::vector<std::pair<std::string, std::string>> run_flags;      // --run-flag
  std::string cpus;  // --cpus LIST: the session's "cpu.affinity" ("" when not given)
  int threads = 0, interop = 0, seed = 0;
  bool zeros = false;
  bool progress = false;  // draw the session's preparation as a bar on stderr (draw_progress)
};
// Parses the shared option at args[i] (moving i past its value): 1 when it was one, 0 when it is
// not a shared option, -1 after printing what is wrong.
int parse_setup_option(const char* cmd, const std::vector<std::string>& args, size_t& i,
                       RunSetup* setup);

struct RunOptionsDeleter {
  void operator()(tern_run_options* r) const { tern_run_options_destroy(r); }
};
using RunOptionsPtr = std::unique_ptr<tern_run_options, RunOptionsDeleter>;

struct Prepared {
  ModelPtr model;
  std::unique_ptr<tern_session, void (*)(tern_session*)> session{nullptr, tern_session_destroy};
  RunOptionsPtr run_options;
  std::vector<NpyArray> arrays;  // data the borrowed input tensors point into
  TensorList inputs;             // the tensors the input values hold
  ValueList values;              // by in_names: what runs take (tern_session_run_values)
  std::vector<const char*> in_names, out_names;
  double load_ms = 0, create_ms = 0;  // file to model; model to ready session
};
// Loads the model, creates the session and run options, and makes the inputs. Returns 0, or the
// exit code after printing why.
int prepare(const char* cmd, const RunSetup& setup, Prepared* out);
// A tern_progress_fn drawing "stage [====    ] done/total" on stderr, redrawn in place, erased
// when a stage completes. Callers install it only when stderr is a terminal.
void draw_progress(const char* stage, size_t done, size_t total, void* ctx);
// Run options carrying setup's --run-flag values (one per calling thread: they are not
// synchronised). Returns 0, or the exit code after printing why.
int make_run_options(const RunSetup& setup, RunOptionsPtr* out);

// Peak resident set size of this process so far, in bytes.
size_t peak_rss_bytes();
// Starts a new peak: VmHWM drops to the current RSS (Linux 4.0's /proc/self/clear_refs "5").
// False where that is not possible (the peak then keeps counting from the process's start).
bool reset_peak_rss();
// CPU time of the whole process (all threads) in milliseconds.
double process_cpu_ms();

}  // namespace tern_cli
