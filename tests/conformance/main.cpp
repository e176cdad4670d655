// tern-conformance: runs the ONNX backend node tests (or any corpus of the same layout) on Tern.
//
//   tern-conformance --dir DIR [--json FILE] [--backends LIST] [--filter SUBSTR] [--jobs N]
//                    [--expect LIST_FILE] [--write-passing FILE] [--no-fork] [--timeout S]
//                    [--strict] [--tolerance RTOL,ATOL] [--model-file model.tern]
//
// Each test runs in a child process (fork), so a crash or a hang is recorded as an error of that
// test and the run goes on. The parent never initialises Tern, so forking is safe with OpenMP.
// Under LeakSanitizer each child checks for leaks before it exits and exits nonzero when it found
// one. Prints one line per op (passed/total) and `N passed, N failed`; exits 1 when a test named
// in --expect did not pass (the CI gate), or with --strict when any test's process ended
// abnormally (a crash, a sanitizer's report, a leak: whatever the test's outcome), 77 when --dir
// does not exist and --skip-missing is given.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "test_case.h"

// LeakSanitizer's check, present in sanitizer builds only (a weak reference: null otherwise).
extern "C" int __lsan_do_recoverable_leak_check() __attribute__((weak));

namespace fs = std::filesystem;
using namespace tern_conformance;

namespace {

struct Options {
  std::string dir, json, expect, write_passing, filter;
  RunConfig run;
  int jobs = 0;
  bool fork = true, skip_missing = false, verbose = false, strict = false;
  double timeout = 120;
};

int usage(const char* msg) {
  std::cerr << "tern-conformance: " << msg << "\n"
            << "usage: tern-conformance --dir DIR [--json FILE] [--backends LIST] [--filter S]\n"
            << "       [--jobs N] [--threads N] [--expect FILE] [--write-passing FILE]\n"
            << "       [--timeout SECONDS] [--no-fork] [--skip-missing] [--verbose] [--strict]\n"
            << "       [--tolerance RTOL,ATOL] [--model-file model.tern]\n";
  return 2;
}

std::string one_line(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\t' || c == '\r') c = ' ';
  }
  return s;
}

std::string encode(const CaseResult& r) {
  return tern::str_cat(outcome_name(r.outcome), '\t', r.op, '\t', r.seconds, '\t',
                       one_line(r.detail), '\n');
}

bool decode(std::string line, CaseResult* r) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  std::vector<std::string> f;
  std::stringstream ss(line);
  std::string part;
  while (std::getline(ss, part, '\t')) f.push_back(part);
  if (f.size() < 3) return false;
  for (Outcome o : {Outcome::kPass, Outcome::kFail, Outcome::kUnsupported, Outcome::kError}) {
    if (f[0] == outcome_name(o)) r->outcome = o;
  }
  r->op = f[1];
  r->seconds = std::atof(f[2].c_str());
  r->detail = f.size() > 3 ? f[3] : "";
  return true;
}

constexpr int kLeakExitCode = 23;  // LeakSanitizer's own exit code

struct Child {
  pid_t pid = -1;
  int fd = -1;
  size_t index = 0;
  std::string out;
  std::chrono::steady_clock::time_point start;
};

Child spawn(const std::string& dir, size_t index, const Options& o) {
  int p[2];
  if (pipe(p) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    CaseResult r = run_case(dir, o.run);
    // _exit skips the sanitizer's own exit-time leak check: run it here (every session of the
    // test is gone by now), and say so in the exit status.
    const bool leaked = __lsan_do_recoverable_leak_check && __lsan_do_recoverable_leak_check() != 0;
    std::string line = encode(r);
    size_t off = 0;
    while (off < line.size()) {
      ssize_t w = write(p[1], line.data() + off, line.size() - off);
      if (w <= 0) break;
      off += static_cast<size_t>(w);
    }
    close(p[1]);
    _exit(leaked ? kLeakExitCode : 0);
  }
  close(p[1]);
  Child c;
  c.pid = pid;
  c.fd = p[0];
  c.index = index;
  c.start = std::chrono::steady_clock::now();
  return c;
}

// Collects a finished (or timed-out) child's result.
CaseResult reap(Child& c, const std::string& test, bool timed_out, double timeout) {
  CaseResult r;
  r.test = test;
  if (timed_out) kill(c.pid, SIGKILL);
  int status = 0;
  waitpid(c.pid, &status, 0);
  close(c.fd);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - c.start).count();
  const bool abnormal = !timed_out && (WIFSIGNALED(status) || WEXITSTATUS(status) != 0);
  if (timed_out) {
    r.outcome = Outcome::kError;
    r.detail = tern::str_cat("timed out after ", timeout, " s");
  } else if (!decode(c.out, &r)) {
    r.outcome = Outcome::kError;
    r.detail = WIFSIGNALED(status) ? tern::str_cat("crashed: signal ", WTERMSIG(status), " (",
                                                   strsignal(WTERMSIG(status)), ")")
                                   : tern::str_cat("child exited with status ", WEXITSTATUS(status),
                                                   " and no result");
  } else if (abnormal) {
    // A result, then a report at the end (a leak) or a crash while tearing down.
    r.outcome = Outcome::kError;
    r.detail =
        tern::str_cat(WIFSIGNALED(status) ? tern::str_cat("signal ", WTERMSIG(status))
                                          : tern::str_cat("exit status ", WEXITSTATUS(status)),
                      WIFEXITED(status) && WEXITSTATUS(status) == kLeakExitCode ? " (a leak)" : "",
                      " after its result: ", r.detail);
  }
  r.abnormal_end = abnormal;
  r.seconds = secs;
  return r;
}

std::vector<CaseResult> run_all(const std::vector<std::string>& dirs, const Options& o) {
  std::vector<CaseResult> results(dirs.size());
  if (!o.fork) {
    for (size_t i = 0; i < dirs.size(); ++i) {
      results[i] = run_case(dirs[i], o.run);
      if (o.verbose) std::cerr << dirs[i] << ": " << outcome_name(results[i].outcome) << "\n";
    }
    return results;
  }
  const int jobs = std::max(1, o.jobs);
  std::vector<Child> running;
  size_t next = 0;
  while (next < dirs.size() || !running.empty()) {
    while (next < dirs.size() && static_cast<int>(running.size()) < jobs) {
      Child c = spawn(dirs[next], next, o);
      if (c.pid < 0) {
        results[next].test = fs::path(dirs[next]).filename().string();
        results[next].detail = "fork failed";
      } else {
        running.push_back(c);
      }
      ++next;
    }
    std::vector<pollfd> fds;
    for (const Child& c : running) fds.push_back({c.fd, POLLIN, 0});
    poll(fds.data(), fds.size(), 200);
    for (size_t k = 0; k < running.size();) {
      Child& c = running[k];
      bool done = false;
      if (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[4096];
        ssize_t n = read(c.fd, buf, sizeof buf);
        if (n > 0) {
          c.out.append(buf, static_cast<size_t>(n));
        } else {
          done = true;
        }
      }
      const double age =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - c.start).count();
      const bool timed_out = !done && age > o.timeout;
      if (done || timed_out) {
        const std::string test = fs::path(dirs[c.index]).filename().string();
        CaseResult r = reap(c, test, timed_out, o.timeout);
        if (r.op.empty()) r.op = op_under_test(dirs[c.index]);
        if (o.verbose) std::cerr << test << ": " << outcome_name(r.outcome) << "\n";
        results[c.index] = r;
        running.erase(running.begin() + static_cast<long>(k));
        fds.erase(fds.begin() + static_cast<long>(k));
        continue;
      }
      ++k;
    }
  }
  return results;
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '"':
        o += "\\\"";
        break;
      case '\\':
        o += "\\\\";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          o += b;
        } else {
          o += c;
        }
    }
  }
  return o;
}

void write_json(const std::string& path, const std::vector<CaseResult>& rs) {
  std::ofstream f(path);
  f << "[\n";
  for (size_t i = 0; i < rs.size(); ++i) {
    const CaseResult& r = rs[i];
    f << "  {\"test\": \"" << json_escape(r.test) << "\", \"op\": \"" << json_escape(r.op)
      << "\", \"result\": \"" << outcome_name(r.outcome) << "\", \"seconds\": " << r.seconds
      << ", \"detail\": \"" << json_escape(r.detail) << "\"}" << (i + 1 < rs.size() ? "," : "")
      << "\n";
  }
  f << "]\n";
}

std::set<std::string> read_list(const std::string& path, bool* ok) {
  std::set<std::string> s;
  std::ifstream f(path);
  *ok = static_cast<bool>(f);
  std::string line;
  while (std::getline(f, line)) {
    if (!line.empty() && line[0] != '#') s.insert(line);
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--no-fork") {
      o.fork = false;
    } else if (a == "--skip-missing") {
      o.skip_missing = true;
    } else if (a == "--verbose") {
      o.verbose = true;
    } else if (a == "--strict") {
      o.strict = true;
    } else if ((v = next()) == nullptr) {
      return usage(("missing value for " + a).c_str());
    } else if (a == "--dir") {
      o.dir = v;
    } else if (a == "--json") {
      o.json = v;
    } else if (a == "--expect") {
      o.expect = v;
    } else if (a == "--write-passing") {
      o.write_passing = v;
    } else if (a == "--filter") {
      o.filter = v;
    } else if (a == "--jobs") {
      o.jobs = std::atoi(v);
    } else if (a == "--tolerance") {
      // RTOL,ATOL for every test (a model corpus), instead of the node tests' rules.
      if (std::sscanf(v, "%lf,%lf", &o.run.rtol, &o.run.atol) != 2) {
        return usage("--tolerance takes RTOL,ATOL");
      }
      o.run.tolerance_given = true;
    } else if (a == "--model-file") {
      o.run.model_file = v;
    } else if (a == "--threads") {
      o.run.threads = std::max(1, std::atoi(v));
    } else if (a == "--timeout") {
      o.timeout = std::atof(v);
    } else if (a == "--backends") {
      o.run.backends.clear();
      std::stringstream ss(v);
      std::string b;
      while (std::getline(ss, b, ',')) {
        if (!b.empty()) o.run.backends.push_back(b);
      }
    } else {
      return usage(("unknown option " + a).c_str());
    }
  }
  if (o.dir.empty()) return usage("--dir is required");
  if (!fs::is_directory(o.dir)) {
    std::cout << "tern-conformance: corpus directory '" << o.dir << "' does not exist"
              << (o.skip_missing ? "; skipping" : "") << "\n";
    return o.skip_missing ? 77 : 2;
  }
  if (o.jobs <= 0) o.jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  std::vector<std::string> dirs;
  for (const auto& e : fs::directory_iterator(o.dir)) {
    if (!e.is_directory() || !fs::exists(e.path() / "model.onnx")) continue;
    const std::string name = e.path().filename().string();
    if (!o.filter.empty() && name.find(o.filter) == std::string::npos) continue;
    dirs.push_back(e.path().string());
  }
  std::sort(dirs.begin(), dirs.end());
  if (dirs.empty()) {
    std::cout << "tern-conformance: no test directories (with model.onnx) under " << o.dir << "\n";
    return 2;
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<CaseResult> results = run_all(dirs, o);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::map<std::string, std::pair<int, int>> per_op;  // op -> passed, total
  int passed = 0, unsupported = 0, errors = 0, failed = 0;
  std::vector<std::string> exceptions;
  for (const CaseResult& r : results) {
    auto& po = per_op[r.op];
    ++po.second;
    switch (r.outcome) {
      case Outcome::kPass:
        ++passed, ++po.first;
        if (!r.detail.empty()) exceptions.push_back(r.test + ": " + r.detail);
        break;
      case Outcome::kFail:
        ++failed;
        break;
      case Outcome::kUnsupported:
        ++unsupported;
        break;
      case Outcome::kError:
        ++errors;
        break;
    }
  }
  std::cout << "== per op (passed/total) ==\n";
  for (const auto& [op, c] : per_op) {
    std::printf("%-34s %3d/%-3d%s\n", op.c_str(), c.first, c.second,
                c.first == c.second ? "" : "  <");
  }
  if (!exceptions.empty()) {
    std::cout << "== passed with a named exception ==\n";
    for (const auto& e : exceptions) std::cout << "  " << e << "\n";
  }
  if (o.verbose) {
    std::cout << "== not passing ==\n";
    for (const CaseResult& r : results) {
      if (r.outcome != Outcome::kPass) {
        std::cout << "  " << r.test << " [" << outcome_name(r.outcome) << "] " << r.detail << "\n";
      }
    }
  }
  const int total = static_cast<int>(results.size());
  std::printf(
      "%d tests in %.1f s: %d passed, %d failed (%d wrong results, %d unsupported, "
      "%d errors); %.1f%% passed\n",
      total, secs, passed, total - passed, failed, unsupported, errors, 100.0 * passed / total);
  std::printf("%d passed, %d failed\n", passed, total - passed);
  if (!o.json.empty()) write_json(o.json, results);
  if (!o.write_passing.empty()) {
    std::ofstream f(o.write_passing);
    f << "# Conformance tests that pass; CI fails when one of them stops passing.\n"
      << "# Regenerate: tern-conformance --dir ../shared/conformance/onnx-node --write-passing "
         "tests/conformance/passing.txt\n";
    for (const CaseResult& r : results) {
      if (r.outcome == Outcome::kPass) f << r.test << "\n";
    }
  }
  int abnormal = 0;
  for (const CaseResult& r : results) {
    if (!r.abnormal_end) continue;
    ++abnormal;
    if (o.strict) std::cout << "ABNORMAL END " << r.test << ": " << r.detail << "\n";
  }
  if (o.strict && abnormal) {
    std::cout << abnormal << " test process(es) ended abnormally (see the reports above)\n";
    return 1;
  }
  if (!o.expect.empty()) {
    bool ok = false;
    std::set<std::string> expected = read_list(o.expect, &ok);
    if (!ok) {
      std::cout << "cannot read the expected list " << o.expect << "\n";
      return 1;
    }
    int regressions = 0;
    std::set<std::string> seen;
    for (const CaseResult& r : results) {
      seen.insert(r.test);
      if (expected.count(r.test) && r.outcome != Outcome::kPass) {
        std::cout << "REGRESSION " << r.test << " [" << outcome_name(r.outcome) << "] " << r.detail
                  << "\n";
        ++regressions;
      }
    }
    for (const std::string& t : expected) {
      if (!seen.count(t) && o.filter.empty()) {
        std::cout << "REGRESSION " << t << ": listed as passing but not in the corpus\n";
        ++regressions;
      }
    }
    if (regressions) {
      std::cout << regressions << " listed test(s) no longer pass\n";
      return 1;
    }
    std::cout << "all " << expected.size() << " listed tests pass\n";
  }
  return 0;
}
