// DLPack in the C ABI: tern_tensor_from_dlpack wraps a DLManagedTensorVersioned's memory in a
// tensor (zero-copy, its deleter run when the last user goes) and tern_tensor_to_dlpack exports a
// tensor as one (zero-copy, the tensor's storage kept alive by the managed tensor).
#include <memory>
#include <string>
#include <vector>

#include "api/api_internal.h"

using tern::DType;
using tern::Status;

namespace {

// DLPack's (code, bits) for Tern's dtypes with a DLPack spelling; {0, 0} for the others.
struct DLType {
  uint8_t code, bits;
};
DLType dl_type_of(DType t) {
  switch (t) {
    case DType::kInt8:
      return {kDLInt, 8};
    case DType::kInt16:
      return {kDLInt, 16};
    case DType::kInt32:
      return {kDLInt, 32};
    case DType::kInt64:
      return {kDLInt, 64};
    case DType::kUInt8:
      return {kDLUInt, 8};
    case DType::kUInt16:
      return {kDLUInt, 16};
    case DType::kUInt32:
      return {kDLUInt, 32};
    case DType::kUInt64:
      return {kDLUInt, 64};
    case DType::kFloat16:
      return {kDLFloat, 16};
    case DType::kFloat32:
      return {kDLFloat, 32};
    case DType::kFloat64:
      return {kDLFloat, 64};
    case DType::kBFloat16:
      return {kDLBfloat, 16};
    case DType::kBool:
      return {kDLBool, 8};
    default:
      return {0, 0};
  }
}

tern::Expected<DType> dtype_of(const DLDataType& d) {
  if (d.lanes != 1) {
    return tern::unsupported("DLPack dtype with ", d.lanes, " lanes: Tern has scalar types only");
  }
  for (DType t : {DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64, DType::kUInt8,
                  DType::kUInt16, DType::kUInt32, DType::kUInt64, DType::kFloat16, DType::kFloat32,
                  DType::kFloat64, DType::kBFloat16, DType::kBool}) {
    const DLType dl = dl_type_of(t);
    if (dl.code == d.code && dl.bits == d.bits) return t;
  }
  return tern::unsupported("DLPack dtype code ", int{d.code}, " with ", int{d.bits},
                           " bits has no Tern dtype (Tern takes int/uint 8-64, float 16/32/64, "
                           "bfloat16 and bool8)");
}

// What keeps a DLPack producer's tensor alive inside Tern: its deleter runs when the last
// tern::Tensor sharing the data goes.
struct DLPackOwner {
  explicit DLPackOwner(DLManagedTensorVersioned* m) : managed(m) {}
  DLPackOwner(const DLPackOwner&) = delete;
  DLPackOwner& operator=(const DLPackOwner&) = delete;
  ~DLPackOwner() {
    if (armed && managed->deleter) managed->deleter(managed);
  }
  DLManagedTensorVersioned* managed;
  bool armed = false;  // set once the tensor exists: a failure before leaves src to the caller
};

// What an exported DLManagedTensorVersioned points at: the struct itself, the shape and strides
// it lends, and a tensor sharing the storage, all freed by its deleter.
struct DLPackExport {
  DLManagedTensorVersioned managed{};
  std::vector<int64_t> shape, strides;
  tern::Tensor keep;
};

void delete_export(DLManagedTensorVersioned* self) {
  delete static_cast<DLPackExport*>(self->manager_ctx);
}

std::string dims_str(const int64_t* v, int32_t n) {
  return tern::shape_str(tern::Shape(v, v + n));
}

}  // namespace

extern "C" {

tern_status tern_tensor_from_dlpack(DLManagedTensorVersioned* src, tern_tensor** out) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(src, "src is NULL");
    TERN_API_REQUIRE(out, "out is NULL");
    if (src->version.major != DLPACK_MAJOR_VERSION) {
      return tern::unsupported("DLPack version ", src->version.major, ".", src->version.minor,
                               ": Tern reads major version ", DLPACK_MAJOR_VERSION);
    }
    const DLTensor& dl = src->dl_tensor;
    const DLDeviceType dev = dl.device.device_type;
    if (dev != kDLCPU && dev != kDLCUDAHost) {
      return tern::unsupported("DLPack device type ", static_cast<int>(dev),
                               ": Tern takes memory the CPU reads in place (kDLCPU, kDLCUDAHost)");
    }
    TERN_API_REQUIRE(dl.ndim >= 0 && dl.ndim <= 64, "ndim ", dl.ndim, " is outside 0..64");
    TERN_API_REQUIRE(dl.ndim == 0 || dl.shape, "shape is NULL but ndim is ", dl.ndim);
    TERN_ASSIGN_OR_RETURN(DType dt, dtype_of(dl.dtype));
    tern::Shape shape(dl.shape, dl.shape + dl.ndim);
    TERN_ASSIGN_OR_RETURN(int64_t n, tern::checked_numel(shape));
    const size_t es = tern::dtype_size(dt);
    TERN_API_REQUIRE(static_cast<uint64_t>(n) <= (uint64_t{1} << 62) / es, "tensor too large");
    // Tern's tensors are dense and row-major: the strides must say the same, except along dims
    // of size 1 (never stepped over) and for empty tensors (nothing to address).
    if (dl.strides && n > 0) {
      int64_t expect = 1;
      for (int32_t i = dl.ndim - 1; i >= 0; --i) {
        if (shape[i] != 1 && dl.strides[i] != expect) {
          return tern::unsupported(
              "DLPack strides ", dims_str(dl.strides, dl.ndim), " of shape ",
              tern::shape_str(shape),
              " are not row-major contiguous (a transposed or sliced view): Tern's tensors are "
              "dense, so copy it into a contiguous tensor first");
        }
        expect *= shape[i];
      }
    }
    char* data = static_cast<char*>(dl.data);
    TERN_API_REQUIRE(data || n == 0, "data is NULL for a non-empty tensor");
    if (data) data += dl.byte_offset;
    if (reinterpret_cast<uintptr_t>(data) % es != 0) {
      return tern::unsupported("DLPack data + byte_offset is not aligned to the ", es,
                               "-byte element size");
    }
    auto* t = new tern_tensor{};
    std::unique_ptr<tern_tensor> guard_t(t);
    t->read_only = (src->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
    auto owner = std::make_shared<DLPackOwner>(src);
    t->t = tern::Tensor::wrap(dt, std::move(shape), data, std::shared_ptr<void>(owner, data));
    owner->armed = true;
    *out = guard_t.release();
    return Status::ok();
  });
}

tern_status tern_tensor_to_dlpack(const tern_tensor* t, DLManagedTensorVersioned** out) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(t, "t is NULL");
    TERN_API_REQUIRE(out, "out is NULL");
    const tern::Tensor& x = t->t;
    const DLType dl = dl_type_of(x.dtype());
    if (dl.bits == 0) {
      return tern::unsupported("a ", tern::dtype_name(x.dtype()),
                               " tensor has no DLPack dtype Tern exports");
    }
    DLDevice device{kDLCPU, 0};
    if (x.device().type == tern::DeviceType::kCuda) {
      device = {kDLCUDA, x.device().index};
    } else if (!x.on_host()) {
      return tern::unsupported("a tensor on ", x.device().name(),
                               " cannot be exported through DLPack (only host and CUDA memory)");
    }
    auto e = std::make_unique<DLPackExport>();
    e->keep = x;
    e->shape = x.shape();
    e->strides.resize(x.rank());
    int64_t stride = 1;
    for (size_t i = x.rank(); i-- > 0;) {
      e->strides[i] = stride;
      stride *= x.shape()[i];
    }
    DLManagedTensorVersioned& m = e->managed;
    m.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    m.manager_ctx = e.get();
    m.deleter = delete_export;
    m.flags = t->read_only ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
    m.dl_tensor.data = x.raw();
    m.dl_tensor.device = device;
    m.dl_tensor.ndim = static_cast<int32_t>(x.rank());
    m.dl_tensor.dtype = {dl.code, dl.bits, 1};
    m.dl_tensor.shape = e->shape.data();
    m.dl_tensor.strides = e->strides.data();
    m.dl_tensor.byte_offset = 0;
    *out = &e.release()->managed;
    return Status::ok();
  });
}

int tern_tensor_is_read_only(const tern_tensor* t) {
  return t && t->read_only ? 1 : 0;
}

}  // extern "C"
