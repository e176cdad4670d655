// The `tern` CLI end to end: reference inputs in as .npy, outputs back as .npy, exit codes.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "graph_builder.h"
#include "serialization/model_io.h"
#include "subgraph_builder.h"
#include "test_util.h"
#include "tools/tern/npy.h"

using namespace tern_test;

namespace {

struct Result {
  int code;
  std::string output;
};

Result run_cli(const std::string& args) {
  std::string cmd = std::string(TERN_CLI_PATH) + " " + args + " 2>&1";
  Result r{-1, ""};
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

void check_model_via_cli(const std::string& name, const std::string& model_arg) {
  tern_model* model = nullptr;
  REQUIRE(tern_model_load_file((model_dir(name) + "/model.onnx").c_str(), &model) == TERN_OK);
  ReferenceCase rc = load_reference_case(model_dir(name), model);
  tern_model_destroy(model);
  const std::string dir = "cli_out_" + name;
  std::filesystem::create_directories(dir);
  std::string inputs;
  for (size_t i = 0; i < rc.inputs.size(); ++i) {
    const tern::Tensor& t = rc.inputs[i];
    std::string path = dir + "/in" + std::to_string(i) + ".npy";
    REQUIRE(tern_cli::write_npy(path, static_cast<tern_dtype>(t.dtype()), t.shape().data(),
                                t.rank(), t.raw(), t.byte_size()) == "");
    inputs += " --input " + rc.input_names[i] + "=" + path;
  }
  Result r = run_cli("run " + model_arg + inputs + " --runs 2 --threads 2 --output-dir " + dir);
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(r.output.find("latency:") != std::string::npos);
  for (size_t i = 0; i < rc.outputs.size(); ++i) {
    std::string file = rc.output_names[i];
    for (char& c : file) {
      if (c == '/' || c == ':') c = '_';
    }
    tern_cli::NpyArray a;
    REQUIRE(tern_cli::read_npy(dir + "/" + file + ".npy", &a) == "");
    CHECK(a.shape == rc.outputs[i].shape());
    Comparison c =
        compare(reinterpret_cast<const float*>(a.data.data()), rc.outputs[i].data<float>(),
                static_cast<size_t>(rc.outputs[i].numel()), 1e-3, 1e-4);
    MESSAGE(name, " via CLI: max abs err ", c.max_abs, ", mismatches ", c.mismatches);
    CHECK(c.mismatches == 0);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace

TEST_SUITE("cli") {
  TEST_CASE("tern COMMAND --help prints that command's usage; tern --help all of them") {
    for (const char* cmd : {"run", "bench", "inspect", "check", "info", "convert"}) {
      CAPTURE(std::string(cmd));
      Result r = run_cli(std::string(cmd) + " --help");
      CHECK(r.code == 0);
      CHECK(r.output.find(std::string("  tern ") + cmd + " ") != std::string::npos);
      CHECK(r.output.find("unknown option") == std::string::npos);
      // Only its own section.
      const std::string other = std::string(cmd) == "run" ? "tern bench" : "tern run";
      CHECK(r.output.find(other) == std::string::npos);
    }
    Result all = run_cli("--help");
    CHECK(all.code == 0);
    for (const char* cmd : {"run", "bench", "inspect", "check", "info", "convert", "--version"}) {
      CHECK(all.output.find(std::string("  tern ") + cmd) != std::string::npos);
    }
    CHECK(run_cli("bench MODEL -h").code == 0);
  }

  TEST_CASE("tern info prints version, build, backends and capability") {
    Result r = run_cli("info");
    CHECK(r.code == 0);
    CHECK(r.output.find("Tern 0.1.0") != std::string::npos);
    CHECK(r.output.find("CPU capability:") != std::string::npos);
    CHECK(r.output.find(tern_cuda_is_built() ? "cuda built=1" : "cuda built=0") !=
          std::string::npos);
  }

  TEST_CASE("sequences and optionals: inputs from lists of .npy files, one .npy per element out") {
    const std::string model =
        std::string(TERN_SOURCE_DIR) + "/tests/fuzz/corpus/tern_loader/sequences.tern";
    Result info = run_cli("info " + model);
    INFO(info.output);
    CHECK(info.output.find("input 'seq': sequence of float32 [2]") != std::string::npos);
    CHECK(info.output.find("output 'wrapped': optional sequence of float32 [2]") !=
          std::string::npos);
    const std::string dir = "cli_out_sequences";
    std::filesystem::create_directories(dir);
    auto write = [&](const std::string& name, std::vector<float> v, std::vector<int64_t> shape) {
      const std::string path = dir + "/" + name + ".npy";
      REQUIRE(tern_cli::write_npy(path, TERN_FLOAT32, shape.data(), shape.size(), v.data(),
                                  v.size() * sizeof(float)) == "");
      return path;
    };
    const std::string a = write("a", {1, 2}, {2}), b = write("b", {3, 4}, {2});
    const std::string x = write("x", {5, 6, 7, 8, 9, 10}, {3, 2}), extra = write("e", {0, 0}, {2});
    Result r = run_cli("run " + model + " --runs 1 --input seq=" + a + "," + b + " --input x=" + x +
                       " --input extra=" + extra + " --output-dir " + dir);
    INFO(r.output);
    REQUIRE(r.code == 0);
    CHECK(r.output.find("output 'same': sequence of 2") != std::string::npos);
    CHECK(r.output.find("output 'wrapped': optional, holds") != std::string::npos);
    tern_cli::NpyArray joined, part2, longer2;
    REQUIRE(tern_cli::read_npy(dir + "/joined.npy", &joined) == "");
    CHECK(joined.shape == std::vector<int64_t>{4});
    const float* j = reinterpret_cast<const float*>(joined.data.data());
    CHECK((j[0] == 1 && j[1] == 2 && j[2] == 3 && j[3] == 4));
    REQUIRE(tern_cli::read_npy(dir + "/parts_2.npy", &part2) == "");  // SplitToSequence's third
    CHECK(reinterpret_cast<const float*>(part2.data.data())[1] == 10);
    REQUIRE(tern_cli::read_npy(dir + "/longer_2.npy", &longer2) == "");
    CHECK(std::filesystem::exists(dir + "/wrapped_1.npy"));
    // An empty sequence: ConcatFromSequence refuses it by name, the CLI exits 1.
    Result empty = run_cli("run " + model + " --runs 1 --input seq= --input x=" + x);
    CHECK(empty.code == 1);
    CHECK(empty.output.find("empty sequence") != std::string::npos);
    std::filesystem::remove_all(dir);
  }

  TEST_CASE("tern bench reports the share of node time in reference kernels, warns above 5%") {
    // Trilu has only its portable reference kernel: a model of one is all reference time.
    GraphMaker m;
    m.g.opset = 17;
    const int x =
        m.g.add_value("x", tern::ValueType{tern::DType::kFloat32, true, {{512, ""}, {512, ""}}});
    m.g.inputs.push_back(x);
    m.g.outputs.push_back(m.node("Trilu", {x}));
    const std::string model = "cli_bench_trilu.tern";
    REQUIRE(tern::serialization::save_tern(m.g, model).is_ok());
    Result r = run_cli("bench " + model + " --runs 3 --warmup 1 --no-progress");
    INFO(r.output);
    REQUIRE(r.code == 0);
    CHECK(r.output.find("of node time in reference kernels (Trilu") != std::string::npos);
    CHECK(r.output.find("warning: over 5%") != std::string::npos);
    Result j = run_cli("bench " + model + " --runs 3 --warmup 1 --json");
    CHECK(j.output.find("\"reference_kernel_ops\":{\"Trilu\":") != std::string::npos);
    // The conv model of the fuzz corpus runs on optimized kernels only: no warning.
    Result conv =
        run_cli("bench " + std::string(TERN_SOURCE_DIR) +
                "/tests/fuzz/corpus/tern_loader/conv.tern --runs 3 --warmup 1 --no-progress");
    INFO(conv.output);
    CHECK(conv.code == 0);
    CHECK(conv.output.find("kernels: ") != std::string::npos);
    if (tern_onednn_is_available()) CHECK(conv.output.find("warning:") == std::string::npos);
    // --no-kernel-report leaves the line out.
    CHECK(run_cli("bench " + model + " --runs 1 --no-kernel-report").output.find("kernels:") ==
          std::string::npos);
    std::filesystem::remove(model);
  }

  TEST_CASE("tern bench sweeps threads x inter-op x concurrency: one row per combination") {
    const std::string model =
        std::string(TERN_SOURCE_DIR) + "/tests/fuzz/corpus/tern_loader/conv.tern";
    const std::string sweep = "bench " + model +
                              " --threads 1,2 --interop 1 --concurrency 1,3 --runs 2 --warmup 1"
                              " --no-progress --format ";
    auto lines = [](const std::string& text) {
      std::vector<std::string> out;
      std::istringstream in(text);
      for (std::string l; std::getline(in, l);) out.push_back(l);
      return out;
    };
    auto split = [](const std::string& line) {
      std::vector<std::string> cols;
      std::istringstream in(line);
      for (std::string c; std::getline(in, c, ',');) cols.push_back(c);
      return cols;
    };
    Result csv = run_cli(sweep + "csv");
    INFO(csv.output);
    REQUIRE(csv.code == 0);
    const std::vector<std::string> rows = lines(csv.output);
    REQUIRE(rows.size() == 5);  // header + 2 thread counts x 1 x 2 concurrencies
    CHECK(rows[0] ==
          "threads,interop,concurrency,runs,p50_ms,p90_ms,p99_ms,throughput_per_s,busy_cores,"
          "peak_rss_bytes");
    const int want[4][4] = {{1, 1, 1, 2}, {1, 1, 3, 6}, {2, 1, 1, 2}, {2, 1, 3, 6}};
    for (size_t r = 1; r < rows.size(); ++r) {
      const std::vector<std::string> c = split(rows[r]);
      REQUIRE(c.size() == 10);
      for (size_t k = 0; k < 4; ++k) CHECK(std::stoi(c[k]) == want[r - 1][k]);
      CHECK(std::stod(c[4]) > 0);                 // p50
      CHECK(std::stod(c[5]) >= std::stod(c[4]));  // p90 >= p50
      CHECK(std::stod(c[6]) >= std::stod(c[5]));  // p99 >= p90
      CHECK(std::stod(c[7]) > 0);                 // throughput
      CHECK(std::stod(c[8]) > 0);                 // busy cores
      CHECK(std::stoull(c[9]) > 1024 * 1024);     // peak RSS
    }
    Result json = run_cli(sweep + "json");
    INFO(json.output);
    REQUIRE(json.code == 0);
    size_t objects = 0;
    for (const std::string& l : lines(json.output)) {
      if (l.rfind("{\"threads\":", 0) != 0) continue;
      ++objects;
      for (const char* key :
           {"\"interop\":", "\"concurrency\":", "\"runs\":", "\"p50_ms\":", "\"p90_ms\":",
            "\"p99_ms\":", "\"throughput_per_s\":", "\"busy_cores\":", "\"peak_rss_bytes\":"}) {
        CHECK(l.find(key) != std::string::npos);
      }
    }
    CHECK(objects == 4);
    CHECK(json.output.find("\"rows\":[") != std::string::npos);
    // --json on a sweep is --format json; markdown is the default table.
    CHECK(run_cli("bench " + model + " --threads 1,2 --runs 1 --warmup 0 --json --no-progress")
              .output.find("\"rows\":[") != std::string::npos);
    Result md = run_cli("bench " + model + " --concurrency 2 --runs 1 --warmup 0 --no-progress");
    INFO(md.output);
    CHECK(md.output.find("| threads | interop | concurrency |") != std::string::npos);
    size_t table_rows = 0;
    for (const std::string& l : lines(md.output)) table_rows += l.rfind("| ", 0) == 0;
    CHECK(table_rows == 2);  // header + one combination
    // Single values keep the one-combination report.
    Result one = run_cli("bench " + model + " --threads 1 --runs 2 --warmup 0 --no-progress");
    CHECK(one.output.find("latency: min ") != std::string::npos);
    // Bad lists are refused.
    CHECK(run_cli("bench " + model + " --threads 1,,2").code == 2);
    CHECK(run_cli("bench " + model + " --concurrency 0").code == 2);
    CHECK(run_cli("bench " + model + " --format xml").code == 2);
  }

  TEST_CASE("--cpus pins runs to a CPU list; bad lists are refused by name") {
    const std::string model =
        std::string(TERN_SOURCE_DIR) + "/tests/fuzz/corpus/tern_loader/conv.tern";
    Result ok = run_cli("run " + model + " --runs 1 --cpus 0");
    INFO(ok.output);
    CHECK(ok.code == 0);
    for (const char* bad : {"0-", "a", "3-1", "100000"}) {
      Result r = run_cli("bench " + model + " --runs 1 --cpus " + bad);
      INFO(r.output);
      CHECK(r.code == 1);
      CHECK(r.output.find("--cpus failed: TERN_ERR_INVALID_ARGUMENT: flag 'cpu.affinity': CPU "
                          "list") != std::string::npos);
    }
  }

  TEST_CASE("bad command lines exit non-zero with a message") {
    CHECK(run_cli("").code == 2);
    CHECK(run_cli("frobnicate").code == 2);
    CHECK(run_cli("run").code == 2);
    CHECK(run_cli("run m.onnx --threads many").code == 2);
    CHECK(run_cli("run m.onnx --input broken").code == 2);
    Result r = run_cli("run /nonexistent/model.onnx");
    CHECK(r.code == 1);
    CHECK(r.output.find("TERN_ERR_IO") != std::string::npos);
    CHECK(run_cli("convert only_one_arg").code == 2);
  }

  TEST_CASE("malformed .npy files are errors before anything is allocated, never aborts") {
    // A version-1 .npy with `header` (padded to 64 bytes) and `data_bytes` zero bytes of data.
    auto write = [](const std::string& path, std::string header, size_t data_bytes) {
      header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
      header += '\n';
      std::ofstream f(path, std::ios::binary);
      f.write("\x93NUMPY\x01\x00", 8);
      const char len[2] = {static_cast<char>(header.size() & 0xff),
                           static_cast<char>(header.size() >> 8)};
      f.write(len, 2);
      f << header << std::string(data_bytes, '\0');
    };
    const std::string dir = std::filesystem::temp_directory_path() / "tern_cli_npy";
    std::filesystem::create_directories(dir);
    struct Case {
      const char* file;
      std::string header;
      size_t data;
      const char* says;
    };
    const Case cases[] = {
        {"huge", "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 100000, 100000), }", 64,
         "needs 120000000000"},
        {"short", "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4), }", 60, "needs 64"},
        {"unterminated", "{'descr': '<f4', 'fortran_order': False, 'shape': (4, ", 64,
         "not a terminated dict"},
        {"noshape", "{'descr': '<f4', 'fortran_order': False, }", 4, "no shape tuple"},
        {"badshape", "{'descr': '<f4', 'fortran_order': False, 'shape': (4x, 2), }", 32,
         "bad .npy shape"},
    };
    for (const Case& c : cases) {
      const std::string path = dir + "/" + c.file + ".npy";
      write(path, c.header, c.data);
      tern_cli::NpyArray a;
      const std::string err = tern_cli::read_npy(path, &a);
      CHECK_MESSAGE(err.find(c.says) != std::string::npos, c.file, ": ", err);
    }
    tern_cli::NpyArray ok;
    write(dir + "/ok.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4), }", 64);
    CHECK(tern_cli::read_npy(dir + "/ok.npy", &ok) == "");
    CHECK(ok.data.size() == 64);
    if (have_shared_models()) {
      const std::string model = model_dir("ppocr_cls") + "/model.onnx";
      Result huge = run_cli("run " + model + " --input x=" + dir + "/huge.npy");
      CHECK(huge.code == 1);  // not 134 (std::bad_alloc)
      CHECK(huge.output.find("needs 120000000000") != std::string::npos);
      // An unknown name in --shape is an error, not ignored.
      Result shape = run_cli("run " + model + " --zeros --runs 1 --shape nosuch=1x3x48x192");
      CHECK(shape.code != 0);
      CHECK(shape.output.find("nosuch") != std::string::npos);
    }
    std::filesystem::remove_all(dir);
  }

  TEST_CASE("tern run --timeout stops a run that takes longer: exit 124, the status named") {
    // A Loop of (nearly) endless iterations, and one of 3; M and h0 given as .npy files.
    const std::string dir = std::filesystem::temp_directory_path() / "tern_cli_timeout";
    std::filesystem::create_directories(dir);
    std::mt19937 rng(4);
    const std::string model = dir + "/loop.tern";
    REQUIRE(
        tern::serialization::save_tern(tanh_loop_graph(random_f32({16, 16}, rng)), model).is_ok());
    auto write_m = [&](const std::string& name, int64_t trips) {
      const std::string path = dir + "/" + name + ".npy";
      REQUIRE(tern_cli::write_npy(path, TERN_INT64, nullptr, 0, &trips, sizeof trips) == "");
      return path;
    };
    const std::string h0 = " --input h0=" + dir + "/h0.npy";
    const tern::Tensor h = random_f32({1, 16}, rng);
    REQUIRE(tern_cli::write_npy(dir + "/h0.npy", TERN_FLOAT32, h.shape().data(), 2, h.raw(),
                                h.byte_size()) == "");
    const auto t0 = std::chrono::steady_clock::now();
    Result late = run_cli("run " + model + " --input M=" + write_m("endless", int64_t{1} << 40) +
                          h0 + " --runs 1 --timeout 100");
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    INFO(late.output);
    MESSAGE("tern run --timeout 100 on an endless Loop exited after ", took, " s");
    CHECK(late.code == 124);
    CHECK(late.output.find("TERN_ERR_DEADLINE_EXCEEDED") != std::string::npos);
    Result quick = run_cli("run " + model + " --input M=" + write_m("three", 3) + h0 +
                           " --runs 2 --timeout 60000");
    INFO(quick.output);
    CHECK(quick.code == 0);
    CHECK(quick.output.find("latency:") != std::string::npos);
    CHECK(run_cli("run " + model + " --timeout -5").code == 2);
    CHECK(run_cli("run " + model + " --timeout").code == 2);
    std::filesystem::remove_all(dir);
  }

  TEST_CASE("tern convert --optimize: no bar off a terminal, the same file as --no-progress") {
    // run_cli reads stderr through a pipe: not a terminal.
    const std::string a = "progress_a.tern", b = "progress_b.tern";
    Result with_bar = run_cli("convert " + matmul_seed_model() + " " + a + " --optimize");
    INFO(with_bar.output);
    REQUIRE(with_bar.code == 0);
    CHECK(with_bar.output.find('\r') == std::string::npos);
    CHECK(with_bar.output.find("prepare kernels") == std::string::npos);
    CHECK(with_bar.output.find("optimize ") == std::string::npos);
    REQUIRE(
        run_cli("convert " + matmul_seed_model() + " " + b + " --optimize --no-progress").code ==
        0);
    const std::vector<uint8_t> with = read_bytes(a), without = read_bytes(b);
    CHECK(!with.empty());
    CHECK(with == without);
    std::remove(a.c_str());
    std::remove(b.c_str());
    // Errors name the file.
    Result missing = run_cli("convert /nonexistent/model.onnx " + a + " --optimize --no-progress");
    CHECK(missing.code == 1);
    CHECK(missing.output.find("/nonexistent/model.onnx") != std::string::npos);
  }

  TEST_CASE("PP-OCR models through the CLI match the references, ONNX and converted .tern") {
    if (!have_shared_models()) {
      MESSAGE((std::string("skipped: ") + models_unavailable()));
      return;
    }
    check_model_via_cli("ppocr_cls", model_dir("ppocr_cls") + "/model.onnx");
    check_model_via_cli("ppocr_det", model_dir("ppocr_det") + "/model.onnx");
    Result conv = run_cli("convert " + model_dir("ppocr_cls") + "/model.onnx cli_cls.tern");
    REQUIRE(conv.code == 0);
    check_model_via_cli("ppocr_cls", "cli_cls.tern");
    std::remove("cli_cls.tern");
    // --optimize: the optimized graph (and packed weights) computes the same; dynamic input
    // shapes pack for the given input.
    conv = run_cli("convert " + model_dir("ppocr_det") + "/model.onnx cli_det_opt.tern --optimize" +
                   " --shape x=1x3x640x640");
    INFO(conv.output);
    REQUIRE(conv.code == 0);
    CHECK(conv.output.find("optimized graph") != std::string::npos);
    check_model_via_cli("ppocr_det", "cli_det_opt.tern");
    std::remove("cli_det_opt.tern");
    CHECK(run_cli("convert a.onnx b.tern --optimise").code == 2);
    Result bad = run_cli("run " + model_dir("ppocr_cls") + "/model.onnx --input nosuch=x.npy");
    CHECK(bad.code == 1);
    // --output-dir is created when missing; one that cannot be is an error naming it.
    Result nested = run_cli("run " + model_dir("ppocr_cls") +
                            "/model.onnx --zeros --runs 1 --shape x=1x3x48x192" +
                            " --output-dir cli_new_dir/a/b");
    CHECK(nested.code == 0);
    CHECK(std::filesystem::exists("cli_new_dir/a/b"));
    std::filesystem::remove_all("cli_new_dir");
    Result denied = run_cli("run " + model_dir("ppocr_cls") +
                            "/model.onnx --zeros --runs 1 --shape x=1x3x48x192" +
                            " --output-dir /proc/tern_cannot_be");
    CHECK(denied.code == 1);
    CHECK(denied.output.find("cannot create '/proc/tern_cannot_be'") != std::string::npos);
  }
}

// `tern --version`, `tern inspect` and `tern check` (tools/tern/version.cpp, inspect.cpp,
// check.cpp).
TEST_SUITE("cli") {
  TEST_CASE("tern --version: the version, then the build on one line") {
    Result r = run_cli("--version");
    CHECK(r.code == 0);
    CHECK(r.output.rfind(std::string("tern ") + tern_version() + "\n", 0) == 0);
    CHECK(r.output.find("\nbuild: ABI ") != std::string::npos);
    Result usage = run_cli("--help");
    CHECK(usage.output.find("tern inspect MODEL") != std::string::npos);
    CHECK(usage.output.find("tern check MODEL DIR") != std::string::npos);
  }

  TEST_CASE("tern inspect: text, --json (read by python3 and checked against onnx), --dot") {
    const std::string seed = matmul_seed_model();
    Result text = run_cli("inspect " + seed);
    INFO(text.output);
    REQUIRE(text.code == 0);
    CHECK(text.output.find("op histogram:") != std::string::npos);
    CHECK(text.output.find("MatMul") != std::string::npos);
    CHECK(text.output.find("FLOPs:") != std::string::npos);
    Result dot = run_cli("inspect " + seed + " --dot cli_seed.dot");
    REQUIRE(dot.code == 0);
    CHECK(read_bytes("cli_seed.dot").size() > 8);
    const std::vector<uint8_t> dot_bytes = read_bytes("cli_seed.dot");
    CHECK(std::string(dot_bytes.begin(), dot_bytes.end()).rfind("digraph", 0) == 0);
    std::remove("cli_seed.dot");
    Result missing = run_cli("inspect /nonexistent/m.onnx");
    CHECK(missing.code == 2);
    CHECK(missing.output.find("/nonexistent/m.onnx") != std::string::npos);

    const std::string cls = model_dir("ppocr_cls") + "/model.onnx";
    if (!models_unavailable().empty()) {
      MESSAGE("skipped the ppocr_cls part: " << models_unavailable());
      return;
    }
    // The JSON parses, and its histogram and parameter count are those onnx's own reader finds;
    // FLOPs are at least the Conv FLOPs computed by onnx's shape inference in Python.
    const std::string json_file = "cli_cls_inspect.json";
    Result js = run_cli("inspect " + cls + " --json --shape x=1x3x48x192 > " + json_file);
    REQUIRE(js.code == 0);
    const std::string py =
        "import json, sys, collections, onnx, numpy\n"
        "from onnx import numpy_helper, shape_inference\n"
        "d = json.load(open(sys.argv[1]))\n"
        "m = onnx.load(sys.argv[2])\n"
        "# Tern's importer makes Constant nodes constant values (counted as parameters).\n"
        "hist = collections.Counter(n.op_type for n in m.graph.node if n.op_type != 'Constant')\n"
        "ours = {k: v for k, v in d['op_histogram'].items() if k != 'Constant'}\n"
        "assert ours == dict(hist), (ours, hist)\n"
        "count = sum(int(numpy.prod(t.dims)) for t in m.graph.initializer)\n"
        "consts = sum(int(numpy.prod(a.t.dims)) for n in m.graph.node if n.op_type == 'Constant'"
        " for a in n.attribute if a.name == 'value')\n"
        "assert count <= d['parameters']['count'] <= count + consts, (d['parameters'], count)\n"
        "assert d['inputs'][0]['name'] == m.graph.input[0].name\n"
        "assert d['flops']['total'] > 0 and 'Conv' in d['flops']['by_op']\n"
        "print('inspect json ok', d['flops']['total'])\n";
    {
      std::ofstream f("cli_check_inspect.py");
      f << py;
    }
    const int rc = std::system(
        ("/usr/bin/python3 cli_check_inspect.py " + json_file + " " + cls + " 2>&1").c_str());
    CHECK(WIFEXITED(rc));
    CHECK(WEXITSTATUS(rc) == 0);
    std::remove("cli_check_inspect.py");
    std::remove(json_file.c_str());
  }

  TEST_CASE("tern check: a test data set passes, a corrupted reference fails, errors give 2") {
    const std::string dir = model_dir("ppocr_cls");
    if (!models_unavailable().empty()) {
      MESSAGE("skipped: " << models_unavailable());
      return;
    }
    Result ok = run_cli("check " + dir + "/model.onnx " + dir + "/test_data_set_0");
    INFO(ok.output);
    CHECK(ok.code == 0);
    CHECK(ok.output.find("max abs") != std::string::npos);
    // The model folder itself: each test_data_set_* in it.
    CHECK(run_cli("check " + dir + "/model.onnx " + dir).code == 0);
    // The same data as .npy pairs, then with one expected element moved by 0.5.
    tern_tensor *in = nullptr, *out = nullptr;
    REQUIRE(tern_tensor_read_onnx_file((dir + "/test_data_set_0/input_0.pb").c_str(), &in) ==
            TERN_OK);
    REQUIRE(tern_tensor_read_onnx_file((dir + "/test_data_set_0/output_0.pb").c_str(), &out) ==
            TERN_OK);
    tern_model* m = nullptr;
    REQUIRE(tern_model_load_file((dir + "/model.onnx").c_str(), &m) == TERN_OK);
    const std::string in_name = tern_model_input_name(m, 0),
                      out_name = tern_model_output_name(m, 0);
    tern_model_destroy(m);
    const std::string npy = "cli_check_npy";
    std::filesystem::create_directories(npy);
    auto write = [](const std::string& path, tern_tensor* t) {
      REQUIRE(tern_cli::write_npy(path, tern_tensor_dtype(t), tern_tensor_shape(t),
                                  tern_tensor_rank(t), tern_tensor_data(t),
                                  tern_tensor_byte_size(t)) == "");
    };
    write(npy + "/input_" + in_name + ".npy", in);
    write(npy + "/expected_" + out_name + ".npy", out);
    Result npy_ok = run_cli("check " + dir + "/model.onnx " + npy);
    INFO(npy_ok.output);
    CHECK(npy_ok.code == 0);
    REQUIRE(tern_tensor_dtype(out) == TERN_FLOAT32);
    static_cast<float*>(tern_tensor_data(out))[1] += 0.5f;
    write(npy + "/expected_" + out_name + ".npy", out);
    Result bad = run_cli("check " + dir + "/model.onnx " + npy);
    INFO(bad.output);
    CHECK(bad.code == 1);
    CHECK(bad.output.find("MISMATCH") != std::string::npos);
    CHECK(bad.output.find("[0,1]") != std::string::npos);  // the worst element's index
    // A tolerance that admits the change passes.
    CHECK(run_cli("check " + dir + "/model.onnx " + npy + " --atol 0.6").code == 0);
    tern_tensor_destroy(in);
    tern_tensor_destroy(out);
    std::filesystem::remove_all(npy);
    CHECK(run_cli("check " + dir + "/model.onnx /nonexistent/dir").code == 2);
    CHECK(run_cli("check " + dir + "/model.onnx " + dir + " --atol x").code == 2);
  }
}
