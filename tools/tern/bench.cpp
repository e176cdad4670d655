// `tern bench MODEL`: session creation time, then warm-up runs and timed runs; prints latency
// percentiles, throughput, planned memory and peak RSS, and the share of node time in reference
// kernels per op type (from a profile: --profile's, else a second, profiled session's three
// runs), or one JSON object with --json. Lists of thread counts, inter-op counts or application
// threads make a sweep (bench_sweep.h).
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

#include "c_api.h"
#include "tools/tern/bench_sweep.h"
#include "tools/tern/cli_util.h"
#include "tools/tern/commands.h"

namespace tern_cli {

namespace {

void progress(int done, int total, bool on) {
  if (!on) return;
  const int width = 40;
  int filled = total ? done * width / total : width;
  std::fprintf(stderr, "\r[%.*s%*s] %d/%d runs", filled,
               "========================================", width - filled, "", done, total);
  if (done == total) std::fprintf(stderr, "\r%*s\r", width + 24, "");
  std::fflush(stderr);
}

double percentile(const std::vector<double>& sorted, double q) {
  size_t i = static_cast<size_t>(q * static_cast<double>(sorted.size()));
  return sorted[std::min(sorted.size() - 1, i)];
}

// Where node time goes, from a profile: per op type, the share of all node time spent in
// reference kernels (the portable "reference" ones and oneDNN's "onednn(ref)").
struct KernelReport {
  double total_us = 0, reference_us = 0;
  std::map<std::string, double> reference_by_op;  // op type -> microseconds
  bool ok = false;
};

// The value of "key":"..." or "key":number in one trace line ("" when absent).
std::string field(const std::string& line, const std::string& key) {
  const std::string tag = "\"" + key + "\":";
  size_t at = line.find(tag);
  if (at == std::string::npos) return "";
  at += tag.size();
  if (at < line.size() && line[at] == '"') {
    const size_t end = line.find('"', at + 1);
    return end == std::string::npos ? "" : line.substr(at + 1, end - at - 1);
  }
  size_t end = at;
  while (end < line.size() && (std::isdigit(static_cast<unsigned char>(line[end])) ||
                               line[end] == '.' || line[end] == '-' || line[end] == 'e')) {
    ++end;
  }
  return line.substr(at, end - at);
}

bool is_reference_kernel(const std::string& kernel) {
  return kernel == "reference" || kernel == "onednn(ref)";
}

// Reads the trace the profiler wrote (one event per line).
KernelReport read_profile(const std::string& path) {
  KernelReport r;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("\"cat\":\"node\"") == std::string::npos) continue;
    const double us = std::atof(field(line, "dur").c_str());
    r.total_us += us;
    if (is_reference_kernel(field(line, "kernel"))) {
      r.reference_us += us;
      r.reference_by_op[field(line, "op")] += us;
    }
    r.ok = true;
  }
  return r;
}

// Profiles `runs` runs of a second session of the model (the timed runs stay unprofiled).
KernelReport profile_kernels(const RunSetup& setup, int runs) {
  char path[] = "/tmp/tern_bench_profile_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return {};
  close(fd);
  RunSetup profiled = setup;
  profiled.profile_path = path;
  KernelReport r;
  Prepared p;
  if (prepare("bench", profiled, &p) == 0) {
    bool ran = true;
    for (int i = 0; i < runs && ran; ++i) {
      ValueList outputs;
      outputs.reset(p.out_names.size());
      ran = tern_session_run_values(p.session.get(), p.run_options.get(), p.in_names.data(),
                                    p.values.v.data(), p.values.v.size(), p.out_names.data(),
                                    p.out_names.size(), outputs.v.data()) == TERN_OK;
    }
    if (ran && tern_session_end_profiling(p.session.get()) == TERN_OK) r = read_profile(path);
  }
  std::remove(path);
  return r;
}

// "Pad 8.1%, MaxPool 2.0%" (largest first) for the reference kernels' op types.
std::string reference_ops(const KernelReport& r, bool json) {
  std::vector<std::pair<double, std::string>> ops;
  for (const auto& [op, us] : r.reference_by_op) ops.emplace_back(us, op);
  std::sort(ops.rbegin(), ops.rend());
  std::string out;
  char buf[160];
  for (const auto& [us, op] : ops) {
    const double pct = r.total_us > 0 ? 100.0 * us / r.total_us : 0;
    std::snprintf(buf, sizeof buf, json ? "%s\"%s\":%.2f" : "%s%s %.1f%%", out.empty() ? "" : ", ",
                  op.c_str(), pct);
    out += buf;
  }
  return out;
}

}  // namespace

int cmd_bench(const std::vector<std::string>& args) {
  RunSetup setup;
  int runs = 50, warmup = 5;
  bool json = false, bar = isatty(2) != 0, kernel_report = true;
  SweepOptions sweep;
  std::string format;  // --format: a table even for one combination
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--threads" || a == "--interop" || a == "--concurrency") {
      std::vector<int>* list = a == "--threads"   ? &sweep.threads
                               : a == "--interop" ? &sweep.interop
                                                  : &sweep.concurrency;
      const int lo = a == "--concurrency" ? 1 : 0;
      if (i + 1 >= args.size() ||
          !parse_int_list(args[++i], lo, a == "--concurrency" ? 4096 : 1 << 30, list)) {
        std::fprintf(stderr, "tern bench: %s needs a%s integer or a list like 1,2,4\n", a.c_str(),
                     lo ? " positive" : " non-negative");
        return 2;
      }
      continue;
    }
    if (a == "--format") {
      if (i + 1 >= args.size() ||
          (args[i + 1] != "md" && args[i + 1] != "csv" && args[i + 1] != "json")) {
        std::fprintf(stderr, "tern bench: --format needs md, csv or json\n");
        return 2;
      }
      format = args[++i];
      continue;
    }
    int handled = parse_setup_option("bench", args, i, &setup);
    if (handled < 0) return 2;
    if (handled) continue;
    if (a == "--runs" || a == "--warmup") {
      int* target = a == "--runs" ? &runs : &warmup;
      if (i + 1 >= args.size() || !parse_int(args[++i], a == "--runs" ? 1 : 0, 1 << 30, target)) {
        std::fprintf(stderr, "tern bench: %s needs a%s integer\n", a.c_str(),
                     a == "--runs" ? " positive" : " non-negative");
        return 2;
      }
    } else if (a == "--json") {
      json = true;
    } else if (a == "--no-progress") {
      bar = false;
    } else if (a == "--no-kernel-report") {
      kernel_report = false;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "tern bench: unknown option '%s'\n", a.c_str());
      return 2;
    } else if (setup.model_path.empty()) {
      setup.model_path = a;
    } else {
      std::fprintf(stderr, "tern bench: unexpected argument '%s'\n", a.c_str());
      return 2;
    }
  }
  if (setup.model_path.empty()) {
    std::fprintf(stderr,
                 "usage: tern bench MODEL [--threads N[,N...]] [--interop N[,N...]] "
                 "[--concurrency N[,N...]] [--format md|csv|json] [--cpus LIST] [--runs R] "
                 "[--warmup W] [--input NAME=FILE.npy ...] [--json] [--profile FILE.json] "
                 "[--no-kernel-report]\n");
    return 2;
  }
  // Several values, application threads or a --format: the sweep's table.
  const bool single = sweep.threads.size() == 1 && sweep.interop.size() == 1 &&
                      sweep.concurrency == std::vector<int>{1};
  if (!single || !format.empty()) {
    if (!setup.profile_path.empty()) {
      std::fprintf(stderr, "tern bench: --profile takes one combination, not a sweep\n");
      return 2;
    }
    sweep.runs = runs;
    sweep.warmup = warmup;
    sweep.format = !format.empty() ? format : json ? "json" : "md";
    sweep.progress = bar;
    return run_sweep(setup, sweep);
  }
  setup.threads = sweep.threads[0];
  setup.interop = sweep.interop[0];
  // Held in an optional so the kernel report can end it first (its lists free their tensors and
  // values only when destroyed, not when assigned over).
  std::optional<Prepared> held(std::in_place);
  Prepared& p = *held;
  if (int rc = prepare("bench", setup, &p)) return rc;
  size_t activation_bytes = 0, packed_bytes = 0;
  ValueList outputs;
  std::vector<double> times;
  double first_ms = 0;
  for (int r = 0; r < warmup + runs; ++r) {
    outputs.reset(p.out_names.size());
    auto t0 = Clock::now();
    tern_status s = tern_session_run_values(
        p.session.get(), p.run_options.get(), p.in_names.data(), p.values.v.data(),
        p.values.v.size(), p.out_names.data(), p.out_names.size(), outputs.v.data());
    if (s != TERN_OK) return fail("running the model", s);
    const double ms = ms_since(t0);
    if (r == 0) first_ms = ms;
    if (r >= warmup) times.push_back(ms);
    progress(r + 1, warmup + runs, bar);
  }
  tern_status s = tern_session_memory_info(p.session.get(), &activation_bytes, &packed_bytes);
  if (s != TERN_OK) return fail("reading the memory plan", s);
  if (!setup.profile_path.empty()) {
    if ((s = tern_session_end_profiling(p.session.get())) != TERN_OK) {
      return fail("writing the profile", s);
    }
  }
  const double mean = std::accumulate(times.begin(), times.end(), 0.0) / runs;
  std::sort(times.begin(), times.end());
  const double load_ms = p.load_ms + p.create_ms, model_ms = p.load_ms, create_ms = p.create_ms;
  const size_t rss = peak_rss_bytes();  // before the kernel report's session
  // The count the session's runs used (a default one may be capped by --cpus).
  char threads_text[32] = "0";
  (void)tern_session_flag_get(p.session.get(), "num_threads", threads_text, sizeof threads_text,
                              nullptr);
  const int threads = std::atoi(threads_text);
  KernelReport kr;
  if (kernel_report) {
    held.reset();  // one session at a time
    kr = setup.profile_path.empty() ? profile_kernels(setup, std::min(runs, 3))
                                    : read_profile(setup.profile_path);
  }
  const double ref_pct = kr.total_us > 0 ? 100.0 * kr.reference_us / kr.total_us : 0;
  if (json) {
    std::printf(
        "{\"model\":\"%s\",\"threads\":%d,\"runs\":%d,\"warmup\":%d,\"min_ms\":%.4f,"
        "\"p50_ms\":%.4f,\"p90_ms\":%.4f,\"max_ms\":%.4f,\"mean_ms\":%.4f,"
        "\"throughput_per_s\":%.2f,\"load_ms\":%.3f,\"model_load_ms\":%.3f,"
        "\"session_create_ms\":%.3f,\"first_run_ms\":%.3f,\"activation_bytes\":%zu,\"packed_weight_"
        "bytes\":%zu,"
        "\"peak_rss_bytes\":%zu",
        setup.model_path.c_str(), threads, runs, warmup, times.front(), percentile(times, 0.5),
        percentile(times, 0.9), times.back(), mean, 1000.0 / mean, load_ms, model_ms, create_ms,
        first_ms, activation_bytes, packed_bytes, rss);
    if (kr.ok) {
      std::printf(",\"reference_kernel_percent\":%.2f,\"reference_kernel_ops\":{%s}", ref_pct,
                  reference_ops(kr, true).c_str());
    }
    std::printf("}\n");
  } else {
    std::printf("model %s, threads %d, %d runs after %d warm-up\n", setup.model_path.c_str(),
                threads, runs, warmup);
    std::printf("latency: min %.3f ms, p50 %.3f ms, p90 %.3f ms, max %.3f ms; %.1f runs/s\n",
                times.front(), percentile(times, 0.5), percentile(times, 0.9), times.back(),
                1000.0 / mean);
    std::printf("load: %.2f ms (model %.2f ms + session %.2f ms); first run %.3f ms\n", load_ms,
                model_ms, create_ms, first_ms);
    std::printf(
        "memory: activations %.2f MiB planned, packed weights %.2f MiB, peak RSS %.1f MiB\n",
        static_cast<double>(activation_bytes) / 1048576.0,
        static_cast<double>(packed_bytes) / 1048576.0, static_cast<double>(rss) / 1048576.0);
    if (kr.ok) {
      std::printf("kernels: %.1f%% of node time in reference kernels%s%s%s\n", ref_pct,
                  kr.reference_by_op.empty() ? "" : " (", reference_ops(kr, false).c_str(),
                  kr.reference_by_op.empty() ? "" : ")");
      if (ref_pct > 5.0) {
        std::printf(
            "warning: over 5%% of the run in reference kernels: the ops above have no optimized "
            "kernel for these shapes, dtypes or layouts\n");
      }
    }
    if (!setup.profile_path.empty()) std::printf("profile: %s\n", setup.profile_path.c_str());
  }
  return 0;
}

}  // namespace tern_cli
