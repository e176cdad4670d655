#include "api/api_internal.h"
#include "serialization/model_io.h"

using tern::Status;

namespace {

enum class Io { kInput, kOptionalInput, kOutput };

const std::vector<tern::IOInfo>& io_list(const tern_model* m, Io which) {
  switch (which) {
    case Io::kInput:
      return m->m->inputs();
    case Io::kOptionalInput:
      return m->m->optional_inputs();
    case Io::kOutput:
      break;
  }
  return m->m->outputs();
}

const char* io_name(const tern_model* m, size_t i, Io which) {
  if (!m) return nullptr;
  const auto& list = io_list(m, which);
  return i < list.size() ? list[i].name.c_str() : nullptr;
}

tern_status io_info(const tern_model* m, size_t i, Io which, tern_dtype* dtype, size_t* rank,
                    const int64_t** shape) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(m, "model is NULL");
    const auto& list = io_list(m, which);
    TERN_API_REQUIRE(i < list.size(),
                     which == Io::kInput           ? "input"
                     : which == Io::kOptionalInput ? "optional input"
                                                   : "output",
                     " index ", i, " is out of range (the model has ", list.size(), ")");
    const tern::IOInfo& info = list[i];
    // A sequence's or optional's: the dtype of the tensors it holds.
    const tern::DType dt = info.dtype == tern::DType::kSequence   ? info.elem
                           : info.dtype != tern::DType::kOptional ? info.dtype
                           : info.elem == tern::DType::kSequence  ? info.seq_elem
                                                                  : info.elem;
    if (dtype) *dtype = static_cast<tern_dtype>(dt);
    if (rank) *rank = info.has_shape ? info.dims.size() : 0;
    if (shape) *shape = info.has_shape && !info.dims.empty() ? info.dims.data() : nullptr;
    return Status::ok();
  });
}

tern_status io_kind(const tern_model* m, size_t i, Io which, tern_value_kind* kind,
                    tern_dtype* elem, int* holds_sequence) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(m, "model is NULL");
    const auto& list = io_list(m, which);
    TERN_API_REQUIRE(i < list.size(), which == Io::kInput ? "input" : "output", " index ", i,
                     " is out of range (the model has ", list.size(), ")");
    const tern::IOInfo& info = list[i];
    const bool seq = info.dtype == tern::DType::kSequence;
    const bool opt = info.dtype == tern::DType::kOptional;
    const bool opt_seq = opt && info.elem == tern::DType::kSequence;
    if (kind) *kind = seq ? TERN_VALUE_SEQUENCE : opt ? TERN_VALUE_OPTIONAL : TERN_VALUE_TENSOR;
    if (elem) {
      *elem = static_cast<tern_dtype>(seq       ? info.elem
                                      : opt_seq ? info.seq_elem
                                      : opt     ? info.elem
                                                : info.dtype);
    }
    if (holds_sequence) *holds_sequence = opt_seq ? 1 : 0;
    return Status::ok();
  });
}

}  // namespace

extern "C" {

tern_status tern_model_input_kind(const tern_model* m, size_t i, tern_value_kind* kind,
                                  tern_dtype* elem, int* holds_sequence) {
  return io_kind(m, i, Io::kInput, kind, elem, holds_sequence);
}
tern_status tern_model_output_kind(const tern_model* m, size_t i, tern_value_kind* kind,
                                   tern_dtype* elem, int* holds_sequence) {
  return io_kind(m, i, Io::kOutput, kind, elem, holds_sequence);
}

tern_status tern_model_load_file(const char* path, tern_model** out) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(path, "path is NULL");
    TERN_API_REQUIRE(out, "out is NULL");
    TERN_ASSIGN_OR_RETURN(auto m, tern::serialization::load_model_file(path));
    *out = new tern_model{std::move(m)};
    return Status::ok();
  });
}

tern_status tern_model_load_memory(const void* data, size_t size, tern_model** out) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(data || size == 0, "data is NULL");
    TERN_API_REQUIRE(out, "out is NULL");
    TERN_ASSIGN_OR_RETURN(auto m, tern::serialization::load_model_memory(data, size));
    *out = new tern_model{std::move(m)};
    return Status::ok();
  });
}

tern_status tern_model_save(const tern_model* m, const char* path) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(m, "model is NULL");
    TERN_API_REQUIRE(path, "path is NULL");
    return tern::serialization::save_tern(m->m->graph(), path);
  });
}

void tern_model_destroy(tern_model* m) {
  delete m;
}

size_t tern_model_input_count(const tern_model* m) {
  return m ? m->m->inputs().size() : 0;
}
size_t tern_model_optional_input_count(const tern_model* m) {
  return m ? m->m->optional_inputs().size() : 0;
}
size_t tern_model_output_count(const tern_model* m) {
  return m ? m->m->outputs().size() : 0;
}

const char* tern_model_input_name(const tern_model* m, size_t i) {
  return io_name(m, i, Io::kInput);
}
const char* tern_model_optional_input_name(const tern_model* m, size_t i) {
  return io_name(m, i, Io::kOptionalInput);
}
const char* tern_model_output_name(const tern_model* m, size_t i) {
  return io_name(m, i, Io::kOutput);
}

tern_status tern_model_input_info(const tern_model* m, size_t i, tern_dtype* dtype, size_t* rank,
                                  const int64_t** shape) {
  return io_info(m, i, Io::kInput, dtype, rank, shape);
}
tern_status tern_model_optional_input_info(const tern_model* m, size_t i, tern_dtype* dtype,
                                           size_t* rank, const int64_t** shape) {
  return io_info(m, i, Io::kOptionalInput, dtype, rank, shape);
}
tern_status tern_model_output_info(const tern_model* m, size_t i, tern_dtype* dtype, size_t* rank,
                                   const int64_t** shape) {
  return io_info(m, i, Io::kOutput, dtype, rank, shape);
}

}  // extern "C"
