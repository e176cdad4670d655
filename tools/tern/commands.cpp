#include "tools/tern/commands.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <time.h>

#include "c_api.h"
#include "tools/tern/npy.h"

namespace tern_cli {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

int fail(const char* what, tern_status s) {
  std::fprintf(stderr, "tern: %s failed: %s: %s\n", what, tern_status_name(s), tern_last_error());
  return 1;
}

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

std::string shape_text(const int64_t* shape, size_t rank) {
  std::string s = "[";
  for (size_t i = 0; i < rank; ++i) {
    if (i) s += ',';
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

bool parse_int(const std::string& s, int lo, int hi, int* out) {
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
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

void print_output(const char* name, tern_tensor* t) {
  tern_dtype dt = tern_tensor_dtype(t);
  size_t rank = tern_tensor_rank(t);
  std::printf("output '%s': %s %s", name, dtype_label(dt),
              shape_text(tern_tensor_shape(t), rank).c_str());
  if (dt == TERN_FLOAT32 && tern_tensor_byte_size(t) > 0) {
    const float* p = static_cast<const float*>(tern_tensor_data(t));
    size_t n = tern_tensor_byte_size(t) / 4;
    double lo = p[0], hi = p[0], sum = 0;
    size_t argmax = 0;
    for (size_t i = 0; i < n; ++i) {
      lo = std::min<double>(lo, p[i]);
      if (p[i] > hi) {
        hi = p[i];
        argmax = i;
      }
      sum += p[i];
    }
    std::printf("  min %.6g max %.6g mean %.6g argmax %zu\n  values:", lo, hi, sum / n, argmax);
    for (size_t i = 0; i < std::min<size_t>(n, 8); ++i) std::printf(" %.6g", p[i]);
    std::printf(n > 8 ? " ...\n" : "\n");
  } else if (dt == TERN_INT64 && tern_tensor_byte_size(t) > 0) {
    const int64_t* p = static_cast<const int64_t*>(tern_tensor_data(t));
    size_t n = tern_tensor_byte_size(t) / 8;
    std::printf("\n  values:");
    for (size_t i = 0; i < std::min<size_t>(n, 8); ++i)
      std::printf(" %lld", static_cast<long long>(p[i]));
    std::printf(n > 8 ? " ...\n" : "\n");
  } else {
    std::printf("\n");
  }
}

std::string safe_file_name(std::string name) {
  for (char& c : name) {
    if (c == '/' || c == ':') c = '_';
  }
  return name;
}

}  // namespace

int cmd_run(const std::vector<std::string>& args) {
  std::string model_path, backends = "cpu", out_dir;
  std::map<std::string, std::string> input_files;
  std::map<std::string, std::vector<int64_t>> input_shapes;
  int threads = 0, interop = 0, runs = 10, seed = 0;
  bool zeros = false;
  std::vector<std::pair<std::string, std::string>> session_flags, run_flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto next = [&](const char* flag) -> const std::string* {
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "tern run: %s needs a value\n", flag);
        return nullptr;
      }
      return &args[++i];
    };
    if (a == "--input") {
      const std::string* v = next("--input");
      if (!v) return 2;
      size_t eq = v->find('=');
      if (eq == std::string::npos || eq == 0) {
        std::fprintf(stderr, "tern run: --input takes NAME=FILE.npy, got '%s'\n", v->c_str());
        return 2;
      }
      input_files[v->substr(0, eq)] = v->substr(eq + 1);
    } else if (a == "--shape") {
      const std::string* v = next("--shape");
      if (!v) return 2;
      size_t eq = v->find('=');
      std::vector<int64_t> dims;
      bool ok = eq != std::string::npos && eq > 0;
      for (size_t p = eq + 1; ok && p <= v->size();) {
        size_t x = v->find('x', p);
        std::string item = v->substr(p, x == std::string::npos ? std::string::npos : x - p);
        int d = 0;
        ok = parse_int(item, 0, 1 << 30, &d);
        dims.push_back(d);
        if (x == std::string::npos) break;
        p = x + 1;
      }
      if (!ok) {
        std::fprintf(stderr, "tern run: --shape takes NAME=D0xD1x..., got '%s'\n", v->c_str());
        return 2;
      }
      input_shapes[v->substr(0, eq)] = dims;
    } else if (a == "--backends") {
      const std::string* v = next("--backends");
      if (!v) return 2;
      backends = *v;
    } else if (a == "--flag" || a == "--run-flag") {
      const std::string* v = next(a.c_str());
      if (!v) return 2;
      size_t eq = v->find('=');
      if (eq == std::string::npos || eq == 0) {
        std::fprintf(stderr, "tern run: %s takes NAME=VALUE, got '%s'\n", a.c_str(), v->c_str());
        return 2;
      }
      (a == "--flag" ? session_flags : run_flags).emplace_back(v->substr(0, eq), v->substr(eq + 1));
    } else if (a == "--threads" || a == "--interop" || a == "--runs" || a == "--seed") {
      const std::string* v = next(a.c_str());
      int* target = a == "--threads"   ? &threads
                    : a == "--interop" ? &interop
                    : a == "--runs"    ? &runs
                                       : &seed;
      if (!v || !parse_int(*v, a == "--runs" ? 1 : 0, 1 << 30, target)) {
        std::fprintf(stderr, "tern run: %s needs a non-negative integer\n", a.c_str());
        return 2;
      }
    } else if (a == "--output-dir") {
      const std::string* v = next("--output-dir");
      if (!v) return 2;
      out_dir = *v;
    } else if (a == "--zeros") {
      zeros = true;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "tern run: unknown option '%s'\n", a.c_str());
      return 2;
    } else if (model_path.empty()) {
      model_path = a;
    } else {
      std::fprintf(stderr, "tern run: unexpected argument '%s'\n", a.c_str());
      return 2;
    }
  }
  if (model_path.empty()) {
    std::fprintf(stderr,
                 "usage: tern run MODEL [--input NAME=FILE.npy ...] [--shape NAME=1x3x8x8] "
                 "[--backends LIST] [--threads N] [--runs N] [--output-dir DIR]\n");
    return 2;
  }

  auto t0 = Clock::now();
  ModelPtr model;
  tern_status s = tern_model_load_file(model_path.c_str(), &model.p);
  if (s != TERN_OK) return fail("loading the model", s);
  double load_ms = ms_since(t0);

  tern_session_options* opts = nullptr;
  if ((s = tern_session_options_create(&opts)) != TERN_OK) return fail("options", s);
  std::unique_ptr<tern_session_options, void (*)(tern_session_options*)> opts_guard(
      opts, tern_session_options_destroy);
  if ((s = tern_session_options_set_backends(opts, backends.c_str())) != TERN_OK) {
    return fail("--backends", s);
  }
  if ((s = tern_session_options_set_num_threads(opts, threads)) != TERN_OK)
    return fail("--threads", s);
  if ((s = tern_session_options_set_num_interop_threads(opts, interop)) != TERN_OK)
    return fail("--interop", s);
  for (const auto& f : session_flags) {
    if ((s = tern_session_options_set_flag(opts, f.first.c_str(), f.second.c_str())) != TERN_OK) {
      return fail("--flag", s);
    }
  }
  tern_run_options* run_opts = nullptr;
  if ((s = tern_run_options_create(&run_opts)) != TERN_OK) return fail("run options", s);
  std::unique_ptr<tern_run_options, void (*)(tern_run_options*)> run_guard(
      run_opts, tern_run_options_destroy);
  for (const auto& f : run_flags) {
    if ((s = tern_run_options_set_flag(run_opts, f.first.c_str(), f.second.c_str())) != TERN_OK) {
      return fail("--run-flag", s);
    }
  }
  t0 = Clock::now();
  tern_session* session = nullptr;
  if ((s = tern_session_create(model.p, opts, &session)) != TERN_OK)
    return fail("creating the session", s);
  std::unique_ptr<tern_session, void (*)(tern_session*)> session_guard(session,
                                                                       tern_session_destroy);
  double create_ms = ms_since(t0);

  std::mt19937 rng(static_cast<unsigned>(seed));
  TensorList inputs;
  std::vector<const char*> in_names;
  std::vector<NpyArray> arrays(tern_model_input_count(model.p));
  for (size_t i = 0; i < tern_model_input_count(model.p); ++i) {
    const char* name = tern_model_input_name(model.p, i);
    in_names.push_back(name);
    tern_tensor* t = nullptr;
    auto it = input_files.find(name);
    if (it != input_files.end()) {
      std::string err = read_npy(it->second, &arrays[i]);
      if (!err.empty()) {
        std::fprintf(stderr, "tern run: input '%s': %s\n", name, err.c_str());
        return 1;
      }
      s = tern_tensor_create_from_data(arrays[i].dtype, arrays[i].shape.data(),
                                       arrays[i].shape.size(), arrays[i].data.data(),
                                       arrays[i].data.size(), nullptr, nullptr, &t);
      input_files.erase(it);
    } else {
      auto sh = input_shapes.find(name);
      s = make_input(model.p, i, zeros, rng, sh == input_shapes.end() ? nullptr : &sh->second, &t);
    }
    if (s != TERN_OK) return fail("preparing an input", s);
    inputs.v.push_back(t);
  }
  if (!input_files.empty()) {
    std::fprintf(stderr, "tern run: the model has no input named '%s'\n",
                 input_files.begin()->first.c_str());
    return 1;
  }
  std::vector<const char*> out_names;
  for (size_t j = 0; j < tern_model_output_count(model.p); ++j) {
    out_names.push_back(tern_model_output_name(model.p, j));
  }

  std::vector<double> times;
  TensorList outputs;
  double cpu_ms = 0, wall_ms = 0;
  auto cpu_now = [] {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
  };
  for (int r = 0; r < runs + 1; ++r) {
    for (tern_tensor* t : outputs.v) tern_tensor_destroy(t);
    outputs.v.assign(out_names.size(), nullptr);
    t0 = Clock::now();
    double c0 = cpu_now();
    s = tern_session_run(session, run_opts, in_names.data(), inputs.v.data(), inputs.v.size(),
                         out_names.data(), out_names.size(), outputs.v.data());
    if (s != TERN_OK) return fail("running the model", s);
    times.push_back(ms_since(t0));
    if (r > 0) {
      cpu_ms += cpu_now() - c0;
      wall_ms += times.back();
    }
  }
  for (size_t j = 0; j < out_names.size(); ++j) print_output(out_names[j], outputs.v[j]);
  if (!out_dir.empty()) {
    for (size_t j = 0; j < out_names.size(); ++j) {
      tern_tensor* t = outputs.v[j];
      std::string path = out_dir + "/" + safe_file_name(out_names[j]) + ".npy";
      std::string err =
          write_npy(path, tern_tensor_dtype(t), tern_tensor_shape(t), tern_tensor_rank(t),
                    tern_tensor_data(t), tern_tensor_byte_size(t));
      if (!err.empty()) {
        std::fprintf(stderr, "tern run: %s\n", err.c_str());
        return 1;
      }
      std::printf("wrote %s\n", path.c_str());
    }
  }
  double first = times.front();
  std::vector<double> steady(times.begin() + 1, times.end());
  std::sort(steady.begin(), steady.end());
  std::printf(
      "latency: load %.2f ms, session %.2f ms, first run %.3f ms, "
      "%d runs: min %.3f ms, median %.3f ms, p90 %.3f ms, max %.3f ms (threads %s, interop %s)\n",
      load_ms, create_ms, first, runs, steady.front(), steady[steady.size() / 2],
      steady[std::min(steady.size() - 1, steady.size() * 9 / 10)], steady.back(),
      threads ? std::to_string(threads).c_str() : "default",
      interop ? std::to_string(interop).c_str() : "default");
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf(
      "cpu: %.2f busy cores during the timed runs (process CPU time / wall time); "
      "peak RSS %.1f MiB\n",
      wall_ms > 0 ? cpu_ms / wall_ms : 0.0, static_cast<double>(ru.ru_maxrss) / 1024.0);
  return 0;
}

// `tern info --flags`: every flag with value, source, scope, default, env var and doc.
int print_flags() {
  std::printf("%-52s %-11s %-12s %-8s %-11s %-32s %s\n", "flag", "value", "source", "scope",
              "default", "env", "doc");
  for (size_t i = 0; i < tern_flag_count(); ++i) {
    const char *name, *type, *doc, *source, *scope, *def, *env;
    if (tern_flag_info(i, &name, &type, &doc) != TERN_OK)
      return fail("flag info", TERN_ERR_INTERNAL);
    char value[64];
    if (tern_flag_get(name, value, sizeof value) != TERN_OK ||
        tern_flag_describe(name, &source, &scope, &def, &env) != TERN_OK) {
      return fail("reading a flag", TERN_ERR_INTERNAL);
    }
    std::string d = def;  // def is overwritten by the next describe call
    std::printf("%-52s %-11s %-12s %-8s %-11s %-32s %s (%s)\n", name, value, source, scope,
                d.c_str(), *env ? env : "-", doc, type);
  }
  return 0;
}

int cmd_info(const std::vector<std::string>& all_args) {
  std::vector<std::string> args;
  for (const std::string& a : all_args) {
    if (a == "--flags") return print_flags();
    if (a == "--parallel") {
      std::printf("%s", tern_parallel_info());
      return 0;
    }
    args.push_back(a);
  }
  std::printf("%s", tern_config_show());
  std::printf("CPU capability: %s\n", tern_cpu_get_capability());
  std::printf(
      "backends: cpu (built, available); cuda built=%d available=%d devices=%d; "
      "vulkan built=%d available=%d; mps built=%d available=%d\n",
      tern_cuda_is_built(), tern_cuda_is_available(), tern_cuda_device_count(),
      tern_vulkan_is_built(), tern_vulkan_is_available(), tern_mps_is_built(),
      tern_mps_is_available());
  if (args.empty()) return 0;
  if (args.size() > 1) {
    std::fprintf(stderr, "usage: tern info [--flags | --parallel | MODEL]\n");
    return 2;
  }
  ModelPtr model;
  tern_status s = tern_model_load_file(args[0].c_str(), &model.p);
  if (s != TERN_OK) return fail("loading the model", s);
  for (int io = 0; io < 2; ++io) {
    size_t n = io ? tern_model_output_count(model.p) : tern_model_input_count(model.p);
    for (size_t i = 0; i < n; ++i) {
      tern_dtype dt;
      size_t rank;
      const int64_t* shape;
      s = io ? tern_model_output_info(model.p, i, &dt, &rank, &shape)
             : tern_model_input_info(model.p, i, &dt, &rank, &shape);
      if (s != TERN_OK) return fail("reading model info", s);
      std::printf("%s '%s': %s %s\n", io ? "output" : "input",
                  io ? tern_model_output_name(model.p, i) : tern_model_input_name(model.p, i),
                  dtype_label(dt), shape_text(shape, rank).c_str());
    }
  }
  return 0;
}

int cmd_convert(const std::vector<std::string>& args) {
  if (args.size() != 2) {
    std::fprintf(stderr, "usage: tern convert IN OUT.tern\n");
    return 2;
  }
  ModelPtr model;
  tern_status s = tern_model_load_file(args[0].c_str(), &model.p);
  if (s != TERN_OK) return fail("loading the model", s);
  if ((s = tern_model_save(model.p, args[1].c_str())) != TERN_OK) return fail("saving", s);
  std::printf("wrote %s\n", args[1].c_str());
  return 0;
}

}  // namespace tern_cli
