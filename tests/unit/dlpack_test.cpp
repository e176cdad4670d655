// DLPack in the C ABI: tern_tensor_from_dlpack / tern_tensor_to_dlpack share memory both ways,
// call each deleter exactly once, accept the strides of dense row-major layouts only, and answer
// bad structs with a status.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "c_api.h"
#include "test_util.h"

namespace {

bool has(const char* needle) {
  return std::strstr(tern_last_error(), needle) != nullptr;
}

// A producer's tensor: float data it owns, described by a DLManagedTensorVersioned whose deleter
// counts its calls (the struct outlives them, so a test can read the count).
struct Producer {
  std::vector<float> data;
  std::vector<int64_t> shape, strides;
  DLManagedTensorVersioned m{};
  int deleted = 0;

  Producer(std::vector<int64_t> dims, std::vector<int64_t> st = {}) : shape(dims), strides(st) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    for (int64_t i = 0; i < n; ++i) data.push_back(0.5f * static_cast<float>(i) - 3.0f);
    m.version = {1, 0};
    m.manager_ctx = this;
    m.deleter = [](DLManagedTensorVersioned* self) {
      ++static_cast<Producer*>(self->manager_ctx)->deleted;
    };
    m.dl_tensor.data = data.data();
    m.dl_tensor.device = {kDLCPU, 0};
    m.dl_tensor.ndim = static_cast<int32_t>(shape.size());
    m.dl_tensor.dtype = {kDLFloat, 32, 1};
    m.dl_tensor.shape = shape.data();
    m.dl_tensor.strides = strides.empty() ? nullptr : strides.data();
  }
};

}  // namespace

TEST_SUITE("api") {
  TEST_CASE("DLPack: a producer's tensor runs in a session without a copy, deleted once") {
    tern_model* model = nullptr;
    REQUIRE(tern_model_load_file(tern_test::matmul_seed_model().c_str(), &model) == TERN_OK);
    tern_session* session = nullptr;
    REQUIRE(tern_session_create(model, nullptr, &session) == TERN_OK);
    const char* in_name = tern_model_input_name(model, 0);
    const char* out_name = tern_model_output_name(model, 0);

    Producer p({3, 8});
    tern_tensor* x = nullptr;
    REQUIRE(tern_tensor_from_dlpack(&p.m, &x) == TERN_OK);
    CHECK(tern_tensor_data(x) == p.data.data());  // zero-copy
    CHECK(tern_tensor_dtype(x) == TERN_FLOAT32);
    REQUIRE(tern_tensor_rank(x) == 2);
    CHECK(tern_tensor_shape(x)[0] == 3);
    CHECK(tern_tensor_shape(x)[1] == 8);
    CHECK(tern_tensor_is_read_only(x) == 0);

    // The same run fed through tern_tensor_create_from_data gives the same bits.
    tern_tensor* y = nullptr;
    int64_t dims[] = {3, 8};
    REQUIRE(tern_tensor_create_from_data(TERN_FLOAT32, dims, 2, p.data.data(),
                                         p.data.size() * sizeof(float), nullptr, nullptr,
                                         &y) == TERN_OK);
    tern_tensor *out_x = nullptr, *out_y = nullptr;
    const tern_tensor* in_x = x;
    const tern_tensor* in_y = y;
    REQUIRE(tern_session_run(session, nullptr, &in_name, &in_x, 1, &out_name, 1, &out_x) ==
            TERN_OK);
    REQUIRE(tern_session_run(session, nullptr, &in_name, &in_y, 1, &out_name, 1, &out_y) ==
            TERN_OK);
    REQUIRE(tern_tensor_byte_size(out_x) == tern_tensor_byte_size(out_y));
    CHECK(std::memcmp(tern_tensor_data(out_x), tern_tensor_data(out_y),
                      tern_tensor_byte_size(out_x)) == 0);
    CHECK(p.deleted == 0);  // the run only borrowed it
    tern_tensor_destroy(x);
    CHECK(p.deleted == 1);
    tern_tensor_destroy(y);
    CHECK(p.deleted == 1);

    // An output exported: its memory outlives the tern tensor until the DLPack deleter runs.
    std::vector<unsigned char> want(
        static_cast<unsigned char*>(tern_tensor_data(out_x)),
        static_cast<unsigned char*>(tern_tensor_data(out_x)) + tern_tensor_byte_size(out_x));
    DLManagedTensorVersioned* e = nullptr;
    REQUIRE(tern_tensor_to_dlpack(out_x, &e) == TERN_OK);
    CHECK(e->dl_tensor.data == tern_tensor_data(out_x));
    CHECK(e->version.major == 1);
    CHECK(e->flags == 0);
    CHECK(e->dl_tensor.device.device_type == kDLCPU);
    CHECK(e->dl_tensor.dtype.code == kDLFloat);
    CHECK(e->dl_tensor.dtype.bits == 32);
    CHECK(e->dl_tensor.dtype.lanes == 1);
    REQUIRE(e->dl_tensor.ndim == static_cast<int32_t>(tern_tensor_rank(out_x)));
    int64_t stride = 1;
    for (int32_t i = e->dl_tensor.ndim - 1; i >= 0; --i) {
      CHECK(e->dl_tensor.shape[i] == tern_tensor_shape(out_x)[i]);
      CHECK(e->dl_tensor.strides[i] == stride);
      stride *= e->dl_tensor.shape[i];
    }
    tern_tensor_destroy(out_x);
    tern_tensor_destroy(out_y);
    CHECK(std::memcmp(e->dl_tensor.data, want.data(), want.size()) == 0);
    e->deleter(e);
    tern_session_destroy(session);
    tern_model_destroy(model);
  }

  TEST_CASE("DLPack: round trip keeps the producer's memory alive until the last deleter") {
    Producer p({2, 3});
    tern_tensor* t = nullptr;
    REQUIRE(tern_tensor_from_dlpack(&p.m, &t) == TERN_OK);
    DLManagedTensorVersioned* e = nullptr;
    REQUIRE(tern_tensor_to_dlpack(t, &e) == TERN_OK);
    CHECK(e->dl_tensor.data == p.data.data());
    tern_tensor_destroy(t);
    CHECK(p.deleted == 0);  // the export still uses the data
    // Back into Tern: the export itself is a producer's tensor now.
    tern_tensor* back = nullptr;
    REQUIRE(tern_tensor_from_dlpack(e, &back) == TERN_OK);
    CHECK(tern_tensor_data(back) == p.data.data());
    CHECK(p.deleted == 0);
    tern_tensor_destroy(back);
    CHECK(p.deleted == 1);
  }

  TEST_CASE("DLPack: strides, byte_offset and the read-only flag") {
    {  // Explicit C-contiguous strides, and any stride along dims of size 1.
      Producer p({2, 1, 3}, {3, 99, 1});
      tern_tensor* t = nullptr;
      REQUIRE(tern_tensor_from_dlpack(&p.m, &t) == TERN_OK);
      tern_tensor_destroy(t);
      CHECK(p.deleted == 1);
    }
    {  // A transposed view: refused, and the producer keeps its tensor.
      Producer p({2, 3}, {1, 2});
      tern_tensor* t = nullptr;
      CHECK(tern_tensor_from_dlpack(&p.m, &t) == TERN_ERR_UNSUPPORTED);
      CHECK(has("not row-major contiguous"));
      CHECK(t == nullptr);
      CHECK(p.deleted == 0);
    }
    {  // A sliced view (every other row).
      Producer p({2, 3}, {6, 1});
      tern_tensor* t = nullptr;
      CHECK(tern_tensor_from_dlpack(&p.m, &t) == TERN_ERR_UNSUPPORTED);
      CHECK(p.deleted == 0);
    }
    {  // An empty tensor takes any strides.
      Producer p({0, 3}, {7, 5});
      tern_tensor* t = nullptr;
      REQUIRE(tern_tensor_from_dlpack(&p.m, &t) == TERN_OK);
      CHECK(tern_tensor_byte_size(t) == 0);
      tern_tensor_destroy(t);
      CHECK(p.deleted == 1);
    }
    {  // byte_offset moves the first element; a misaligned one is refused.
      Producer p({2, 2});
      p.m.dl_tensor.byte_offset = 2 * sizeof(float);
      p.m.dl_tensor.shape[0] = 1;
      tern_tensor* t = nullptr;
      REQUIRE(tern_tensor_from_dlpack(&p.m, &t) == TERN_OK);
      CHECK(tern_tensor_data(t) == p.data.data() + 2);
      tern_tensor_destroy(t);
      p.m.dl_tensor.byte_offset = 2;
      CHECK(tern_tensor_from_dlpack(&p.m, &t) == TERN_ERR_UNSUPPORTED);
      CHECK(has("aligned"));
    }
    {  // Read-only: kept, passed on, and never a copy's destination.
      Producer p({4});
      p.m.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
      tern_tensor* t = nullptr;
      REQUIRE(tern_tensor_from_dlpack(&p.m, &t) == TERN_OK);
      CHECK(tern_tensor_is_read_only(t) == 1);
      tern_tensor* src = nullptr;
      int64_t dims[] = {4};
      REQUIRE(tern_tensor_create(TERN_FLOAT32, dims, 1, &src) == TERN_OK);
      CHECK(tern_tensor_copy(src, t) == TERN_ERR_INVALID_ARGUMENT);
      CHECK(has("read-only"));
      CHECK(p.data[0] == -3.0f);                   // not overwritten with the zeros of src
      CHECK(tern_tensor_copy(t, src) == TERN_OK);  // a source it may be
      CHECK(static_cast<float*>(tern_tensor_data(src))[1] == -2.5f);
      DLManagedTensorVersioned* e = nullptr;
      REQUIRE(tern_tensor_to_dlpack(t, &e) == TERN_OK);
      CHECK((e->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0);
      e->deleter(e);
      tern_tensor_destroy(src);
      tern_tensor_destroy(t);
      CHECK(p.deleted == 1);
    }
  }

  TEST_CASE("DLPack: dtypes both ways") {
    const struct {
      tern_dtype dtype;
      uint8_t code, bits;
    } cases[] = {
        {TERN_FLOAT32, kDLFloat, 32},   {TERN_FLOAT64, kDLFloat, 64}, {TERN_FLOAT16, kDLFloat, 16},
        {TERN_BFLOAT16, kDLBfloat, 16}, {TERN_INT8, kDLInt, 8},       {TERN_INT16, kDLInt, 16},
        {TERN_INT32, kDLInt, 32},       {TERN_INT64, kDLInt, 64},     {TERN_UINT8, kDLUInt, 8},
        {TERN_UINT16, kDLUInt, 16},     {TERN_UINT32, kDLUInt, 32},   {TERN_UINT64, kDLUInt, 64},
        {TERN_BOOL, kDLBool, 8}};
    for (const auto& c : cases) {
      CAPTURE(static_cast<int>(c.dtype));
      int64_t dims[] = {5};
      tern_tensor* t = nullptr;
      REQUIRE(tern_tensor_create(c.dtype, dims, 1, &t) == TERN_OK);
      DLManagedTensorVersioned* e = nullptr;
      REQUIRE(tern_tensor_to_dlpack(t, &e) == TERN_OK);
      CHECK(e->dl_tensor.dtype.code == c.code);
      CHECK(e->dl_tensor.dtype.bits == c.bits);
      tern_tensor* back = nullptr;
      REQUIRE(tern_tensor_from_dlpack(e, &back) == TERN_OK);
      CHECK(tern_tensor_dtype(back) == c.dtype);
      CHECK(tern_tensor_data(back) == tern_tensor_data(t));
      tern_tensor_destroy(t);
      tern_tensor_destroy(back);
    }
    Producer p({2});
    tern_tensor* t = nullptr;
    p.m.dl_tensor.dtype = {kDLComplex, 64, 1};
    CHECK(tern_tensor_from_dlpack(&p.m, &t) == TERN_ERR_UNSUPPORTED);
    p.m.dl_tensor.dtype = {kDLFloat, 32, 4};
    CHECK(tern_tensor_from_dlpack(&p.m, &t) == TERN_ERR_UNSUPPORTED);
    CHECK(has("lanes"));
    p.m.dl_tensor.dtype = {kDLFloat, 8, 1};
    CHECK(tern_tensor_from_dlpack(&p.m, &t) == TERN_ERR_UNSUPPORTED);
    CHECK(p.deleted == 0);
    int64_t dims[] = {1};
    tern_tensor* s = nullptr;
    REQUIRE(tern_tensor_create(TERN_FLOAT32, dims, 1, &s) == TERN_OK);
    CHECK(tern_tensor_to_dlpack(s, nullptr) == TERN_ERR_INVALID_ARGUMENT);
    tern_tensor_destroy(s);
  }

  TEST_CASE("DLPack: bad structs get a status, never a crash, and stay the caller's") {
    tern_tensor* t = nullptr;
    DLManagedTensorVersioned* e = nullptr;
    CHECK(tern_tensor_from_dlpack(nullptr, &t) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_tensor_to_dlpack(nullptr, &e) == TERN_ERR_INVALID_ARGUMENT);
    Producer p({2, 3});
    CHECK(tern_tensor_from_dlpack(&p.m, nullptr) == TERN_ERR_INVALID_ARGUMENT);
    p.m.version.major = 2;
    CHECK(tern_tensor_from_dlpack(&p.m, &t) == TERN_ERR_UNSUPPORTED);
    CHECK(has("version 2"));
    p.m.version.major = 1;
    p.m.dl_tensor.device = {kDLCUDA, 0};
    CHECK(tern_tensor_from_dlpack(&p.m, &t) == TERN_ERR_UNSUPPORTED);
    CHECK(has("device type 2"));
    p.m.dl_tensor.device = {kDLCPU, 0};
    p.m.dl_tensor.ndim = -1;
    CHECK(tern_tensor_from_dlpack(&p.m, &t) == TERN_ERR_INVALID_ARGUMENT);
    p.m.dl_tensor.ndim = 65;
    CHECK(tern_tensor_from_dlpack(&p.m, &t) == TERN_ERR_INVALID_ARGUMENT);
    p.m.dl_tensor.ndim = 2;
    p.m.dl_tensor.shape = nullptr;
    CHECK(tern_tensor_from_dlpack(&p.m, &t) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(has("shape is NULL"));
    p.m.dl_tensor.shape = p.shape.data();
    p.shape[1] = -3;
    CHECK(tern_tensor_from_dlpack(&p.m, &t) == TERN_ERR_INVALID_ARGUMENT);
    p.shape[1] = int64_t{1} << 40;
    p.shape[0] = int64_t{1} << 40;
    CHECK(tern_tensor_from_dlpack(&p.m, &t) == TERN_ERR_INVALID_ARGUMENT);
    p.shape = {2, 3};
    p.m.dl_tensor.shape = p.shape.data();
    p.m.dl_tensor.data = nullptr;
    CHECK(tern_tensor_from_dlpack(&p.m, &t) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(has("data is NULL"));
    CHECK(t == nullptr);
    CHECK(p.deleted == 0);
    // A NULL deleter is allowed: nothing to call.
    p.m.dl_tensor.data = p.data.data();
    p.m.deleter = nullptr;
    REQUIRE(tern_tensor_from_dlpack(&p.m, &t) == TERN_OK);
    tern_tensor_destroy(t);
    CHECK(p.deleted == 0);
  }
}
