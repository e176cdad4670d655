// Graph inputs with an initializer (ONNX before IR 4 lists every weight so): optional inputs whose
// default is the initializer, through the C API, the CLI and the conformance runner; a caller
// may replace one by name.
#include <doctest/doctest.h>

#if defined(TERN_HAVE_ONNX)
#include <onnx/onnx_pb.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "c_api.h"
#include "tools/tern/npy.h"

namespace {

constexpr float kX[6] = {1, 2, 3, -1, 0, 0.5f};    // [2, 3]
constexpr float kW[12] = {1, 0, 0, 1, 0, 1, 0, 1,  // [3, 4]
                          0, 0, 1, -1};
constexpr float kB[4] = {0.5f, -1, 2, 0};

onnx::TensorProto float_tensor(const std::string& name, std::vector<int64_t> dims,
                               const float* data) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  size_t n = 1;
  for (int64_t d : dims) {
    t.add_dims(d);
    n *= static_cast<size_t>(d);
  }
  t.set_raw_data(std::string(reinterpret_cast<const char*>(data), n * sizeof(float)));
  return t;
}

void add_float_io(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list,
                  const std::string& name, std::vector<int64_t> dims) {
  onnx::ValueInfoProto* vi = list->Add();
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

// IR 3, opset 8: y = x·W + 2·B, with W and B initializers listed as graph inputs (as every
// exporter of that time wrote them). 2·B is folded at session creation unless B is fed.
std::string old_ir_model() {
  onnx::ModelProto mp;
  mp.set_ir_version(3);
  mp.add_opset_import()->set_version(8);
  onnx::GraphProto* g = mp.mutable_graph();
  add_float_io(g->mutable_input(), "x", {2, 3});
  add_float_io(g->mutable_input(), "W", {3, 4});
  add_float_io(g->mutable_input(), "B", {4});
  *g->add_initializer() = float_tensor("W", {3, 4}, kW);
  const float two = 2;
  *g->add_initializer() = float_tensor("two", {}, &two);
  *g->add_initializer() = float_tensor("B", {4}, kB);
  auto node = [&](const char* op, std::vector<std::string> in, const char* out) {
    onnx::NodeProto* n = g->add_node();
    n->set_op_type(op);
    for (const auto& i : in) n->add_input(i);
    n->add_output(out);
  };
  node("MatMul", {"x", "W"}, "xw");
  node("Mul", {"B", "two"}, "b2");
  node("Add", {"xw", "b2"}, "y");
  add_float_io(g->mutable_output(), "y", {2, 4});
  return mp.SerializeAsString();
}

std::vector<float> expected(const float* w, const float* b) {
  std::vector<float> y(8);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 4; ++j) {
      float acc = 2 * b[j];
      for (int k = 0; k < 3; ++k) acc += kX[i * 3 + k] * w[k * 4 + j];
      y[static_cast<size_t>(i * 4 + j)] = acc;
    }
  }
  return y;
}

struct Run {
  tern_status status;
  std::vector<float> y;
};

// Runs with x and the given optional inputs (name, data, dims).
Run run(tern_session* s, const std::vector<std::pair<std::string, std::vector<int64_t>>>& extra,
        const std::vector<std::vector<float>>& extra_data) {
  std::vector<tern_tensor*> ts;
  std::vector<const char*> names = {"x"};
  const int64_t xs[] = {2, 3};
  tern_tensor* x = nullptr;
  REQUIRE(tern_tensor_create_from_data(TERN_FLOAT32, xs, 2, const_cast<float*>(kX), sizeof kX,
                                       nullptr, nullptr, &x) == TERN_OK);
  ts.push_back(x);
  for (size_t i = 0; i < extra.size(); ++i) {
    tern_tensor* t = nullptr;
    REQUIRE(tern_tensor_create_from_data(
                TERN_FLOAT32, extra[i].second.data(), extra[i].second.size(),
                const_cast<float*>(extra_data[i].data()), extra_data[i].size() * sizeof(float),
                nullptr, nullptr, &t) == TERN_OK);
    ts.push_back(t);
    names.push_back(extra[i].first.c_str());
  }
  const char* out_name = "y";
  tern_tensor* y = nullptr;
  Run r;
  r.status = tern_session_run(s, nullptr, names.data(), ts.data(), ts.size(), &out_name, 1, &y);
  if (r.status == TERN_OK) {
    const float* d = static_cast<const float*>(tern_tensor_data(y));
    r.y.assign(d, d + 8);
  }
  tern_tensor_destroy(y);
  for (tern_tensor* t : ts) tern_tensor_destroy(t);
  return r;
}

int run_command(const std::string& cmd, std::string* output) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) output->append(buf, n);
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_SUITE("api") {
  TEST_CASE("initializers listed as graph inputs are optional inputs a run may replace") {
    const std::string bytes = old_ir_model();
    tern_model* m = nullptr;
    REQUIRE(tern_model_load_memory(bytes.data(), bytes.size(), &m) == TERN_OK);
    CHECK(tern_model_input_count(m) == 1);
    CHECK(std::string(tern_model_input_name(m, 0)) == "x");
    REQUIRE(tern_model_optional_input_count(m) == 2);
    CHECK(std::string(tern_model_optional_input_name(m, 0)) == "W");
    CHECK(std::string(tern_model_optional_input_name(m, 1)) == "B");
    CHECK(tern_model_optional_input_name(m, 2) == nullptr);
    tern_dtype dt;
    size_t rank = 0;
    const int64_t* shape = nullptr;
    REQUIRE(tern_model_optional_input_info(m, 0, &dt, &rank, &shape) == TERN_OK);
    CHECK(dt == TERN_FLOAT32);
    REQUIRE(rank == 2);
    CHECK((shape[0] == 3 && shape[1] == 4));
    CHECK(tern_model_optional_input_info(m, 2, &dt, &rank, &shape) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_model_optional_input_info(nullptr, 0, &dt, &rank, &shape) ==
          TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_model_optional_input_count(nullptr) == 0);

    tern_session* s = nullptr;
    REQUIRE(tern_session_create(m, nullptr, &s) == TERN_OK);
    // Without data for W and B: their initializers.
    Run r = run(s, {}, {});
    REQUIRE(r.status == TERN_OK);
    CHECK(r.y == expected(kW, kB));
    // B replaced: the folded 2·B must not be used.
    const std::vector<float> b2 = {1, 2, 3, 4};
    r = run(s, {{"B", {4}}}, {b2});
    REQUIRE_MESSAGE(r.status == TERN_OK, std::string(tern_last_error()));
    CHECK(r.y == expected(kW, b2.data()));
    // Both replaced, then none again: each run uses what it was given.
    std::vector<float> w2(12);
    for (size_t i = 0; i < w2.size(); ++i) w2[i] = static_cast<float>(i) * 0.25f;
    r = run(s, {{"W", {3, 4}}, {"B", {4}}}, {w2, b2});
    REQUIRE(r.status == TERN_OK);
    CHECK(r.y == expected(w2.data(), b2.data()));
    r = run(s, {}, {});
    REQUIRE(r.status == TERN_OK);
    CHECK(r.y == expected(kW, kB));
    // A replacement of another shape or dtype, or given twice, is refused by name.
    r = run(s, {{"W", {4, 3}}}, {w2});
    CHECK(r.status == TERN_ERR_INVALID_ARGUMENT);
    CHECK(std::string(tern_last_error()).find("'W' must have shape [3,4]") != std::string::npos);
    r = run(s, {{"B", {4}}, {"B", {4}}}, {b2, b2});
    CHECK(r.status == TERN_ERR_INVALID_ARGUMENT);
    CHECK(std::string(tern_last_error()).find("'B' is given twice") != std::string::npos);
    // Still required: x.
    const char* name = "B";
    const int64_t bs[] = {4};
    tern_tensor* b = nullptr;
    REQUIRE(tern_tensor_create_from_data(TERN_FLOAT32, bs, 1, const_cast<float*>(b2.data()), 16,
                                         nullptr, nullptr, &b) == TERN_OK);
    const char* out_name = "y";
    tern_tensor* y = nullptr;
    CHECK(tern_session_run(s, nullptr, &name, &b, 1, &out_name, 1, &y) ==
          TERN_ERR_INVALID_ARGUMENT);
    CHECK(std::string(tern_last_error()).find("input 'x' is not given") != std::string::npos);
    tern_tensor_destroy(b);
    tern_session_destroy(s);

    // Saved as .tern, the optional inputs stay optional.
    const std::string path = "optional_inputs.tern";
    REQUIRE(tern_model_save(m, path.c_str()) == TERN_OK);
    tern_model* again = nullptr;
    REQUIRE(tern_model_load_file(path.c_str(), &again) == TERN_OK);
    CHECK(tern_model_input_count(again) == 1);
    CHECK(tern_model_optional_input_count(again) == 2);
    REQUIRE(tern_session_create(again, nullptr, &s) == TERN_OK);
    r = run(s, {{"B", {4}}}, {b2});
    REQUIRE(r.status == TERN_OK);
    CHECK(r.y == expected(kW, b2.data()));
    tern_session_destroy(s);
    tern_model_destroy(again);
    std::remove(path.c_str());
    tern_model_destroy(m);
  }
}

TEST_SUITE("cli") {
  TEST_CASE("tern run and tern-conformance need no data for initializer inputs") {
    namespace fs = std::filesystem;
    const fs::path dir = "optional_inputs_case";
    fs::remove_all(dir);
    fs::create_directories(dir / "test_data_set_0");
    {
      std::ofstream f(dir / "model.onnx", std::ios::binary);
      f << old_ir_model();
    }
    std::string out;
    REQUIRE(run_command(std::string(TERN_CLI_PATH) + " info " + (dir / "model.onnx").string(),
                        &out) == 0);
    CHECK(out.find("optional input 'W': float32 [3,4]") != std::string::npos);
    INFO(out);

    // tern run: x from a file, W and B their initializers; then B from a file.
    const int64_t xs[] = {2, 3}, bs[] = {4};
    const std::vector<float> b2 = {1, 2, 3, 4};
    REQUIRE(tern_cli::write_npy((dir / "x.npy").string(), TERN_FLOAT32, xs, 2, kX, sizeof kX) ==
            "");
    REQUIRE(tern_cli::write_npy((dir / "b.npy").string(), TERN_FLOAT32, bs, 1, b2.data(), 16) ==
            "");
    const std::string run = std::string(TERN_CLI_PATH) + " run " + (dir / "model.onnx").string() +
                            " --input x=" + (dir / "x.npy").string() + " --output-dir " +
                            dir.string();
    for (bool replace : {false, true}) {
      out.clear();
      REQUIRE(run_command(run + (replace ? " --input B=" + (dir / "b.npy").string() : ""), &out) ==
              0);
      tern_cli::NpyArray y;
      REQUIRE(tern_cli::read_npy((dir / "y.npy").string(), &y) == "");
      const float* got = reinterpret_cast<const float*>(y.data.data());
      CHECK(std::vector<float>(got, got + 8) == expected(kW, replace ? b2.data() : kB));
    }
    out.clear();
    CHECK(run_command(run + " --shape W=3x4", &out) == 1);
    CHECK(out.find("--shape W: the model has no input named 'W' (an optional input takes its "
                   "data from --input)") != std::string::npos);

    // The conformance runner: one input file, for x, named as the reference tool names it.
    auto write_pb = [&](const std::string& file, const std::string& name, std::vector<int64_t> d,
                        const float* data) {
      std::ofstream f(dir / "test_data_set_0" / file, std::ios::binary);
      f << float_tensor(name, std::move(d), data).SerializeAsString();
    };
    write_pb("input_0.pb", "x", {2, 3}, kX);
    write_pb("output_0.pb", "y", {2, 4}, expected(kW, kB).data());
    out.clear();
    const int rc = run_command(
        std::string(TERN_CONFORMANCE_PATH) + " --dir . --filter " + dir.string() + " --verbose",
        &out);
    INFO(out);
    CHECK(rc == 0);
    CHECK(out.find("1 passed, 0 failed") != std::string::npos);
    fs::remove_all(dir);
  }
}
#endif  // TERN_HAVE_ONNX
