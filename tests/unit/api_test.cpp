// The C ABI: every argument checked, every failure a specific status and message, ownership.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "c_api.h"
#include "test_util.h"

using namespace tern_test;

namespace {

bool has(const char* needle) {
  return std::strstr(tern_last_error(), needle) != nullptr;
}

struct ClsSession {
  tern_model* model = nullptr;
  tern_session* session = nullptr;
  ClsSession() {
    REQUIRE(tern_model_load_file((model_dir("ppocr_cls") + "/model.onnx").c_str(), &model) ==
            TERN_OK);
    REQUIRE(tern_session_create(model, nullptr, &session) == TERN_OK);
  }
  ~ClsSession() {
    tern_session_destroy(session);
    tern_model_destroy(model);
  }
};

}  // namespace

TEST_SUITE("api") {
  TEST_CASE("version, ABI and status names") {
    CHECK(std::string(tern_version()) == "0.1.0");
    CHECK(tern_abi_version() == 1);
    CHECK(tern_format_version() == 2);
    CHECK(std::string(tern_status_name(TERN_OK)) == "TERN_OK");
    CHECK(std::string(tern_status_name(TERN_ERR_INVALID_MODEL)) == "TERN_ERR_INVALID_MODEL");
    CHECK(std::string(tern_status_name(static_cast<tern_status>(99))) == "TERN_UNKNOWN_STATUS");
    CHECK(std::string(tern_config_show()).find("oneDNN") != std::string::npos);
    std::string cap = tern_cpu_get_capability();
    CHECK((cap == "AVX512" || cap == "AVX2" || cap == "NO AVX" || cap == "DEFAULT" ||
           cap == "SVE256"));
#if defined(TERN_HAVE_CUDA)
    constexpr int kCudaBuilt = 1;
#else
    constexpr int kCudaBuilt = 0;
#endif
    CHECK(tern_cuda_is_built() == kCudaBuilt);
    CHECK((tern_cuda_device_count() > 0) == (tern_cuda_is_available() == 1));
  }

  TEST_CASE("tensor creation checks every argument") {
    tern_tensor* t = nullptr;
    int64_t shape[] = {2, 3};
    CHECK(tern_tensor_create(TERN_FLOAT32, shape, 2, nullptr) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(has("out is NULL"));
    CHECK(tern_tensor_create(TERN_FLOAT32, nullptr, 2, &t) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_tensor_create(static_cast<tern_dtype>(42), shape, 2, &t) ==
          TERN_ERR_INVALID_ARGUMENT);
    CHECK(has("unknown dtype 42"));
    int64_t neg[] = {2, -3};
    CHECK(tern_tensor_create(TERN_FLOAT32, neg, 2, &t) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(has("negative"));
    int64_t huge[] = {int64_t{1} << 40, int64_t{1} << 30};
    CHECK(tern_tensor_create(TERN_FLOAT32, huge, 2, &t) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_tensor_create(TERN_STRING, shape, 2, &t) == TERN_ERR_UNSUPPORTED);
    CHECK(t == nullptr);
    REQUIRE(tern_tensor_create(TERN_INT64, shape, 2, &t) == TERN_OK);
    CHECK(tern_tensor_byte_size(t) == 48);
    CHECK(tern_tensor_rank(t) == 2);
    CHECK(tern_tensor_shape(t)[1] == 3);
    CHECK(tern_tensor_dtype(t) == TERN_INT64);
    tern_tensor_destroy(t);
    REQUIRE(tern_tensor_create(TERN_FLOAT32, nullptr, 0, &t) == TERN_OK);  // scalar
    CHECK(tern_tensor_byte_size(t) == 4);
    tern_tensor_destroy(t);
    tern_tensor_destroy(nullptr);
    CHECK(tern_tensor_data(nullptr) == nullptr);
    CHECK(tern_tensor_rank(nullptr) == 0);
  }

  TEST_CASE("borrowed tensors: zero-copy, too-small buffers refused, deleter called once") {
    static int deleted = 0;
    float data[6] = {1, 2, 3, 4, 5, 6};
    int64_t shape[] = {2, 3};
    tern_tensor* t = nullptr;
    auto deleter = [](void* p, void* ctx) {
      CHECK(ctx == reinterpret_cast<void*>(0x1234));
      CHECK(p != nullptr);
      ++deleted;
    };
    CHECK(tern_tensor_create_from_data(TERN_FLOAT32, shape, 2, data, 20, deleter, nullptr, &t) ==
          TERN_ERR_INVALID_ARGUMENT);
    CHECK(has("smaller than the 24 bytes"));
    CHECK(deleted == 0);  // not called on failure
    CHECK(tern_tensor_create_from_data(TERN_FLOAT32, shape, 2, nullptr, 24, nullptr, nullptr, &t) ==
          TERN_ERR_INVALID_ARGUMENT);
    REQUIRE(tern_tensor_create_from_data(TERN_FLOAT32, shape, 2, data, sizeof data, deleter,
                                         reinterpret_cast<void*>(0x1234), &t) == TERN_OK);
    CHECK(tern_tensor_data(t) == data);
    tern_tensor_destroy(t);
    CHECK(deleted == 1);
  }

  TEST_CASE("model loading: NULLs, missing files, info queries") {
    tern_model* m = nullptr;
    CHECK(tern_model_load_file(nullptr, &m) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_model_load_file("x.onnx", nullptr) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_model_load_file("/nonexistent/model.onnx", &m) == TERN_ERR_IO);
    CHECK(has("/nonexistent/model.onnx"));
    CHECK(tern_model_load_file("/tmp", &m) == TERN_ERR_IO);
    CHECK(tern_model_load_memory(nullptr, 10, &m) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_model_load_memory("abc", 0, &m) == TERN_ERR_INVALID_MODEL);
    CHECK(tern_model_load_memory("definitely not a model", 22, &m) == kNotTernFileStatus);
    CHECK(m == nullptr);
    CHECK(tern_model_save(nullptr, "x.tern") == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_model_input_count(nullptr) == 0);
    CHECK(tern_model_input_name(nullptr, 0) == nullptr);
    CHECK(tern_model_input_info(nullptr, 0, nullptr, nullptr, nullptr) ==
          TERN_ERR_INVALID_ARGUMENT);
    tern_model_destroy(nullptr);
    if (!have_shared_models()) {
      MESSAGE((std::string("skipped the model part: ") + models_unavailable()));
      return;
    }
    REQUIRE(tern_model_load_file((model_dir("ppocr_cls") + "/model.onnx").c_str(), &m) == TERN_OK);
    CHECK(tern_model_input_count(m) == 1);
    CHECK(std::string(tern_model_input_name(m, 0)) == "x");
    CHECK(tern_model_input_name(m, 1) == nullptr);
    tern_dtype dt;
    size_t rank;
    const int64_t* shape;
    REQUIRE(tern_model_input_info(m, 0, &dt, &rank, &shape) == TERN_OK);
    CHECK(dt == TERN_FLOAT32);
    CHECK(rank == 4);
    CHECK(shape[0] == -1);
    CHECK(shape[1] == 3);
    CHECK(tern_model_output_info(m, 5, &dt, &rank, &shape) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(has("out of range"));
    CHECK(tern_model_save(m, "/nonexistent/dir/x.tern") == TERN_ERR_IO);
    tern_model_destroy(m);
  }

  TEST_CASE("session options and creation") {
    tern_session_options* o = nullptr;
    CHECK(tern_session_options_create(nullptr) == TERN_ERR_INVALID_ARGUMENT);
    REQUIRE(tern_session_options_create(&o) == TERN_OK);
    CHECK(tern_session_options_set_backends(o, "cpu,tpu") == TERN_ERR_INVALID_ARGUMENT);
    CHECK(has("unknown backend 'tpu'"));
    CHECK(tern_session_options_set_backends(o, nullptr) == TERN_ERR_INVALID_ARGUMENT);
    // A device by index, as the header names them; malformed indices are refused.
    CHECK(tern_session_options_set_backends(o, "cuda:1,cpu") == TERN_OK);
    for (const char* bad : {"cuda:", "cuda:x", "cuda:-1", "cpu:1x"}) {
      CHECK_MESSAGE(tern_session_options_set_backends(o, bad) == TERN_ERR_INVALID_ARGUMENT, bad);
    }
    CHECK(tern_session_options_set_num_threads(o, -1) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_session_options_set_num_interop_threads(nullptr, 1) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_session_options_set_flag(o, "num_threads", "two") == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_session_options_set_flag(o, "no.such.flag", "1") == TERN_ERR_INVALID_ARGUMENT);
    CHECK(has("no.such.flag"));
    CHECK(tern_session_options_set_flag(o, "num_threads", "1") == TERN_OK);
    tern_session* s = nullptr;
    CHECK(tern_session_create(nullptr, o, &s) == TERN_ERR_INVALID_ARGUMENT);
    if (have_shared_models()) {
      tern_model* m = nullptr;
      REQUIRE(tern_model_load_file((model_dir("ppocr_cls") + "/model.onnx").c_str(), &m) ==
              TERN_OK);
      REQUIRE(tern_session_options_set_backends(o, "cuda,cpu") == TERN_OK);
      if (!tern_cuda_is_built()) {
        CHECK(tern_session_create(m, o, &s) == TERN_ERR_BACKEND_UNAVAILABLE);
        CHECK(has("'cuda' is not built"));
      } else if (!tern_cuda_is_available()) {
        CHECK(tern_session_create(m, o, &s) == TERN_ERR_BACKEND_UNAVAILABLE);
        CHECK(has("no CUDA device"));
      }
      REQUIRE(tern_session_options_set_backends(o, "cuda:1,cpu") == TERN_OK);
      if (!tern_cuda_is_available()) {
        CHECK(tern_session_create(m, o, &s) == TERN_ERR_BACKEND_UNAVAILABLE);
        CHECK(s == nullptr);
      }
      REQUIRE(tern_session_options_set_backends(o, "cpu") == TERN_OK);
      REQUIRE(tern_session_create(m, o, &s) == TERN_OK);
      tern_model_destroy(m);  // the session keeps what it needs
      CHECK(tern_session_save_optimized(nullptr, "x.tern", nullptr) == TERN_ERR_INVALID_ARGUMENT);
      CHECK(tern_session_save_optimized(s, nullptr, nullptr) == TERN_ERR_INVALID_ARGUMENT);
      CHECK(tern_session_save_optimized(s, "/nonexistent/dir/x.tern", nullptr) == TERN_ERR_IO);
      const std::string path = std::filesystem::temp_directory_path() / "tern_api_opt.tern";
      size_t packed = 99;
      CHECK(tern_session_save_optimized(s, path.c_str(), &packed) == TERN_OK);
      CHECK(packed < 99);
      tern_session_destroy(s);
      REQUIRE(tern_model_load_file(path.c_str(), &m) == TERN_OK);  // loads and runs again
      REQUIRE(tern_session_create(m, o, &s) == TERN_OK);
      tern_session_destroy(s);
      tern_model_destroy(m);
      std::filesystem::remove(path);
    }
    tern_session_options_destroy(o);
    tern_session_options_destroy(nullptr);
    tern_session_destroy(nullptr);
    tern_run_options* r = nullptr;
    REQUIRE(tern_run_options_create(&r) == TERN_OK);
    tern_run_options_destroy(r);
  }

  TEST_CASE("profiling writes a Chrome trace with one event per node per run; memory info") {
    tern_session_options* o = nullptr;
    REQUIRE(tern_session_options_create(&o) == TERN_OK);
    CHECK(tern_session_options_enable_profiling(nullptr, "x") == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_session_end_profiling(nullptr) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_session_memory_info(nullptr, nullptr, nullptr) == TERN_ERR_INVALID_ARGUMENT);
    if (!have_shared_models()) {
      MESSAGE((std::string("skipped: ") + models_unavailable()));
      tern_session_options_destroy(o);
      return;
    }
    const std::string path = std::filesystem::temp_directory_path() / "tern_api_profile.json";
    std::filesystem::remove(path);
    REQUIRE(tern_session_options_enable_profiling(o, path.c_str()) == TERN_OK);
    // One thread count for both runs (adaptive threads would plan a second one where another
    // process keeps a core busy).
    REQUIRE(tern_session_options_set_flag(o, "cpu.adaptive_threads", "0") == TERN_OK);
    tern_model* m = nullptr;
    REQUIRE(tern_model_load_file((model_dir("ppocr_cls") + "/model.onnx").c_str(), &m) == TERN_OK);
    tern_session *s = nullptr, *plain = nullptr;
    REQUIRE(tern_session_create(m, o, &s) == TERN_OK);
    REQUIRE(tern_session_create(m, nullptr, &plain) == TERN_OK);
    CHECK(tern_session_end_profiling(plain) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(has("not created with profiling"));
    // The classifier's input has dynamic dims: no plan before the first run.
    CHECK(tern_session_memory_info(s, nullptr, nullptr) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(has("no plan yet"));
    const int64_t shape[] = {1, 3, 48, 192};
    tern_tensor* x = nullptr;
    REQUIRE(tern_tensor_create(TERN_FLOAT32, shape, 4, &x) == TERN_OK);
    const char* in[] = {"x"};
    const char* out[] = {tern_model_output_name(m, 0)};
    for (int r = 0; r < 2; ++r) {
      tern_tensor* y = nullptr;
      REQUIRE(tern_session_run(s, nullptr, in, &x, 1, out, 1, &y) == TERN_OK);
      tern_tensor_destroy(y);
    }
    size_t act = 0, packed = 0;
    CHECK(tern_session_memory_info(s, &act, &packed) == TERN_OK);
    CHECK(act > 0);
    REQUIRE(tern_session_end_profiling(s) == TERN_OK);
    std::ifstream f(path);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    auto count = [&](const std::string& needle) {
      size_t n = 0;
      for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
      return n;
    };
    CHECK(text.rfind("{\"displayTimeUnit\"", 0) == 0);
    CHECK(count("\"cat\":\"run\"") == 2);
    // Session creation, and the plan the first run made (the second run's shapes are cached).
    CHECK(count("\"cat\":\"session\"") == 2);
    CHECK(count("\"name\":\"plan\"") == 1);
    const size_t nodes = count("\"cat\":\"node\"");
    CHECK(nodes > 20);
    CHECK(nodes % 2 == 0);  // the same steps in both runs
    CHECK(count("\"op\":\"Conv\"") + count("\"op\":\"FusedConv\"") > 0);
    CHECK(count("\"kernel\":") == nodes);
    CHECK(count("\"outputs\":\"float32[1,") > 0);
    tern_tensor_destroy(x);
    tern_session_destroy(plain);
    tern_session_destroy(s);
    tern_model_destroy(m);
    tern_session_options_destroy(o);
    std::filesystem::remove(path);
  }

  TEST_CASE("run: bad names, dtypes, shapes and NULLs are INVALID_ARGUMENT with the input named") {
    if (!have_shared_models()) {
      MESSAGE((std::string("skipped: ") + models_unavailable()));
      return;
    }
    ClsSession cls;
    int64_t good[] = {1, 3, 48, 192};
    Handles h;
    tern_tensor *x = nullptr, *x_int = nullptr, *x_rank3 = nullptr, *x_dims = nullptr;
    REQUIRE(tern_tensor_create(TERN_FLOAT32, good, 4, &x) == TERN_OK);
    REQUIRE(tern_tensor_create(TERN_INT64, good, 4, &x_int) == TERN_OK);
    REQUIRE(tern_tensor_create(TERN_FLOAT32, good, 3, &x_rank3) == TERN_OK);
    int64_t four_channels[] = {1, 4, 48, 192};
    REQUIRE(tern_tensor_create(TERN_FLOAT32, four_channels, 4, &x_dims) == TERN_OK);
    h.tensors = {x, x_int, x_rank3, x_dims};
    const char* in_x[] = {"x"};
    const char* in_bad[] = {"y"};
    const char* in_twice[] = {"x", "x"};
    const char* out[] = {"softmax_0.tmp_0"};
    const char* out_bad[] = {"nope"};
    tern_tensor* result[2] = {nullptr, nullptr};
    const tern_tensor* one[] = {x};
    const tern_tensor* two[] = {x, x};
    CHECK(tern_session_run(nullptr, nullptr, in_x, one, 1, out, 1, result) ==
          TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_session_run(cls.session, nullptr, nullptr, one, 1, out, 1, result) ==
          TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_session_run(cls.session, nullptr, in_x, nullptr, 1, out, 1, result) ==
          TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_session_run(cls.session, nullptr, in_x, one, 1, out, 1, nullptr) ==
          TERN_ERR_INVALID_ARGUMENT);
    const tern_tensor* null_tensor[] = {nullptr};
    CHECK(tern_session_run(cls.session, nullptr, in_x, null_tensor, 1, out, 1, result) ==
          TERN_ERR_INVALID_ARGUMENT);
    CHECK(has("inputs[0] ('x') is NULL"));
    CHECK(tern_session_run(cls.session, nullptr, in_bad, one, 1, out, 1, result) ==
          TERN_ERR_INVALID_ARGUMENT);
    CHECK(has("unknown input name 'y'"));
    CHECK(tern_session_run(cls.session, nullptr, in_x, one, 0, out, 1, result) ==
          TERN_ERR_INVALID_ARGUMENT);
    CHECK(has("'x' is not given"));
    CHECK(tern_session_run(cls.session, nullptr, in_twice, two, 2, out, 1, result) ==
          TERN_ERR_INVALID_ARGUMENT);
    CHECK(has("given twice"));
    const tern_tensor* wrong_dtype[] = {x_int};
    CHECK(tern_session_run(cls.session, nullptr, in_x, wrong_dtype, 1, out, 1, result) ==
          TERN_ERR_INVALID_ARGUMENT);
    CHECK(has("must be float32, got int64"));
    const tern_tensor* wrong_rank[] = {x_rank3};
    CHECK(tern_session_run(cls.session, nullptr, in_x, wrong_rank, 1, out, 1, result) ==
          TERN_ERR_INVALID_ARGUMENT);
    CHECK(has("must have shape [?,3,?,?]"));
    const tern_tensor* wrong_dims[] = {x_dims};
    CHECK(tern_session_run(cls.session, nullptr, in_x, wrong_dims, 1, out, 1, result) ==
          TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_session_run(cls.session, nullptr, in_x, one, 1, out_bad, 1, result) ==
          TERN_ERR_INVALID_ARGUMENT);
    CHECK(has("unknown output name 'nope'"));
    CHECK(result[0] == nullptr);
    // A shape that passes the declared dims but breaks inside the graph names the node.
    int64_t tiny[] = {1, 3, 1, 1};
    tern_tensor* x_tiny = nullptr;
    REQUIRE(tern_tensor_create(TERN_FLOAT32, tiny, 4, &x_tiny) == TERN_OK);
    h.tensors.push_back(x_tiny);
    const tern_tensor* tiny_in[] = {x_tiny};
    tern_status s = tern_session_run(cls.session, nullptr, in_x, tiny_in, 1, out, 1, result);
    CHECK(s == TERN_ERR_INVALID_ARGUMENT);
    CHECK(has("node '"));
    CHECK(has("(MaxPool)"));
    // And the session still works afterwards.
    REQUIRE(tern_session_run(cls.session, nullptr, in_x, one, 1, out, 1, result) == TERN_OK);
    CHECK(tern_tensor_shape(result[0])[1] == 2);
    tern_tensor_destroy(result[0]);
  }

  TEST_CASE("tern_last_error is per thread") {
    tern_tensor* t = nullptr;
    CHECK(tern_tensor_create(TERN_FLOAT32, nullptr, 1, &t) == TERN_ERR_INVALID_ARGUMENT);
    std::string mine = tern_last_error();
    std::thread other([] {
      tern_model* m = nullptr;
      CHECK(tern_model_load_file("/nonexistent.onnx", &m) == TERN_ERR_IO);
    });
    other.join();
    CHECK(std::string(tern_last_error()) == mine);
  }

  TEST_CASE("one session runs from several threads at once with identical results") {
    if (!have_shared_models()) {
      MESSAGE((std::string("skipped: ") + models_unavailable()));
      return;
    }
    ClsSession cls;
    ReferenceCase rc = load_reference_case(model_dir("ppocr_cls"), cls.model);
    auto run_once = [&](std::vector<float>* out) {
      tern_tensor* x = nullptr;
      const tern::Tensor& in = rc.inputs[0];
      REQUIRE(tern_tensor_create_from_data(TERN_FLOAT32, in.shape().data(), in.rank(), in.raw(),
                                           in.byte_size(), nullptr, nullptr, &x) == TERN_OK);
      const char* in_names[] = {"x"};
      const char* out_names[] = {"softmax_0.tmp_0"};
      const tern_tensor* ins[] = {x};
      tern_tensor* y = nullptr;
      tern_status s = tern_session_run(cls.session, nullptr, in_names, ins, 1, out_names, 1, &y);
      tern_tensor_destroy(x);
      REQUIRE(s == TERN_OK);
      const float* p = static_cast<const float*>(tern_tensor_data(y));
      out->assign(p, p + 2);
      tern_tensor_destroy(y);
    };
    std::vector<float> serial;
    run_once(&serial);
    std::vector<std::vector<float>> results(4);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 5; ++i) run_once(&results[static_cast<size_t>(t)]);
      });
    }
    for (auto& t : threads) t.join();
    for (const auto& r : results) CHECK(r == serial);
  }
}

TEST_SUITE("api") {
  TEST_CASE("device tensors: create, device name, copy, output device; refusals by name") {
    const int64_t shape[] = {2, 3};
    tern_tensor* a = nullptr;
    tern_tensor* b = nullptr;
    REQUIRE(tern_tensor_create_on_device(TERN_FLOAT32, shape, 2, "cpu", &a) == TERN_OK);
    REQUIRE(tern_tensor_create(TERN_FLOAT32, shape, 2, &b) == TERN_OK);
    CHECK(std::string(tern_tensor_device(a)) == "cpu");
    CHECK(tern_tensor_device(nullptr) == nullptr);
    auto* pa = static_cast<float*>(tern_tensor_data(a));
    for (int i = 0; i < 6; ++i) pa[i] = static_cast<float>(i) * 1.5f;
    REQUIRE(tern_tensor_copy(a, b) == TERN_OK);
    CHECK(std::memcmp(tern_tensor_data(a), tern_tensor_data(b), 24) == 0);
    tern_tensor* c = nullptr;
    const int64_t other[] = {3, 2};
    REQUIRE(tern_tensor_create(TERN_FLOAT32, other, 2, &c) == TERN_OK);
    CHECK(tern_tensor_copy(a, c) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(std::string(tern_last_error())
              .find(std::string("src is float32") + tern::shape_str({2, 3})) != std::string::npos);
    CHECK(tern_tensor_copy(nullptr, c) == TERN_ERR_INVALID_ARGUMENT);
    tern_tensor* d = nullptr;
    CHECK(tern_tensor_create_on_device(TERN_FLOAT32, shape, 2, "tpu", &d) ==
          TERN_ERR_INVALID_ARGUMENT);
    CHECK(std::string(tern_last_error()).find("unknown backend 'tpu'") != std::string::npos);
    CHECK(tern_tensor_create_on_device(TERN_FLOAT32, shape, 2, nullptr, &d) ==
          TERN_ERR_INVALID_ARGUMENT);
    tern_run_options* r = nullptr;
    REQUIRE(tern_run_options_create(&r) == TERN_OK);
    CHECK(tern_run_options_set_output_device(r, "cpu") == TERN_OK);
    CHECK(tern_run_options_set_output_device(r, "gpu") == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_run_options_set_output_device(nullptr, "cpu") == TERN_ERR_INVALID_ARGUMENT);
    if (!tern_cuda_is_available()) {
      CHECK(tern_tensor_create_on_device(TERN_FLOAT32, shape, 2, "cuda", &d) ==
            TERN_ERR_BACKEND_UNAVAILABLE);
      CHECK(d == nullptr);
      CHECK(tern_run_options_set_output_device(r, "cuda") == TERN_ERR_BACKEND_UNAVAILABLE);
      CHECK(std::string(tern_last_error()).find("cuda") != std::string::npos);
    }
    tern_run_options_destroy(r);
    tern_tensor_destroy(a);
    tern_tensor_destroy(b);
    tern_tensor_destroy(c);
  }
}
