#include "tools/tern/bench_sweep.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace tern_cli {

namespace {

struct Row {
  int threads = 0, interop = 0, concurrency = 0, runs = 0;
  double p50_ms = 0, p90_ms = 0, p99_ms = 0, throughput = 0, busy_cores = 0;
  size_t peak_rss = 0;
};

double percentile(const std::vector<double>& sorted, double q) {
  const size_t i = static_cast<size_t>(q * static_cast<double>(sorted.size()));
  return sorted[std::min(sorted.size() - 1, i)];
}

// A flag's value for the session, as an int (0 when it cannot be read).
int session_int_flag(tern_session* s, const char* name) {
  char buf[32];
  return tern_session_flag_get(s, name, buf, sizeof buf, nullptr) == TERN_OK ? std::atoi(buf) : 0;
}

// One combination: `concurrency` threads each run p's session `warmup` times, wait for the others,
// then run it `runs` times. Returns 0 or the exit code after printing why.
int measure(const RunSetup& setup, const Prepared& p, int concurrency, int runs, int warmup,
            Row* row) {
  std::mutex mu;
  std::condition_variable cv;
  int warmed = 0;
  bool go = false;
  tern_status failed = TERN_OK;
  std::string failure;
  std::vector<std::vector<double>> times(static_cast<size_t>(concurrency));
  std::vector<RunOptionsPtr> options(static_cast<size_t>(concurrency));
  for (auto& o : options) {
    if (int rc = make_run_options(setup, &o)) return rc;
  }
  auto worker = [&](size_t k) {
    ValueList outputs;
    auto run_once = [&]() {
      outputs.reset(p.out_names.size());
      const tern_status s = tern_session_run_values(
          p.session.get(), options[k].get(), p.in_names.data(), p.values.v.data(),
          p.values.v.size(), p.out_names.data(), p.out_names.size(), outputs.v.data());
      if (s != TERN_OK) {
        std::lock_guard<std::mutex> lock(mu);
        if (failed == TERN_OK) failed = s, failure = tern_last_error();
      }
      return s == TERN_OK;
    };
    bool ok = true;
    for (int r = 0; r < warmup && ok; ++r) ok = run_once();
    {
      std::unique_lock<std::mutex> lock(mu);
      ++warmed;
      cv.notify_all();
      cv.wait(lock, [&] { return go; });
    }
    for (int r = 0; r < runs && ok; ++r) {
      const auto t0 = Clock::now();
      ok = run_once();
      times[k].push_back(ms_since(t0));
    }
  };
  std::vector<std::thread> threads;
  for (size_t k = 0; k < static_cast<size_t>(concurrency); ++k) threads.emplace_back(worker, k);
  Clock::time_point t0;
  double cpu0 = 0;
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return warmed == concurrency; });
    t0 = Clock::now();
    cpu0 = process_cpu_ms();
    go = true;
    cv.notify_all();
  }
  for (std::thread& t : threads) t.join();
  const double wall_ms = ms_since(t0), cpu_ms = process_cpu_ms() - cpu0;
  if (failed != TERN_OK) {
    std::fprintf(stderr, "tern: running the model failed: %s: %s\n", tern_status_name(failed),
                 failure.c_str());
    return 1;
  }
  std::vector<double> all;
  for (const auto& t : times) all.insert(all.end(), t.begin(), t.end());
  std::sort(all.begin(), all.end());
  row->concurrency = concurrency;
  row->runs = static_cast<int>(all.size());
  row->p50_ms = percentile(all, 0.5);
  row->p90_ms = percentile(all, 0.9);
  row->p99_ms = percentile(all, 0.99);
  row->throughput = wall_ms > 0 ? 1000.0 * static_cast<double>(all.size()) / wall_ms : 0;
  row->busy_cores = wall_ms > 0 ? cpu_ms / wall_ms : 0;
  row->peak_rss = peak_rss_bytes();
  return 0;
}

void print_rows(const std::string& model, const std::vector<Row>& rows, const std::string& format,
                bool rss_reset) {
  const double mib = 1024.0 * 1024.0;
  if (format == "csv") {
    std::printf(
        "threads,interop,concurrency,runs,p50_ms,p90_ms,p99_ms,throughput_per_s,busy_cores,"
        "peak_rss_bytes\n");
    for (const Row& r : rows) {
      std::printf("%d,%d,%d,%d,%.4f,%.4f,%.4f,%.2f,%.2f,%zu\n", r.threads, r.interop, r.concurrency,
                  r.runs, r.p50_ms, r.p90_ms, r.p99_ms, r.throughput, r.busy_cores, r.peak_rss);
    }
  } else if (format == "json") {
    std::printf("{\"model\":\"%s\",\"peak_rss_per_row\":%s,\"rows\":[\n", model.c_str(),
                rss_reset ? "true" : "false");
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::printf(
          "{\"threads\":%d,\"interop\":%d,\"concurrency\":%d,\"runs\":%d,\"p50_ms\":%.4f,"
          "\"p90_ms\":%.4f,\"p99_ms\":%.4f,\"throughput_per_s\":%.2f,\"busy_cores\":%.2f,\"peak_"
          "rss_bytes\":%zu}"
          "%s\n",
          r.threads, r.interop, r.concurrency, r.runs, r.p50_ms, r.p90_ms, r.p99_ms, r.throughput,
          r.busy_cores, r.peak_rss, i + 1 < rows.size() ? "," : "");
    }
    std::printf("]}\n");
  } else {
    std::printf("model %s%s\n\n", model.c_str(),
                rss_reset ? "" : " (peak RSS: the process's since its start)");
    std::printf(
        "| threads | interop | concurrency |   runs |   p50 ms |   p90 ms |   p99 ms |    runs/s "
        "| busy cores | peak RSS MiB |\n");
    std::printf(
        "|--------:|--------:|------------:|-------:|---------:|---------:|---------:|----------:"
        "|-----------:|-------------:|\n");
    for (const Row& r : rows) {
      std::printf("| %7d | %7d | %11d | %6d | %8.3f | %8.3f | %8.3f | %9.1f | %10.2f | %12.1f |\n",
                  r.threads, r.interop, r.concurrency, r.runs, r.p50_ms, r.p90_ms, r.p99_ms,
                  r.throughput, r.busy_cores, static_cast<double>(r.peak_rss) / mib);
    }
  }
}

}  // namespace

int run_sweep(const RunSetup& base, const SweepOptions& o) {
  std::vector<Row> rows;
  bool rss_reset = true;
  const size_t total = o.threads.size() * o.interop.size() * o.concurrency.size();
  for (int threads : o.threads) {
    for (int interop : o.interop) {
      RunSetup setup = base;
      setup.threads = threads;
      setup.interop = interop;
      Prepared p;
      if (int rc = prepare("bench", setup, &p)) return rc;
      for (int concurrency : o.concurrency) {
        if (o.progress) {
          std::fprintf(stderr, "\rsweep %zu/%zu: threads %d, interop %d, concurrency %d   ",
                       rows.size() + 1, total, threads, interop, concurrency);
          std::fflush(stderr);
        }
        rss_reset = reset_peak_rss() && rss_reset;
        Row row;
        if (int rc = measure(setup, p, concurrency, o.runs, o.warmup, &row)) return rc;
        row.threads = session_int_flag(p.session.get(), "num_threads");
        row.interop = session_int_flag(p.session.get(), "num_interop_threads");
        rows.push_back(row);
      }
    }
  }
  if (o.progress) std::fprintf(stderr, "\r%*s\r", 70, "");
  print_rows(base.model_path, rows, o.format, rss_reset);
  return 0;
}

}  // namespace tern_cli
