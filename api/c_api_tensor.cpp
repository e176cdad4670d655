#include "api/api_internal.h"

using tern::Status;

namespace {

Status check_shape(tern_dtype dtype, const int64_t* shape, size_t rank, tern::Shape* out) {
  TERN_API_REQUIRE(tern::dtype_in_c_api(static_cast<int32_t>(dtype)), "unknown dtype ",
                   static_cast<int>(dtype));
  if (dtype == TERN_STRING) {
    return tern::unsupported("string tensors are not supported through the C API yet");
  }
  TERN_API_REQUIRE(rank == 0 || shape, "shape is NULL but rank is ", rank);
  TERN_API_REQUIRE(rank <= 64, "rank ", rank, " exceeds the maximum of 64");
  out->assign(shape, shape + rank);
  auto n = tern::checked_numel(*out);
  if (!n) return n.status();
  const size_t es = tern::dtype_size(static_cast<tern::DType>(dtype));
  TERN_API_REQUIRE(static_cast<uint64_t>(*n) <= (uint64_t{1} << 62) / es, "tensor too large");
  return Status::ok();
}

}  // namespace

extern "C" {

tern_status tern_tensor_create(tern_dtype dtype, const int64_t* shape, size_t rank,
                               tern_tensor** out) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(out, "out is NULL");
    tern::Shape s;
    TERN_RETURN_IF_ERROR(check_shape(dtype, shape, rank, &s));
    TERN_ASSIGN_OR_RETURN(tern::Tensor t,
                          tern::Tensor::allocate(static_cast<tern::DType>(dtype), s));
    *out = new tern_tensor{std::move(t)};
    return Status::ok();
  });
}

tern_status tern_tensor_create_from_data(tern_dtype dtype, const int64_t* shape, size_t rank,
                                         void* data, size_t byte_size,
                                         void (*deleter)(void*, void*), void* ctx,
                                         tern_tensor** out) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(out, "out is NULL");
    tern::Shape s;
    TERN_RETURN_IF_ERROR(check_shape(dtype, shape, rank, &s));
    const size_t need =
        static_cast<size_t>(tern::numel(s)) * tern::dtype_size(static_cast<tern::DType>(dtype));
    TERN_API_REQUIRE(byte_size >= need, "byte_size ", byte_size, " is smaller than the ", need,
                     " bytes shape ", tern::shape_str(s), " needs");
    TERN_API_REQUIRE(data || need == 0, "data is NULL for a non-empty tensor");
    // The deleter runs when the last user of the data goes, and never on a failure here: the
    // owner is armed only after everything that may throw has been made.
    struct Owner {
      Owner(void* d, void (*del)(void*, void*), void* c) : data(d), deleter(del), ctx(c) {}
      Owner(const Owner&) = delete;
      Owner& operator=(const Owner&) = delete;
      ~Owner() {
        if (armed) deleter(data, ctx);
      }
      void* data;
      void (*deleter)(void*, void*);
      void* ctx;
      bool armed = false;
    };
    std::shared_ptr<Owner> owner;
    if (deleter) owner = std::make_shared<Owner>(data, deleter, ctx);
    std::shared_ptr<void> keep = owner ? std::shared_ptr<void>(owner, data) : nullptr;
    auto* t = new tern_tensor{tern::Tensor::wrap(static_cast<tern::DType>(dtype), s, data, keep)};
    if (owner) owner->armed = true;
    *out = t;
    return Status::ok();
  });
}

void tern_tensor_destroy(tern_tensor* t) {
  delete t;
}

tern_dtype tern_tensor_dtype(const tern_tensor* t) {
  return t ? static_cast<tern_dtype>(t->t.dtype()) : static_cast<tern_dtype>(0);
}
size_t tern_tensor_rank(const tern_tensor* t) {
  return t ? t->t.rank() : 0;
}
const int64_t* tern_tensor_shape(const tern_tensor* t) {
  return t ? t->t.shape().data() : nullptr;
}
void* tern_tensor_data(tern_tensor* t) {
  return t && t->t.byte_size() ? t->t.raw() : nullptr;
}
size_t tern_tensor_byte_size(const tern_tensor* t) {
  return t ? t->t.byte_size() : 0;
}

}  // extern "C"
