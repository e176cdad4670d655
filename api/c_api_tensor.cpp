#include <algorithm>
#include <cstring>

#include "api/api_internal.h"
#include "backends/registry.h"

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

tern_status tern_tensor_create_on_device(tern_dtype dtype, const int64_t* shape, size_t rank,
                                         const char* device, tern_tensor** out) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(out, "out is NULL");
    TERN_API_REQUIRE(device, "device is NULL");
    tern::Shape s;
    TERN_RETURN_IF_ERROR(check_shape(dtype, shape, rank, &s));
    const auto dt = static_cast<tern::DType>(dtype);
    TERN_API_REQUIRE(dt != tern::DType::kString || std::string(device) == "cpu",
                     "string tensors live in host memory only");
    TERN_ASSIGN_OR_RETURN(tern::Backend * b, tern::backends::get(device));
    if (b->is_host()) {
      TERN_ASSIGN_OR_RETURN(tern::Tensor t, tern::Tensor::allocate(dt, s));
      *out = new tern_tensor{std::move(t)};
      return Status::ok();
    }
    const size_t bytes = static_cast<size_t>(tern::numel(s)) * tern::dtype_size(dt);
    TERN_ASSIGN_OR_RETURN(std::shared_ptr<void> mem, b->allocate(bytes));
    void* raw = mem.get();
    tern::Tensor t = tern::Tensor::wrap(dt, s, raw, std::move(mem), b->device());
    // Zero-filled, as tern_tensor_create's: through a copy of a zeroed host buffer.
    TERN_ASSIGN_OR_RETURN(tern::Tensor zeros, tern::Tensor::allocate(dt, s));
    TERN_RETURN_IF_ERROR(b->copy_to_device(zeros, t));
    TERN_RETURN_IF_ERROR(b->synchronize());
    *out = new tern_tensor{std::move(t)};
    return Status::ok();
  });
}

const char* tern_tensor_device(const tern_tensor* t) {
  if (!t) return nullptr;
  return tern::api::value_guard(
      [t] {
        t->device_name = t->t.device().name();
        return t->device_name.c_str();
      },
      t->t.device().is_host() ? "cpu" : "(a device: out of memory naming it)");
}

tern_status tern_tensor_copy(const tern_tensor* src, tern_tensor* dst) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(src && dst, "src or dst is NULL");
    TERN_API_REQUIRE(!dst->read_only, "dst is read-only (a DLPack tensor flagged so)");
    const tern::Tensor& a = src->t;
    tern::Tensor& b = dst->t;
    TERN_API_REQUIRE(a.dtype() == b.dtype() && a.shape() == b.shape(), "src is ",
                     tern::dtype_name(a.dtype()), tern::shape_str(a.shape()), ", dst is ",
                     tern::dtype_name(b.dtype()), tern::shape_str(b.shape()));
    if (a.raw() == b.raw()) return Status::ok();
    auto backend_of = [](const tern::Tensor& t) { return tern::backends::get(t.device().name()); };
    if (a.on_host() && b.on_host()) {
      if (a.dtype() == tern::DType::kString) {
        std::copy(a.data<std::string>(), a.data<std::string>() + a.numel(), b.data<std::string>());
      } else if (a.byte_size()) {
        std::memmove(b.raw(), a.raw(), a.byte_size());
      }
      return Status::ok();
    }
    if (a.on_host()) {
      TERN_ASSIGN_OR_RETURN(tern::Backend * d, backend_of(b));
      TERN_RETURN_IF_ERROR(d->copy_to_device(a, b));
      return d->synchronize();
    }
    TERN_ASSIGN_OR_RETURN(tern::Backend * s, backend_of(a));
    if (b.on_host()) return s->copy_to_host(a, b);
    if (a.device() == b.device()) {
      TERN_RETURN_IF_ERROR(s->copy_on_device(a, b));
      return s->synchronize();
    }
    // Between two devices: through host memory.
    TERN_ASSIGN_OR_RETURN(tern::Tensor host, tern::Tensor::allocate(a.dtype(), a.shape()));
    TERN_RETURN_IF_ERROR(s->copy_to_host(a, host));
    TERN_ASSIGN_OR_RETURN(tern::Backend * d, backend_of(b));
    TERN_RETURN_IF_ERROR(d->copy_to_device(host, b));
    return d->synchronize();
  });
}

}  // extern "C"
