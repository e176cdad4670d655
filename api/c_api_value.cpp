// tern_value: sequences and optionals across the C ABI (include/c_api.h, "Values").
#include "api/api_internal.h"

using tern::Status;

namespace {

Status require_host_tensor(const tern_tensor* t, const char* what) {
  TERN_API_REQUIRE(t, what, " is NULL");
  TERN_API_REQUIRE(t->t.on_host(), what, " is on ", t->t.device().name(),
                   "; values hold host tensors");
  return Status::ok();
}

}  // namespace

extern "C" {

tern_status tern_value_from_tensor(const tern_tensor* t, tern_value** out) {
  return tern::api::guard([&]() -> Status {
    TERN_RETURN_IF_ERROR(require_host_tensor(t, "tensor"));
    TERN_API_REQUIRE(out, "out is NULL");
    *out = new tern_value{t->t};
    return Status::ok();
  });
}

tern_status tern_value_create_sequence(tern_dtype elem, const tern_tensor* const* items, size_t n,
                                       tern_value** out) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(out, "out is NULL");
    TERN_API_REQUIRE(tern::dtype_in_c_api(static_cast<int32_t>(elem)), "elem ",
                     static_cast<int>(elem), " is not a tern_dtype");
    TERN_API_REQUIRE(n == 0 || items, "items is NULL with n = ", n);
    std::vector<tern::Tensor> list;
    for (size_t i = 0; i < n; ++i) {
      TERN_RETURN_IF_ERROR(
          require_host_tensor(items[i], "items[i]").with_prefix(tern::str_cat("element ", i)));
      TERN_API_REQUIRE(items[i]->t.dtype() == static_cast<tern::DType>(elem), "element ", i, " is ",
                       tern::dtype_name(items[i]->t.dtype()), ", the sequence holds ",
                       tern::dtype_name(static_cast<tern::DType>(elem)));
      list.push_back(items[i]->t);
    }
    *out = new tern_value{tern::Tensor::sequence(static_cast<tern::DType>(elem), std::move(list))};
    return Status::ok();
  });
}

tern_status tern_value_create_optional(const tern_value* v, tern_value** out) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(out, "out is NULL");
    if (!v) {
      *out = new tern_value{
          tern::Tensor::optional(tern::DType::kUndefined, tern::DType::kUndefined, std::nullopt)};
      return Status::ok();
    }
    TERN_API_REQUIRE(v->t.dtype() != tern::DType::kOptional, "an optional cannot hold an optional");
    const tern::SequenceData* s = v->t.as_sequence();
    *out = new tern_value{
        tern::Tensor::optional(v->t.dtype(), s ? s->elem : tern::DType::kUndefined, v->t)};
    return Status::ok();
  });
}

void tern_value_destroy(tern_value* v) {
  delete v;
}

tern_status tern_value_get_kind(const tern_value* v, tern_value_kind* kind) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(v, "value is NULL");
    TERN_API_REQUIRE(kind, "kind is NULL");
    *kind = v->t.as_sequence()   ? TERN_VALUE_SEQUENCE
            : v->t.as_optional() ? TERN_VALUE_OPTIONAL
                                 : TERN_VALUE_TENSOR;
    return Status::ok();
  });
}

tern_status tern_value_get_tensor(const tern_value* v, tern_tensor** out) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(v, "value is NULL");
    TERN_API_REQUIRE(out, "out is NULL");
    TERN_API_REQUIRE(!tern::dtype_is_composite(v->t.dtype()), "the value is a ",
                     tern::dtype_name(v->t.dtype()), ", not a tensor");
    *out = new tern_tensor{v->t};
    return Status::ok();
  });
}

size_t tern_value_sequence_length(const tern_value* v) {
  const tern::SequenceData* s = v ? v->t.as_sequence() : nullptr;
  return s ? s->items.size() : 0;
}

tern_dtype tern_value_sequence_dtype(const tern_value* v) {
  const tern::SequenceData* s = v ? v->t.as_sequence() : nullptr;
  return s ? static_cast<tern_dtype>(s->elem) : static_cast<tern_dtype>(0);
}

tern_status tern_value_sequence_at(const tern_value* v, size_t i, tern_tensor** out) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(v, "value is NULL");
    TERN_API_REQUIRE(out, "out is NULL");
    const tern::SequenceData* s = v->t.as_sequence();
    TERN_API_REQUIRE(s, "the value is a ", v->t.as_optional() ? "optional" : "tensor",
                     ", not a sequence");
    TERN_API_REQUIRE(i < s->items.size(), "element ", i, " of a sequence of ", s->items.size());
    *out = new tern_tensor{s->items[i]};
    return Status::ok();
  });
}

int tern_value_optional_has_value(const tern_value* v) {
  const tern::OptionalData* o = v ? v->t.as_optional() : nullptr;
  return o ? (o->value ? 1 : 0) : -1;
}

tern_status tern_value_optional_get(const tern_value* v, tern_value** out) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(v, "value is NULL");
    TERN_API_REQUIRE(out, "out is NULL");
    const tern::OptionalData* o = v->t.as_optional();
    TERN_API_REQUIRE(o, "the value is not an optional");
    TERN_API_REQUIRE(o->value, "the optional holds nothing");
    *out = new tern_value{*o->value};
    return Status::ok();
  });
}

}  // extern "C"
