#include "tools/tern/commands.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "c_api.h"
#include "tools/tern/cli_util.h"
#include "tools/tern/npy.h"

namespace tern_cli {

namespace {

void print_tensor(const std::string& label, tern_tensor* t) {
  tern_dtype dt = tern_tensor_dtype(t);
  size_t rank = tern_tensor_rank(t);
  std::printf("%s: %s %s", label.c_str(), dtype_label(dt),
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

// Calls fn(label suffix, tensor) for each tensor a value holds: "" for a tensor, "[i]" for a
// sequence's elements, "?" for an optional's (or "[i]" of its sequence). Returns false when a
// handle could not be made (after printing why).
template <class Fn>
bool for_each_tensor(tern_value* v, Fn&& fn) {
  tern_value_kind kind = TERN_VALUE_TENSOR;
  if (tern_value_get_kind(v, &kind) != TERN_OK) return false;
  if (kind == TERN_VALUE_OPTIONAL) {
    if (tern_value_optional_has_value(v) != 1) return true;
    tern_value* inner = nullptr;
    if (tern_value_optional_get(v, &inner) != TERN_OK) return false;
    const bool ok = for_each_tensor(inner, fn);
    tern_value_destroy(inner);
    return ok;
  }
  if (kind == TERN_VALUE_SEQUENCE) {
    for (size_t i = 0; i < tern_value_sequence_length(v); ++i) {
      tern_tensor* t = nullptr;
      if (tern_value_sequence_at(v, i, &t) != TERN_OK) return false;
      fn(i, t);
      tern_tensor_destroy(t);
    }
    return true;
  }
  tern_tensor* t = nullptr;
  if (tern_value_get_tensor(v, &t) != TERN_OK) return false;
  fn(static_cast<size_t>(-1), t);
  tern_tensor_destroy(t);
  return true;
}

// One output: a tensor's summary, or a sequence's length and each element's, or whether an
// optional holds something.
void print_output(const char* name, tern_value* v) {
  tern_value_kind kind = TERN_VALUE_TENSOR;
  (void)tern_value_get_kind(v, &kind);
  if (kind == TERN_VALUE_SEQUENCE) {
    std::printf("output '%s': sequence of %zu\n", name, tern_value_sequence_length(v));
  } else if (kind == TERN_VALUE_OPTIONAL) {
    std::printf("output '%s': optional, %s\n", name,
                tern_value_optional_has_value(v) == 1 ? "holds" : "empty");
  }
  for_each_tensor(v, [&](size_t i, tern_tensor* t) {
    // (Built piece by piece: GCC 12 warns falsely on some std::string concatenations.)
    std::string label;
    if (i != static_cast<size_t>(-1)) {
      label = "  [";
      label += std::to_string(i);
      label += "]";
    } else if (kind == TERN_VALUE_TENSOR) {
      label = "output '";
      label += name;
      label += "'";
    } else {
      label = "  value";
    }
    print_tensor(label, t);
  });
}

// `tern run --timeout`'s exit status when a run passed it (coreutils timeout's).
constexpr int kTimeoutExit = 124;

std::string safe_file_name(std::string name) {
  for (char& c : name) {
    if (c == '/' || c == ':') c = '_';
  }
  return name;
}

}  // namespace

int cmd_run(const std::vector<std::string>& args) {
  RunSetup setup;
  std::string out_dir;
  int runs = 10;
  int timeout_ms = 0;  // per run; 0: none
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    int handled = parse_setup_option("run", args, i, &setup);
    if (handled < 0) return 2;
    if (handled) continue;
    if (a == "--runs") {
      if (i + 1 >= args.size() || !parse_int(args[++i], 1, 1 << 30, &runs)) {
        std::fprintf(stderr, "tern run: --runs needs a positive integer\n");
        return 2;
      }
    } else if (a == "--timeout") {
      if (i + 1 >= args.size() || !parse_int(args[++i], 0, 1 << 30, &timeout_ms)) {
        std::fprintf(stderr, "tern run: --timeout needs milliseconds (0: none)\n");
        return 2;
      }
    } else if (a == "--output-dir") {
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "tern run: --output-dir needs a value\n");
        return 2;
      }
      out_dir = args[++i];
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "tern run: unknown option '%s'\n", a.c_str());
      return 2;
    } else if (setup.model_path.empty()) {
      setup.model_path = a;
    } else {
      std::fprintf(stderr, "tern run: unexpected argument '%s'\n", a.c_str());
      return 2;
    }
  }
  if (setup.model_path.empty()) {
    std::fprintf(stderr,
                 "usage: tern run MODEL [--input NAME=FILE.npy ...] [--shape NAME=1x3x8x8] "
                 "[--backends LIST] [--threads N] [--cpus LIST] [--runs N] [--timeout MS]\n"
                 "                 [--output-dir DIR]\n");
    return 2;
  }
  Prepared prep;
  if (int rc = prepare("run", setup, &prep)) return rc;
  tern_session* session = prep.session.get();
  tern_run_options* run_opts = prep.run_options.get();
  tern_status s = tern_run_options_set_deadline_ms(run_opts, timeout_ms);
  if (s != TERN_OK) return fail("--timeout", s);
  const int threads = setup.threads, interop = setup.interop;
  const double load_ms = prep.load_ms, create_ms = prep.create_ms;
  auto& inputs = prep.values;
  auto& in_names = prep.in_names;
  auto& out_names = prep.out_names;
  auto t0 = Clock::now();
  std::vector<double> times;
  ValueList outputs;
  double cpu_ms = 0, wall_ms = 0;
  for (int r = 0; r < runs + 1; ++r) {
    outputs.reset(out_names.size());
    t0 = Clock::now();
    double c0 = process_cpu_ms();
    s = tern_session_run_values(session, run_opts, in_names.data(), inputs.v.data(),
                                inputs.v.size(), out_names.data(), out_names.size(),
                                outputs.v.data());
    // A run past --timeout exits like coreutils' timeout does, so scripts can tell it apart.
    if (s == TERN_ERR_DEADLINE_EXCEEDED) {
      fail("running the model", s);
      return kTimeoutExit;
    }
    if (s != TERN_OK) return fail("running the model", s);
    times.push_back(ms_since(t0));
    if (r > 0) {
      cpu_ms += process_cpu_ms() - c0;
      wall_ms += times.back();
    }
  }
  for (size_t j = 0; j < out_names.size(); ++j) print_output(out_names[j], outputs.v[j]);
  if (!out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(out_dir, ec);
    if (ec) {
      std::fprintf(stderr, "tern run: cannot create '%s': %s\n", out_dir.c_str(),
                   ec.message().c_str());
      return 1;
    }
    // A tensor as NAME.npy; a sequence as NAME_0.npy, NAME_1.npy, ...; an optional as what it
    // holds (nothing for an empty one).
    for (size_t j = 0; j < out_names.size(); ++j) {
      std::string err;
      const bool ok = for_each_tensor(outputs.v[j], [&](size_t i, tern_tensor* t) {
        std::string path = out_dir;
        path += "/";
        path += safe_file_name(out_names[j]);
        if (i != static_cast<size_t>(-1)) {
          path += "_";
          path += std::to_string(i);
        }
        path += ".npy";
        if (!err.empty()) return;
        err = write_npy(path, tern_tensor_dtype(t), tern_tensor_shape(t), tern_tensor_rank(t),
                        tern_tensor_data(t), tern_tensor_byte_size(t));
        if (err.empty()) std::printf("wrote %s\n", path.c_str());
      });
      if (!ok) return fail("reading an output", TERN_ERR_INTERNAL);
      if (!err.empty()) {
        std::fprintf(stderr, "tern run: %s\n", err.c_str());
        return 1;
      }
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
  std::printf(
      "cpu: %.2f busy cores during the timed runs (process CPU time / wall time); "
      "peak RSS %.1f MiB\n",
      wall_ms > 0 ? cpu_ms / wall_ms : 0.0,
      static_cast<double>(peak_rss_bytes()) / (1024.0 * 1024.0));
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
    char value[512];  // a CPU list may be long
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
  // Inputs, optional inputs (initializers a run may replace), outputs.
  struct IoKind {
    const char* label;
    size_t (*count)(const tern_model*);
    const char* (*name)(const tern_model*, size_t);
    tern_status (*info)(const tern_model*, size_t, tern_dtype*, size_t*, const int64_t**);
  };
  const IoKind kinds[] = {
      {"input", tern_model_input_count, tern_model_input_name, tern_model_input_info},
      {"optional input", tern_model_optional_input_count, tern_model_optional_input_name,
       tern_model_optional_input_info},
      {"output", tern_model_output_count, tern_model_output_name, tern_model_output_info}};
  for (const IoKind& k : kinds) {
    for (size_t i = 0; i < k.count(model.p); ++i) {
      tern_dtype dt;
      size_t rank;
      const int64_t* shape;
      if ((s = k.info(model.p, i, &dt, &rank, &shape)) != TERN_OK) {
        return fail("reading model info", s);
      }
      tern_value_kind kind = TERN_VALUE_TENSOR;
      int holds_seq = 0;
      if (k.info == tern_model_input_info) {
        s = tern_model_input_kind(model.p, i, &kind, nullptr, &holds_seq);
      } else if (k.info == tern_model_output_info) {
        s = tern_model_output_kind(model.p, i, &kind, nullptr, &holds_seq);
      }
      if (s != TERN_OK) return fail("reading model info", s);
      std::printf("%s '%s': %s\n", k.label, k.name(model.p, i),
                  io_type_text(kind, holds_seq, dt, shape, rank).c_str());
    }
  }
  return 0;
}

int cmd_convert(const std::vector<std::string>& args) {
  RunSetup setup;
  std::string out_path;
  bool optimize = false;
  setup.progress = isatty(2) != 0;  // a bar only where someone watches
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    int r = parse_setup_option("convert", args, i, &setup);
    if (r < 0) return 2;
    if (r > 0) continue;
    if (a == "--optimize") {
      optimize = true;
    } else if (a == "--no-progress") {
      setup.progress = false;
    } else if (a.size() > 1 && a[0] == '-') {
      std::fprintf(stderr, "tern convert: unknown option '%s'\n", a.c_str());
      return 2;
    } else if (setup.model_path.empty()) {
      setup.model_path = a;
    } else if (out_path.empty()) {
      out_path = a;
    } else {
      std::fprintf(stderr, "tern convert: unexpected argument '%s'\n", a.c_str());
      return 2;
    }
  }
  if (setup.model_path.empty() || out_path.empty()) {
    std::fprintf(stderr,
                 "usage: tern convert IN OUT.tern [--optimize [--threads N] [--flag NAME=VALUE]"
                 " [--input NAME=FILE.npy | --shape NAME=1x3x8x8 ...] [--no-progress]]\n");
    return 2;
  }
  if (!optimize) {
    ModelPtr model;
    tern_status s = tern_model_load_file(setup.model_path.c_str(), &model.p);
    if (s != TERN_OK) return fail(("loading " + setup.model_path).c_str(), s);
    if ((s = tern_model_save(model.p, out_path.c_str())) != TERN_OK) {
      return fail(("saving " + out_path).c_str(), s);
    }
    std::printf("wrote %s\n", out_path.c_str());
    return 0;
  }
  Prepared prep;
  if (int rc = prepare("convert", setup, &prep)) return rc;
  tern_status s = TERN_OK;
  if (!setup.input_files.empty() || !setup.input_shapes.empty()) {
    // Dynamic input shapes: one run builds the plan (and packs the weights) for these.
    ValueList outputs;
    outputs.reset(prep.out_names.size());
    s = tern_session_run_values(prep.session.get(), prep.run_options.get(), prep.in_names.data(),
                                prep.values.v.data(), prep.values.v.size(), prep.out_names.data(),
                                prep.out_names.size(), outputs.v.data());
    if (s != TERN_OK) return fail(("running " + setup.model_path).c_str(), s);
  }
  size_t packed = 0;
  if ((s = tern_session_save_optimized(prep.session.get(), out_path.c_str(), &packed)) != TERN_OK) {
    return fail(("saving " + out_path).c_str(), s);
  }
  std::printf("wrote %s (optimized graph, %zu packed weight layouts)\n", out_path.c_str(), packed);
  return 0;
}

}  // namespace tern_cli
