#include "tools/tern/cli_util.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <sys/resource.h>
#include <time.h>

namespace tern_cli {

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

int fail(const char* what, tern_status s) {
  std::fprintf(stderr, "tern: %s failed: %s: %s\n", what, tern_status_name(s), tern_last_error());
  return 1;
}

std::string shape_text(const int64_t* shape, size_t rank) {
  std::string s = "[";
  for (size_t i = 0; i < rank; ++i) {
    if (i) s += ',';
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::string io_type_text(tern_value_kind kind, int holds_sequence, tern_dtype dt,
                         const int64_t* shape, size_t rank) {
  std::string s = kind == TERN_VALUE_SEQUENCE ? "sequence of "
                  : kind == TERN_VALUE_OPTIONAL
                      ? (holds_sequence ? "optional sequence of " : "optional ")
                      : "";
  return s + dtype_label(dt) + " " + shape_text(shape, rank);
}

bool parse_int(const std::string& s, int lo, int hi, int* out) {
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

bool parse_int_list(const std::string& s, int lo, int hi, std::vector<int>* out) {
  out->clear();
  for (size_t at = 0; at <= s.size();) {
    const size_t comma = std::min(s.find(',', at), s.size());
    int v = 0;
    if (!parse_int(s.substr(at, comma - at), lo, hi, &v)) return false;
    out->push_back(v);
    at = comma + 1;
  }
  return !out->empty();
}

// Random or zero data for an input, dynamic dims set to 1.
tern_status make_input(const tern_model* m, size_t i, bool zeros, std::mt19937& rng,
                       const std::vector<int64_t>* given_shape, tern_tensor** out) {
  tern_dtype dt;
  size_t rank;
  const int64_t* shape;
  tern_status s = tern_model_input_info(m, i, &dt, &rank, &shape);
  if (s != TERN_OK) return s;
  std::vector<int64_t> dims(shape, shape + rank);
  for (auto& d : dims) d = d < 0 ? 1 : d;
  if (given_shape) dims = *given_shape;
  s = tern_tensor_create(dt, dims.data(), dims.size(), out);
  if (s != TERN_OK || zeros) return s;
  size_t bytes = tern_tensor_byte_size(*out);
  void* data = tern_tensor_data(*out);
  std::uniform_real_distribution<float> uf(-1.f, 1.f);
  std::uniform_int_distribution<int> ui(0, 9);
  if (dt == TERN_FLOAT32) {
    for (size_t k = 0; k < bytes / 4; ++k) static_cast<float*>(data)[k] = uf(rng);
  } else if (dt == TERN_INT64) {
    for (size_t k = 0; k < bytes / 8; ++k) static_cast<int64_t*>(data)[k] = ui(rng);
  } else if (dt == TERN_INT32) {
    for (size_t k = 0; k < bytes / 4; ++k) static_cast<int32_t*>(data)[k] = ui(rng);
  }
  return TERN_OK;
}

int parse_setup_option(const char* cmd, const std::vector<std::string>& args, size_t& i,
                       RunSetup* setup) {
  const std::string& a = args[i];
  auto next = [&]() -> const std::string* {
    if (i + 1 >= args.size()) {
      std::fprintf(stderr, "tern %s: %s needs a value\n", cmd, a.c_str());
      return nullptr;
    }
    return &args[++i];
  };
  auto name_value = [&](const char* what, std::string* name, std::string* value) {
    const std::string* v = next();
    if (!v) return false;
    size_t eq = v->find('=');
    if (eq == std::string::npos || eq == 0) {
      std::fprintf(stderr, "tern %s: %s takes %s, got '%s'\n", cmd, a.c_str(), what, v->c_str());
      return false;
    }
    *name = v->substr(0, eq);
    *value = v->substr(eq + 1);
    return true;
  };
  std::string name, value;
  if (a == "--input") {
    if (!name_value("NAME=FILE.npy", &name, &value)) return -1;
    setup->input_files[name] = value;
  } else if (a == "--shape") {
    if (!name_value("NAME=D0xD1x...", &name, &value)) return -1;
    std::vector<int64_t> dims;
    for (size_t p = 0; p <= value.size();) {
      size_t x = value.find('x', p);
      std::string item = value.substr(p, x == std::string::npos ? std::string::npos : x - p);
      int d = 0;
      if (!parse_int(item, 0, 1 << 30, &d)) {
        std::fprintf(stderr, "tern %s: --shape takes NAME=D0xD1x..., got '%s'\n", cmd,
                     args[i].c_str());
        return -1;
      }
      dims.push_back(d);
      if (x == std::string::npos) break;
      p = x + 1;
    }
    setup->input_shapes[name] = dims;
  } else if (a == "--backends") {
    const std::string* v = next();
    if (!v) return -1;
    setup->backends = *v;
  } else if (a == "--profile") {
    const std::string* v = next();
    if (!v) return -1;
    setup->profile_path = *v;
  } else if (a == "--flag" || a == "--run-flag") {
    if (!name_value("NAME=VALUE", &name, &value)) return -1;
    (a == "--flag" ? setup->session_flags : setup->run_flags).emplace_back(name, value);
  } else if (a == "--threads" || a == "--interop" || a == "--seed") {
    int* target = a == "--threads"   ? &setup->threads
                  : a == "--interop" ? &setup->interop
                                     : &setup->seed;
    const std::string* v = next();
    if (!v || !parse_int(*v, 0, 1 << 30, target)) {
      std::fprintf(stderr, "tern %s: %s needs a non-negative integer\n", cmd, a.c_str());
      return -1;
    }
  } else if (a == "--cpus") {
    const std::string* v = next();
    if (!v) return -1;
    setup->cpus = *v;
  } else if (a == "--zeros") {
    setup->zeros = true;
  } else {
    return 0;
  }
  return 1;
}

void draw_progress(const char* stage, size_t done, size_t total, void* /*ctx*/) {
  constexpr int kWidth = 30;
  const int filled = total ? static_cast<int>(done * kWidth / total) : kWidth;
  // Redraw only when the bar or the stage changes: kernel preparation reports every node.
  static int last_filled = -1;
  static const char* last_stage = nullptr;
  if (filled == last_filled && stage == last_stage && done != total) return;
  last_filled = filled;
  last_stage = stage;
  std::fprintf(stderr, "\r%-16s [%.*s%*s] %zu/%zu", stage, filled,
               "==============================", kWidth - filled, "", done, total);
  if (done >= total) {
    std::fprintf(stderr, "\r%*s\r", kWidth + 48, "");
    last_filled = -1;
  }
  std::fflush(stderr);
}

int prepare(const char* cmd, const RunSetup& setup, Prepared* p) {
  auto t0 = Clock::now();
  tern_status s = tern_model_load_file(setup.model_path.c_str(), &p->model.p);
  if (s != TERN_OK) return fail(("loading " + setup.model_path).c_str(), s);
  p->load_ms = ms_since(t0);

  tern_session_options* opts = nullptr;
  if ((s = tern_session_options_create(&opts)) != TERN_OK) return fail("options", s);
  std::unique_ptr<tern_session_options, void (*)(tern_session_options*)> opts_guard(
      opts, tern_session_options_destroy);
  if ((s = tern_session_options_set_backends(opts, setup.backends.c_str())) != TERN_OK) {
    return fail("--backends", s);
  }
  if ((s = tern_session_options_set_num_threads(opts, setup.threads)) != TERN_OK)
    return fail("--threads", s);
  if ((s = tern_session_options_set_num_interop_threads(opts, setup.interop)) != TERN_OK)
    return fail("--interop", s);
  if (!setup.cpus.empty() &&
      (s = tern_session_options_set_flag(opts, "cpu.affinity", setup.cpus.c_str())) != TERN_OK) {
    return fail("--cpus", s);
  }
  for (const auto& f : setup.session_flags) {
    if ((s = tern_session_options_set_flag(opts, f.first.c_str(), f.second.c_str())) != TERN_OK) {
      return fail("--flag", s);
    }
  }
  if (!setup.profile_path.empty() &&
      (s = tern_session_options_enable_profiling(opts, setup.profile_path.c_str())) != TERN_OK) {
    return fail("--profile", s);
  }
  if (setup.progress &&
      (s = tern_session_options_set_progress(opts, draw_progress, nullptr)) != TERN_OK) {
    return fail("progress", s);
  }
  if (int rc = make_run_options(setup, &p->run_options)) return rc;
  t0 = Clock::now();
  tern_session* session = nullptr;
  if ((s = tern_session_create(p->model.p, opts, &session)) != TERN_OK) {
    // The library's message names the node that could not be prepared.
    return fail(("creating the session for " + setup.model_path).c_str(), s);
  }
  p->session.reset(session);
  p->create_ms = ms_since(t0);

  std::mt19937 rng(static_cast<unsigned>(setup.seed));
  std::map<std::string, std::string> files = setup.input_files;
  const size_t n_in = tern_model_input_count(p->model.p);
  const size_t n_opt = tern_model_optional_input_count(p->model.p);
  auto is_input = [&](const std::string& name, bool optional) {
    const size_t n = optional ? n_opt : n_in;
    for (size_t i = 0; i < n; ++i) {
      const char* in = optional ? tern_model_optional_input_name(p->model.p, i)
                                : tern_model_input_name(p->model.p, i);
      if (name == in) return true;
    }
    return false;
  };
  for (const auto& [name, dims] : setup.input_shapes) {
    if (!is_input(name, false)) {
      std::fprintf(stderr, "tern %s: --shape %s: the model has no input named '%s'%s\n", cmd,
                   name.c_str(), name.c_str(),
                   is_input(name, true) ? " (an optional input takes its data from --input)" : "");
      return 1;
    }
  }
  // Every input, then the optional inputs (initializers) given a file; the arrays own the data
  // the tensors borrow, so they never move.
  p->arrays.reserve(n_in + files.size());
  auto read_file = [&](const std::string& name, const std::string& file, tern_tensor** t) -> int {
    NpyArray& arr = p->arrays.emplace_back();
    std::string err = read_npy(file, &arr);
    if (!err.empty()) {
      std::fprintf(stderr, "tern %s: input '%s': %s\n", cmd, name.c_str(), err.c_str());
      return 1;
    }
    const tern_status st =
        tern_tensor_create_from_data(arr.dtype, arr.shape.data(), arr.shape.size(), arr.data.data(),
                                     arr.data.size(), nullptr, nullptr, t);
    if (st != TERN_OK) return fail("preparing an input", st);
    p->inputs.v.push_back(*t);
    return 0;
  };
  // Input i's value: a tensor, a sequence (files separated by commas, or two random elements)
  // or an optional ("none": empty; otherwise what it holds).
  auto make_value = [&](size_t i, const char* name, bool optional_input) -> int {
    tern_value_kind kind = TERN_VALUE_TENSOR;
    tern_dtype elem = TERN_FLOAT32;
    int holds_seq = 0;
    if (!optional_input && (s = tern_model_input_kind(p->model.p, i, &kind, &elem, &holds_seq))) {
      return fail("reading the model's inputs", s);
    }
    const bool given = files.count(name) != 0;
    const std::string spec = given ? files.at(name) : "";
    files.erase(name);
    auto one = [&](const std::string& file, tern_tensor** t) -> int {
      if (!file.empty()) return read_file(name, file, t);
      auto sh = setup.input_shapes.find(name);
      s = make_input(p->model.p, i, setup.zeros, rng,
                     sh == setup.input_shapes.end() ? nullptr : &sh->second, t);
      if (s != TERN_OK) return fail("preparing an input", s);
      p->inputs.v.push_back(*t);
      return 0;
    };
    auto sequence = [&](const std::string& list, tern_value** out) -> int {
      std::vector<std::string> parts;
      if (!given) parts = {"", ""};  // two random elements
      for (size_t at = 0; given && at < list.size();) {
        const size_t comma = list.find(',', at);
        parts.push_back(
            list.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
        at = comma == std::string::npos ? list.size() : comma + 1;
      }
      std::vector<const tern_tensor*> items;
      for (const std::string& f : parts) {
        if (given && f.empty()) continue;
        tern_tensor* t = nullptr;
        if (int rc = one(f, &t)) return rc;
        items.push_back(t);
      }
      s = tern_value_create_sequence(elem, items.data(), items.size(), out);
      return s == TERN_OK ? 0 : fail("preparing a sequence input", s);
    };
    tern_value* v = nullptr;
    if (kind == TERN_VALUE_SEQUENCE) {
      if (int rc = sequence(spec, &v)) return rc;
    } else if (kind == TERN_VALUE_OPTIONAL) {
      tern_value* inner = nullptr;
      if (spec != "none") {
        if (holds_seq) {
          if (int rc = sequence(spec, &inner)) return rc;
        } else {
          tern_tensor* t = nullptr;
          if (int rc = one(spec, &t)) return rc;
          if ((s = tern_value_from_tensor(t, &inner)) != TERN_OK) return fail("an input", s);
        }
      }
      s = tern_value_create_optional(inner, &v);
      tern_value_destroy(inner);
      if (s != TERN_OK) return fail("preparing an optional input", s);
    } else {
      tern_tensor* t = nullptr;
      if (int rc = one(spec, &t)) return rc;
      if ((s = tern_value_from_tensor(t, &v)) != TERN_OK) return fail("preparing an input", s);
    }
    p->values.v.push_back(v);
    p->in_names.push_back(name);
    return 0;
  };
  for (size_t i = 0; i < n_in; ++i) {
    if (int rc = make_value(i, tern_model_input_name(p->model.p, i), false)) return rc;
  }
  for (size_t i = 0; i < n_opt; ++i) {
    const char* name = tern_model_optional_input_name(p->model.p, i);
    if (!files.count(name)) continue;  // its initializer
    if (int rc = make_value(i, name, true)) return rc;
  }
  if (!files.empty()) {
    std::fprintf(stderr, "tern %s: the model has no input named '%s'\n", cmd,
                 files.begin()->first.c_str());
    return 1;
  }
  for (size_t j = 0; j < tern_model_output_count(p->model.p); ++j) {
    p->out_names.push_back(tern_model_output_name(p->model.p, j));
  }
  return 0;
}

int make_run_options(const RunSetup& setup, RunOptionsPtr* out) {
  tern_run_options* run_opts = nullptr;
  tern_status s = tern_run_options_create(&run_opts);
  if (s != TERN_OK) return fail("run options", s);
  out->reset(run_opts);
  for (const auto& f : setup.run_flags) {
    if ((s = tern_run_options_set_flag(run_opts, f.first.c_str(), f.second.c_str())) != TERN_OK) {
      return fail("--run-flag", s);
    }
  }
  return 0;
}

bool reset_peak_rss() {
  FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

size_t peak_rss_bytes() {
  // VmHWM is this process image's high-water mark; getrusage's ru_maxrss would also carry the
  // parent's peak across fork + exec (a Python driver's, say).
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    unsigned long long kib = 0;
    bool found = false;
    while (!found && std::fgets(line, sizeof line, f)) {
      found = std::sscanf(line, "VmHWM: %llu kB", &kib) == 1;
    }
    std::fclose(f);
    if (found) return static_cast<size_t>(kib) * 1024;
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<size_t>(ru.ru_maxrss) * 1024;  // Linux reports KiB
}

}  // namespace tern_cli
