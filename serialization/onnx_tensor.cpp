#include "serialization/onnx_tensor.h"

#include "core/memory_budget.h"

#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace tern::serialization {

namespace {

// Reads external data (location relative to the model's folder, offset, length); with a null dst
// only checks that the file holds it.
Status read_external(const onnx::TensorProto& t, const std::string& base_dir, size_t bytes,
                     void* dst) {
  std::string location;
  uint64_t offset = 0;
  int64_t length = -1;
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
      continue;
    }
    if (kv.key() != "offset" && kv.key() != "length") continue;
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(kv.value().c_str(), &end, 10);
    if (kv.value().empty() || *end != '\0' || errno != 0 || kv.value()[0] == '-') {
      return invalid_model("tensor '", t.name(), "': external data ", kv.key(), " '", kv.value(),
                           "' is not a non-negative integer");
    }
    if (kv.key() == "offset") {
      offset = v;
    } else {
      length = static_cast<int64_t>(v);
    }
  }
  if (base_dir.empty()) {
    return unsupported("tensor '", t.name(),
                       "' keeps its data in an external file, which needs "
                       "the model loaded from a file path");
  }
  if (location.empty() || location[0] == '/' || location.find("..") != std::string::npos) {
    return invalid_model("tensor '", t.name(), "': external data location '", location,
                         "' must be a relative path inside the model's folder");
  }
  if (length >= 0 && static_cast<size_t>(length) != bytes) {
    return invalid_model("tensor '", t.name(), "': external data length ", length,
                         " but shape needs ", bytes, " bytes");
  }
  std::error_code ec;
  const uintmax_t file_bytes = std::filesystem::file_size(base_dir + "/" + location, ec);
  if (ec) return io_error("tensor '", t.name(), "': cannot open external data '", location, "'");
  if (offset > file_bytes || bytes > file_bytes - offset) {
    return invalid_model("tensor '", t.name(), "': external data file '", location,
                         "' is too short");
  }
  if (!dst) return Status::ok();  // checked only
  std::ifstream f(base_dir + "/" + location, std::ios::binary);
  if (!f) return io_error("tensor '", t.name(), "': cannot open external data '", location, "'");
  f.seekg(static_cast<std::streamoff>(offset));
  f.read(static_cast<char*>(dst), static_cast<std::streamsize>(bytes));
  if (static_cast<size_t>(f.gcount()) != bytes) {
    return invalid_model("tensor '", t.name(), "': external data file '", location,
                         "' is too short");
  }
  return Status::ok();
}

template <class Field>
Status check_count(const onnx::TensorProto& t, const Field& field, int64_t n) {
  if (field.size() != n) {
    return invalid_model("tensor '", t.name(), "' has ", field.size(), " values, its shape needs ",
                         n);
  }
  return Status::ok();
}

}  // namespace

namespace {

// 4- and 2-bit types: `bits` per element packed into bytes, first element in the low bits.
// In memory each takes a byte; INT4 and INT2 are sign-extended (an int8 value).
void unpack_bits(const uint8_t* packed, DType dt, int64_t n, uint8_t* out) {
  const int bits = dtype_file_bits(dt);
  const int per_byte = 8 / bits;
  const unsigned mask = (1u << bits) - 1;
  const bool sign = dt == DType::kInt4 || dt == DType::kInt2;
  for (int64_t i = 0; i < n; ++i) {
    unsigned v = (packed[i / per_byte] >> ((i % per_byte) * bits)) & mask;
    if (sign && (v >> (bits - 1))) v |= ~mask;
    out[i] = static_cast<uint8_t>(v);
  }
}

}  // namespace

namespace {

// Whether the tensor's data (string, external, raw or typed fields) holds n elements of dt.
Status check_present(const onnx::TensorProto& t, DType dt, int64_t n, const std::string& base_dir) {
  const int bits = dtype_file_bits(dt);
  const size_t es = dtype_size(dt);
  if (dt != DType::kString && bits >= 8 && static_cast<uint64_t>(n) > SIZE_MAX / es) {
    return invalid_model("tensor '", t.name(), "': ", n, " elements overflow the address space");
  }
  if (n == 0) return Status::ok();
  if (dt == DType::kString) return check_count(t, t.string_data(), n);
  const size_t bytes =
      bits < 8 ? static_cast<size_t>((n * bits + 7) / 8) : static_cast<size_t>(n) * es;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    return read_external(t, base_dir, bytes, nullptr);
  }
  if (t.has_raw_data()) {
    if (t.raw_data().size() != bytes) {
      return invalid_model("tensor '", t.name(), "' has ", t.raw_data().size(),
                           " bytes of raw data, its shape needs ", bytes);
    }
    return Status::ok();
  }
  switch (dt) {
    case DType::kFloat32:
      return check_count(t, t.float_data(), n);
    case DType::kFloat64:
      return check_count(t, t.double_data(), n);
    case DType::kInt64:
      return check_count(t, t.int64_data(), n);
    case DType::kUInt32:
    case DType::kUInt64:
      return check_count(t, t.uint64_data(), n);
    default:
      return check_count(t, t.int32_data(), bits < 8 ? static_cast<int64_t>(bytes) : n);
  }
}

}  // namespace

Expected<Tensor> tensor_from_onnx(const onnx::TensorProto& t, const std::string& base_dir) {
  if (!dtype_is_valid(t.data_type())) {
    return unsupported("tensor '", t.name(), "' has data type ", t.data_type(),
                       ", which Tern does not support");
  }
  const DType dt = static_cast<DType>(t.data_type());
  Shape shape(t.dims().begin(), t.dims().end());
  auto n = checked_numel(shape);
  if (!n) return invalid_model("tensor '", t.name(), "': ", n.status().message());
  // The data the file holds must match the shape before anything is allocated: a few bytes of
  // protobuf may claim a tensor of terabytes (found by tests/fuzz/fuzz_onnx_importer).
  TERN_RETURN_IF_ERROR(check_present(t, dt, *n, base_dir));
  TERN_ASSIGN_OR_RETURN(Tensor out, Tensor::allocate(dt, shape));
  if (dt == DType::kString) {
    if (*n == 0) return out;
    TERN_RETURN_IF_ERROR(check_count(t, t.string_data(), *n));
    for (int64_t i = 0; i < *n; ++i)
      out.data<std::string>()[i] = t.string_data(static_cast<int>(i));
    return out;
  }
  const int bits = dtype_file_bits(dt);
  const size_t bytes = bits < 8 ? static_cast<size_t>((*n * bits + 7) / 8) : out.byte_size();
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    if (bits < 8) {
      std::vector<uint8_t> packed(bytes);
      TERN_RETURN_IF_ERROR(read_external(t, base_dir, bytes, packed.data()));
      unpack_bits(packed.data(), dt, *n, out.data<uint8_t>());
      return out;
    }
    TERN_RETURN_IF_ERROR(read_external(t, base_dir, bytes, out.raw()));
    return out;
  }
  if (t.has_raw_data()) {
    if (t.raw_data().size() != bytes) {
      return invalid_model("tensor '", t.name(), "' has ", t.raw_data().size(),
                           " bytes of raw data, its shape ", shape_str(shape), " needs ", bytes);
    }
    const auto* src = reinterpret_cast<const uint8_t*>(t.raw_data().data());
    if (bits < 8) {
      unpack_bits(src, dt, *n, out.data<uint8_t>());
    } else if (bytes) {
      std::memcpy(out.raw(), src, bytes);
    }
    return out;
  }
  if (*n == 0) return out;
  switch (dt) {
    case DType::kFloat32:
      TERN_RETURN_IF_ERROR(check_count(t, t.float_data(), *n));
      std::memcpy(out.raw(), t.float_data().data(), bytes);
      break;
    case DType::kFloat64:
      TERN_RETURN_IF_ERROR(check_count(t, t.double_data(), *n));
      std::memcpy(out.raw(), t.double_data().data(), bytes);
      break;
    case DType::kInt64:
      TERN_RETURN_IF_ERROR(check_count(t, t.int64_data(), *n));
      std::memcpy(out.raw(), t.int64_data().data(), bytes);
      break;
    case DType::kUInt32:
    case DType::kUInt64:
      TERN_RETURN_IF_ERROR(check_count(t, t.uint64_data(), *n));
      for (int64_t i = 0; i < *n; ++i) {
        if (dt == DType::kUInt32)
          out.data<uint32_t>()[i] = static_cast<uint32_t>(t.uint64_data(static_cast<int>(i)));
        else
          out.data<uint64_t>()[i] = t.uint64_data(static_cast<int>(i));
      }
      break;
    default: {         // int32 and every narrower type travel in int32_data
      if (bits < 8) {  // one entry per packed byte
        const int64_t nbytes = static_cast<int64_t>(bytes);
        TERN_RETURN_IF_ERROR(check_count(t, t.int32_data(), nbytes));
        std::vector<uint8_t> packed(bytes);
        for (int64_t i = 0; i < nbytes; ++i) {
          packed[static_cast<size_t>(i)] = static_cast<uint8_t>(t.int32_data(static_cast<int>(i)));
        }
        unpack_bits(packed.data(), dt, *n, out.data<uint8_t>());
        break;
      }
      TERN_RETURN_IF_ERROR(check_count(t, t.int32_data(), *n));
      const size_t es = dtype_size(dt);
      for (int64_t i = 0; i < *n; ++i) {
        int32_t v = t.int32_data(static_cast<int>(i));
        std::memcpy(static_cast<uint8_t*>(out.raw()) + static_cast<size_t>(i) * es, &v, es);
      }
    }
  }
  return out;
}

Expected<Tensor> take_tensor_from_onnx(onnx::TensorProto& t, const std::string& base_dir) {
  // Below this the copy costs little and the tensor keeps 64-byte aligned storage.
  constexpr size_t kMoved = size_t{64} << 10;
  if (!dtype_is_valid(t.data_type()) || !t.has_raw_data() || t.raw_data().size() < kMoved ||
      t.data_location() == onnx::TensorProto::EXTERNAL) {
    return tensor_from_onnx(t, base_dir);
  }
  const DType dt = static_cast<DType>(t.data_type());
  if (dt == DType::kString || dtype_file_bits(dt) < 8) return tensor_from_onnx(t, base_dir);
  Shape shape(t.dims().begin(), t.dims().end());
  auto n = checked_numel(shape);
  if (!n) return invalid_model("tensor '", t.name(), "': ", n.status().message());
  TERN_RETURN_IF_ERROR(check_present(t, dt, *n, base_dir));  // raw_data's size is the shape's
  const size_t bytes = t.raw_data().size();
  auto owned = std::shared_ptr<std::string>(t.release_raw_data());
  void* data = owned->data();
  std::shared_ptr<void> storage = allocate_charged(bytes, [&owned] { return owned; });
  if (!storage) return out_of_memory("tensor '", t.name(), "': ", bytes, " bytes over the budget");
  return Tensor::wrap(dt, std::move(shape), data, std::move(storage));
}

namespace {

Expected<Tensor> sequence_from_onnx(const onnx::SequenceProto& s) {
  if (s.elem_type() != onnx::SequenceProto::TENSOR && s.tensor_values_size() == 0 &&
      s.elem_type() != onnx::SequenceProto::UNDEFINED) {
    return unsupported("only sequences of tensors are supported");
  }
  std::vector<Tensor> items;
  DType elem = DType::kUndefined;
  for (const auto& t : s.tensor_values()) {
    TERN_ASSIGN_OR_RETURN(Tensor item, tensor_from_onnx(t, ""));
    elem = item.dtype();
    items.push_back(std::move(item));
  }
  return Tensor::sequence(elem, std::move(items));
}

}  // namespace

Expected<Tensor> read_onnx_value_file(const std::string& path, const std::string& kind,
                                      std::string* name) {
  if (kind == "tensor") return read_onnx_tensor_file(path, name);
  std::ifstream f(path, std::ios::binary);
  if (!f) return io_error("cannot open '", path, "'");
  std::stringstream ss;
  ss << f.rdbuf();
  if (kind == "sequence") {
    onnx::SequenceProto s;
    if (!s.ParseFromString(ss.str())) return invalid_model("'", path, "' is not a SequenceProto");
    if (name) *name = s.name();
    return sequence_from_onnx(s);
  }
  if (kind == "optional") {
    onnx::OptionalProto o;
    if (!o.ParseFromString(ss.str())) return invalid_model("'", path, "' is not an OptionalProto");
    if (name) *name = o.name();
    if (o.has_tensor_value()) {
      TERN_ASSIGN_OR_RETURN(Tensor t, tensor_from_onnx(o.tensor_value(), ""));
      const DType dt = t.dtype();
      return Tensor::optional(dt, DType::kUndefined, std::move(t));
    }
    if (o.has_sequence_value()) {
      TERN_ASSIGN_OR_RETURN(Tensor s, sequence_from_onnx(o.sequence_value()));
      const DType elem = s.as_sequence()->elem;
      return Tensor::optional(DType::kSequence, elem, std::move(s));
    }
    const bool seq = o.elem_type() == onnx::OptionalProto::SEQUENCE;
    return Tensor::optional(seq ? DType::kSequence : DType::kUndefined, DType::kUndefined,
                            std::nullopt);
  }
  return unsupported("values of kind '", kind, "' are not supported");
}

Expected<Tensor> read_onnx_tensor_file(const std::string& path, std::string* name) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return io_error("cannot open '", path, "'");
  std::stringstream ss;
  ss << f.rdbuf();
  onnx::TensorProto t;
  if (!t.ParseFromString(ss.str())) return invalid_model("'", path, "' is not a TensorProto");
  if (name) *name = t.name();
  return tensor_from_onnx(t, "");
}

}  // namespace tern::serialization
