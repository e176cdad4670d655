// Bad input through the C API, as a table: every case gets its specific status and a message that
// names the problem, nothing crashes, and what was loaded keeps working. The table (case, status,
// message) is printed, so a run shows what each case returns.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "c_api.h"
#include "graph_builder.h"
#include "serialization/model_io.h"
#include "serialization/tern_generated.h"
#include "test_util.h"

using namespace tern;
using namespace tern_test;

namespace {

const std::string kMatmulModel = matmul_seed_model();

std::string temp_path(const std::string& name) {
  return "/tmp/tern_bad_input_" + std::to_string(::getpid()) + "_" + name;
}

// data [5, 4] (a constant) gathered by runtime int64 indices: out-of-range indices are found only
// when the session runs.
std::vector<uint8_t> gather_model_bytes() {
  Graph g;
  g.opset = 13;
  int data = g.add_value("data");
  g.values[static_cast<size_t>(data)].constant = make_f32({5, 4}, std::vector<float>(20, 1.0f));
  int idx = g.add_value("idx", ValueType{DType::kInt64, true, {Dim{-1, "n"}}});
  int y = g.add_value("y");
  g.nodes.push_back(Node{"gather", "Gather", "", {data, idx}, {y}, {}});
  g.inputs = {idx};
  g.outputs = {y};
  const std::string path = temp_path("gather.tern");
  REQUIRE(serialization::save_tern(g, path).is_ok());
  std::vector<uint8_t> bytes = read_bytes(path);
  std::remove(path.c_str());
  return bytes;
}

// A two-node graph whose first node reads the second one's output: a cycle, written by patching a
// valid file (the writer itself refuses nothing, but the loader must).
std::vector<uint8_t> cyclic_model_bytes() {
  Graph g;
  g.opset = 13;
  int x = g.add_value("x", ValueType{DType::kFloat32, true, {Dim{2, ""}}});
  int a = g.add_value("a");
  int b = g.add_value("b");
  g.nodes.push_back(Node{"first", "Add", "", {x, x}, {a}, {}});
  g.nodes.push_back(Node{"second", "Relu", "", {a}, {b}, {}});
  g.inputs = {x};
  g.outputs = {b};
  const std::string path = temp_path("cycle.tern");
  REQUIRE(serialization::save_tern(g, path).is_ok());
  std::vector<uint8_t> bytes = read_bytes(path);
  std::remove(path.c_str());
  fb::GetMutableModel(bytes.data())
      ->mutable_graph()
      ->mutable_nodes()
      ->GetMutableObject(0)
      ->mutable_inputs()
      ->Mutate(1, static_cast<int32_t>(b));
  return bytes;
}

struct Row {
  std::string what;
  tern_status status;
  std::string message;
};

struct Table {
  std::vector<Row> rows;
  // Runs `call`, checks its status and that the message holds `needle`, and records the row.
  void expect(const std::string& what, tern_status want, const std::string& needle,
              const std::function<tern_status()>& call) {
    const tern_status got = call();
    const std::string message = got == TERN_OK ? "" : tern_last_error();
    CHECK_MESSAGE(got == want, what, ": got ", std::string(tern_status_name(got)), " (", message,
                  ")");
    if (!needle.empty()) {
      CHECK_MESSAGE(message.find(needle) != std::string::npos, what, ": message '", message,
                    "' lacks '", needle, "'");
    }
    rows.push_back({what, got, message});
  }
  std::string str() const {
    std::string out = "\n| case | status | message |\n|---|---|---|\n";
    for (const Row& r : rows) {
      out += "| " + r.what + " | " + tern_status_name(r.status) + " | " + r.message + " |\n";
    }
    return out;
  }
};

}  // namespace

TEST_SUITE("bad_input") {
  TEST_CASE("every bad input gets its own status and a message naming it; nothing is lost") {
    Table t;
    tern_model* model = nullptr;
    REQUIRE(tern_model_load_file(kMatmulModel.c_str(), &model) == TERN_OK);
    tern_session* s = nullptr;
    REQUIRE(tern_session_create(model, nullptr, &s) == TERN_OK);
    Handles h;
    auto tensor = [&](tern_dtype dtype, std::vector<int64_t> shape) {
      tern_tensor* x = nullptr;
      REQUIRE(tern_tensor_create(dtype, shape.data(), shape.size(), &x) == TERN_OK);
      h.tensors.push_back(x);
      return x;
    };
    tern_tensor* good = tensor(TERN_FLOAT32, {2, 8});
    tern_tensor* ints = tensor(TERN_INT64, {2, 8});
    tern_tensor* rank3 = tensor(TERN_FLOAT32, {2, 8, 1});
    tern_tensor* dims = tensor(TERN_FLOAT32, {2, 7});
    tern_tensor* empty = tensor(TERN_FLOAT32, {0, 8});
    const char* x_name[] = {"x"};
    const char* y_name[] = {"y"};
    const char* null_name[] = {nullptr};
    tern_tensor* out[2] = {nullptr, nullptr};
    // Runs `names`[0..n) = `in` for the output y (or `outs`[0]).
    auto run = [&](const char* const* names, tern_tensor* in, size_t n,
                   const char* const* outs = nullptr) {
      const tern_tensor* ins[] = {in, in};
      return tern_session_run(s, nullptr, names, ins, n, outs ? outs : y_name, 1, out);
    };

    // ---- Run-time inputs ----
    const char* other[] = {"y"};
    t.expect("wrong input name", TERN_ERR_INVALID_ARGUMENT, "unknown input name 'y'",
             [&] { return run(other, good, 1); });
    t.expect("missing input", TERN_ERR_INVALID_ARGUMENT, "'x' is not given",
             [&] { return run(x_name, good, 0); });
    const char* twice[] = {"x", "x"};
    t.expect("input given twice", TERN_ERR_INVALID_ARGUMENT, "given twice",
             [&] { return run(twice, good, 2); });
    t.expect("wrong dtype", TERN_ERR_INVALID_ARGUMENT, "must be float32, got int64",
             [&] { return run(x_name, ints, 1); });
    t.expect("wrong rank", TERN_ERR_INVALID_ARGUMENT, "'x'", [&] { return run(x_name, rank3, 1); });
    t.expect("wrong dim", TERN_ERR_INVALID_ARGUMENT, "'x'", [&] { return run(x_name, dims, 1); });
    const char* bad_out[] = {"nope"};
    t.expect("unknown output name", TERN_ERR_INVALID_ARGUMENT, "unknown output name 'nope'",
             [&] { return run(x_name, good, 1, bad_out); });
    t.expect("zero-size input [0, 8] (valid: runs)", TERN_OK, "",
             [&] { return run(x_name, empty, 1); });
    if (out[0]) {
      CHECK(tern_tensor_rank(out[0]) == 3);
      CHECK(tern_tensor_shape(out[0])[0] == 0);
      CHECK(tern_tensor_byte_size(out[0]) == 0);
      tern_tensor_destroy(out[0]);
      out[0] = nullptr;
    }

    // ---- Tensors ----
    tern_tensor* made = nullptr;
    int64_t neg[] = {2, -3};
    t.expect("negative dim", TERN_ERR_INVALID_ARGUMENT, "negative",
             [&] { return tern_tensor_create(TERN_FLOAT32, neg, 2, &made); });
    int64_t huge[] = {int64_t{1} << 40, int64_t{1} << 30};
    t.expect("dim product overflows", TERN_ERR_INVALID_ARGUMENT, "more than 2^62 elements",
             [&] { return tern_tensor_create(TERN_FLOAT32, huge, 2, &made); });
    t.expect("unknown dtype code", TERN_ERR_INVALID_ARGUMENT, "unknown dtype 42", [&] {
      int64_t shape[] = {2};
      return tern_tensor_create(static_cast<tern_dtype>(42), shape, 1, &made);
    });
    float small[4] = {};
    int64_t shape28[] = {2, 8};
    t.expect("borrowed buffer too small", TERN_ERR_INVALID_ARGUMENT, "smaller than the 64 bytes",
             [&] {
               return tern_tensor_create_from_data(TERN_FLOAT32, shape28, 2, small, sizeof small,
                                                   nullptr, nullptr, &made);
             });
    CHECK(made == nullptr);

    // ---- NULL in every argument position of the calls that take pointers ----
    const tern_tensor* one[] = {good};
    const tern_tensor* null_tensor[] = {nullptr};
    t.expect("run: session NULL", TERN_ERR_INVALID_ARGUMENT, "NULL",
             [&] { return tern_session_run(nullptr, nullptr, x_name, one, 1, y_name, 1, out); });
    t.expect("run: input_names NULL", TERN_ERR_INVALID_ARGUMENT, "NULL",
             [&] { return tern_session_run(s, nullptr, nullptr, one, 1, y_name, 1, out); });
    t.expect("run: input_names[0] NULL", TERN_ERR_INVALID_ARGUMENT, "NULL",
             [&] { return tern_session_run(s, nullptr, null_name, one, 1, y_name, 1, out); });
    t.expect("run: inputs NULL", TERN_ERR_INVALID_ARGUMENT, "NULL",
             [&] { return tern_session_run(s, nullptr, x_name, nullptr, 1, y_name, 1, out); });
    t.expect("run: inputs[0] NULL", TERN_ERR_INVALID_ARGUMENT, "inputs[0] ('x') is NULL",
             [&] { return tern_session_run(s, nullptr, x_name, null_tensor, 1, y_name, 1, out); });
    t.expect("run: output_names NULL", TERN_ERR_INVALID_ARGUMENT, "NULL",
             [&] { return tern_session_run(s, nullptr, x_name, one, 1, nullptr, 1, out); });
    t.expect("run: output_names[0] NULL", TERN_ERR_INVALID_ARGUMENT, "NULL",
             [&] { return tern_session_run(s, nullptr, x_name, one, 1, null_name, 1, out); });
    t.expect("run: outputs NULL", TERN_ERR_INVALID_ARGUMENT, "NULL",
             [&] { return tern_session_run(s, nullptr, x_name, one, 1, y_name, 1, nullptr); });
    tern_model* m2 = nullptr;
    t.expect("load_file: path NULL", TERN_ERR_INVALID_ARGUMENT, "NULL",
             [&] { return tern_model_load_file(nullptr, &m2); });
    t.expect("load_file: out NULL", TERN_ERR_INVALID_ARGUMENT, "NULL",
             [&] { return tern_model_load_file(kMatmulModel.c_str(), nullptr); });
    t.expect("load_memory: data NULL", TERN_ERR_INVALID_ARGUMENT, "NULL",
             [&] { return tern_model_load_memory(nullptr, 10, &m2); });
    tern_session* s2 = nullptr;
    t.expect("session_create: model NULL", TERN_ERR_INVALID_ARGUMENT, "NULL",
             [&] { return tern_session_create(nullptr, nullptr, &s2); });
    t.expect("session_create: out NULL", TERN_ERR_INVALID_ARGUMENT, "NULL",
             [&] { return tern_session_create(model, nullptr, nullptr); });
    t.expect("tensor_create: shape NULL with rank 2", TERN_ERR_INVALID_ARGUMENT, "NULL",
             [&] { return tern_tensor_create(TERN_FLOAT32, nullptr, 2, &made); });
    t.expect("tensor_create_from_data: data NULL", TERN_ERR_INVALID_ARGUMENT, "NULL", [&] {
      return tern_tensor_create_from_data(TERN_FLOAT32, shape28, 2, nullptr, 64, nullptr, nullptr,
                                          &made);
    });
    t.expect("flag_set: name NULL", TERN_ERR_INVALID_ARGUMENT, "NULL",
             [&] { return tern_flag_set(nullptr, "1"); });
    t.expect("flag_set: value NULL", TERN_ERR_INVALID_ARGUMENT, "NULL",
             [&] { return tern_flag_set("cudnn.benchmark", nullptr); });
    t.expect("flag_set: unknown name", TERN_ERR_INVALID_ARGUMENT, "unknown flag 'no.such.flag'",
             [&] { return tern_flag_set("no.such.flag", "1"); });
    t.expect("session_options_set_flag: options NULL", TERN_ERR_INVALID_ARGUMENT, "NULL",
             [&] { return tern_session_options_set_flag(nullptr, "num_threads", "1"); });

    // ---- Files ----
    const std::vector<uint8_t> bytes = read_bytes(kMatmulModel);
    REQUIRE(bytes.size() > 64);
    t.expect("missing file", TERN_ERR_IO, "/no/such/model.tern",
             [&] { return tern_model_load_file("/no/such/model.tern", &m2); });
    const std::string empty_file = temp_path("empty.tern");
    { std::ofstream(empty_file, std::ios::binary); }
    t.expect("zero-length file", TERN_ERR_INVALID_MODEL, "",
             [&] { return tern_model_load_file(empty_file.c_str(), &m2); });
    std::remove(empty_file.c_str());
    t.expect("zero-length buffer", TERN_ERR_INVALID_MODEL, "",
             [&] { return tern_model_load_memory(bytes.data(), 0, &m2); });
    t.expect("truncated file (first half)", TERN_ERR_INVALID_MODEL, "",
             [&] { return tern_model_load_memory(bytes.data(), bytes.size() / 2, &m2); });
    std::vector<uint8_t> wrong_id = bytes;
    std::memcpy(wrong_id.data() + 4, "ONNX", 4);  // the FlatBuffers file identifier
    t.expect("wrong file identifier", kNotTernFileStatus, "",
             [&] { return tern_model_load_memory(wrong_id.data(), wrong_id.size(), &m2); });
    std::vector<uint8_t> newer = bytes;
    fb::GetMutableModel(newer.data())->mutate_format_version(serialization::kFormatVersion + 1);
    t.expect("newer format version", TERN_ERR_INVALID_MODEL, "format version",
             [&] { return tern_model_load_memory(newer.data(), newer.size(), &m2); });
    std::vector<uint8_t> outside = bytes;
    REQUIRE(fb::GetMutableModel(outside.data())->segments()->size() > 0);
    fb::GetMutableModel(outside.data())
        ->mutable_segments()
        ->GetMutableObject(0)
        ->mutate_length(uint64_t{1} << 40);
    t.expect("weight segment outside the file", TERN_ERR_INVALID_MODEL, "segment 0",
             [&] { return tern_model_load_memory(outside.data(), outside.size(), &m2); });
    const std::vector<uint8_t> cyclic = cyclic_model_bytes();
    t.expect("cyclic graph", TERN_ERR_INVALID_MODEL, "cycle",
             [&] { return tern_model_load_memory(cyclic.data(), cyclic.size(), &m2); });
    CHECK(m2 == nullptr);

    // ---- Run-time data ----
    const std::vector<uint8_t> gather = gather_model_bytes();
    tern_model* gm = nullptr;
    REQUIRE(tern_model_load_memory(gather.data(), gather.size(), &gm) == TERN_OK);
    tern_session* gs = nullptr;
    REQUIRE(tern_session_create(gm, nullptr, &gs) == TERN_OK);
    int64_t idx_values[] = {1, 7};
    int64_t idx_shape[] = {2};
    tern_tensor* idx = nullptr;
    REQUIRE(tern_tensor_create_from_data(TERN_INT64, idx_shape, 1, idx_values, sizeof idx_values,
                                         nullptr, nullptr, &idx) == TERN_OK);
    h.tensors.push_back(idx);
    const char* idx_name[] = {"idx"};
    const tern_tensor* idx_in[] = {idx};
    t.expect("Gather index out of range at run time", TERN_ERR_INVALID_ARGUMENT, "7",
             [&] { return tern_session_run(gs, nullptr, idx_name, idx_in, 1, y_name, 1, out); });
    CHECK(tern_last_error() != std::string());
    idx_values[1] = -5;  // in range from the end
    CHECK(tern_session_run(gs, nullptr, idx_name, idx_in, 1, y_name, 1, out) == TERN_OK);
    tern_tensor_destroy(out[0]);
    out[0] = nullptr;
    tern_session_destroy(gs);
    tern_model_destroy(gm);

    // Nothing that was loaded is lost: the first session still runs.
    REQUIRE(run(x_name, good, 1) == TERN_OK);
    CHECK(tern_tensor_shape(out[0])[1] == 2);
    tern_tensor_destroy(out[0]);
    tern_session_destroy(s);
    tern_model_destroy(model);
    MESSAGE(t.str());
  }

  TEST_CASE(
      "every single-bit flip of a model file: loads, INVALID_MODEL or UNSUPPORTED; no crash") {
    const std::vector<uint8_t> bytes = read_bytes(kMatmulModel);
    REQUIRE(!bytes.empty());
    int loaded = 0, refused = 0, unsupported = 0, other = 0, ran = 0;
    for (size_t i = 0; i < bytes.size(); ++i) {
      for (int bit = 0; bit < 8; ++bit) {
        std::vector<uint8_t> b = bytes;
        b[i] ^= static_cast<uint8_t>(1u << bit);
        tern_model* m = nullptr;
        const tern_status st = tern_model_load_memory(b.data(), b.size(), &m);
        if (st == TERN_ERR_INVALID_MODEL) {
          ++refused;
          continue;
        }
        if (st == TERN_ERR_UNSUPPORTED) {  // a well-formed model using what Tern lacks
          ++unsupported;
          continue;
        }
        if (st != TERN_OK) {
          ++other;
          MESSAGE("byte ", i, " bit ", bit, ": ", std::string(tern_status_name(st)), ": ",
                  std::string(tern_last_error()));
          continue;
        }
        ++loaded;
        tern_session* s = nullptr;
        if (tern_session_create(m, nullptr, &s) == TERN_OK) {
          int64_t shape[] = {2, 8};
          tern_tensor* x = nullptr;
          REQUIRE(tern_tensor_create(TERN_FLOAT32, shape, 2, &x) == TERN_OK);
          const char* in[] = {"x"};
          const char* outs[] = {"y"};
          const tern_tensor* ins[] = {x};
          tern_tensor* y = nullptr;
          if (tern_session_run(s, nullptr, in, ins, 1, outs, 1, &y) == TERN_OK) ++ran;
          tern_tensor_destroy(y);
          tern_tensor_destroy(x);
          tern_session_destroy(s);
        }
        tern_model_destroy(m);
      }
    }
    CHECK(other == 0);
    CHECK(refused > 0);
    MESSAGE((bytes.size() * 8), " flips: ", loaded, " loaded (", ran, " of them ran), ", refused,
            " INVALID_MODEL, ", unsupported, " UNSUPPORTED");
  }
  TEST_CASE("a 1 MB argument is not echoed whole: error messages quote at most 200 bytes of it") {
    const std::string huge(1 << 20, 'x');
    auto check = [](tern_status st, const char* what) {
      CHECK_MESSAGE(st == TERN_ERR_INVALID_ARGUMENT, what);
      const std::string msg = tern_last_error();
      CHECK_MESSAGE(msg.size() < 1000, what, ": ", msg.size(), " bytes");
      CHECK_MESSAGE(msg.find("(1048576 bytes)") != std::string::npos, what, ": ",
                    msg.substr(0, 300));
    };
    check(tern_flag_set("num_threads", huge.c_str()), "flag value");
    check(tern_flag_set(huge.c_str(), "1"), "flag name");
    check(tern_flag_set("opt_einsum.strategy", huge.c_str()), "enum value");
    tern_session_options* o = nullptr;
    REQUIRE(tern_session_options_create(&o) == TERN_OK);
    check(tern_session_options_set_backends(o, huge.c_str()), "backend list");
    check(tern_session_options_set_flag(o, "sdp.math_enabled", huge.c_str()), "option flag");
    tern_session_options_destroy(o);
    tern_run_options* r = nullptr;
    REQUIRE(tern_run_options_create(&r) == TERN_OK);
    check(tern_run_options_set_output_device(r, huge.c_str()), "output device");
    tern_run_options_destroy(r);
  }
}
