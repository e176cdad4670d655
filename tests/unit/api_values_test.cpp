// The C ABI's values (sequences and optionals): model kinds, creating and reading values, runs
// that take and return them, and the refusals (NULLs, wrong kinds, dtypes, empty optionals).
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "c_api.h"
#include "core/graph.h"
#include "serialization/model_io.h"

namespace {

bool has(const char* needle) {
  return std::strstr(tern_last_error(), needle) != nullptr;
}

// seq (a sequence of float32 [2]) -> joined = ConcatFromSequence(seq, axis 0) (a tensor),
// same = Identity(seq) (a sequence), wrapped = Optional(seq) (an optional of a sequence).
std::string write_model() {
  using namespace tern;
  Graph g;
  g.opset = 18;
  ValueType seq_type{DType::kSequence, true, {Dim{2, ""}}, DType::kFloat32};
  const int seq = g.add_value("seq", seq_type);
  g.inputs = {seq};
  auto node = [&](const char* op, int in, const char* out, Attributes attrs = {}) {
    const int id = g.add_value(out);
    g.nodes.push_back(Node{std::string(op) + "_n", op, "", {in}, {id}, std::move(attrs)});
    return id;
  };
  Attributes axis;
  Attribute a;
  a.kind = Attribute::Kind::kInt;
  a.i = 0;
  axis.set("axis", a);
  const int joined = node("ConcatFromSequence", seq, "joined", axis);
  const int same = node("Identity", seq, "same");
  const int wrapped = node("Optional", seq, "wrapped");
  g.values[static_cast<size_t>(same)].type = seq_type;
  g.values[static_cast<size_t>(wrapped)].type =
      ValueType{DType::kOptional, true, {Dim{2, ""}}, DType::kSequence, DType::kFloat32};
  g.outputs = {joined, same, wrapped};
  const std::string path = "api_values_model.tern";
  REQUIRE(serialization::save_tern(g, path).is_ok());
  return path;
}

tern_tensor* vec2(float a, float b) {
  const int64_t shape[1] = {2};
  tern_tensor* t = nullptr;
  REQUIRE(tern_tensor_create(TERN_FLOAT32, shape, 1, &t) == TERN_OK);
  static_cast<float*>(tern_tensor_data(t))[0] = a;
  static_cast<float*>(tern_tensor_data(t))[1] = b;
  return t;
}

}  // namespace

TEST_SUITE("api") {
  TEST_CASE("values: sequences and optionals in and out of a run, and every refusal") {
    const std::string path = write_model();
    tern_model* m = nullptr;
    REQUIRE(tern_model_load_file(path.c_str(), &m) == TERN_OK);
    std::remove(path.c_str());
    tern_value_kind kind = TERN_VALUE_TENSOR;
    tern_dtype elem = TERN_INT8;
    int holds_seq = -1;
    REQUIRE(tern_model_input_kind(m, 0, &kind, &elem, &holds_seq) == TERN_OK);
    CHECK(kind == TERN_VALUE_SEQUENCE);
    CHECK(elem == TERN_FLOAT32);
    CHECK(holds_seq == 0);
    REQUIRE(tern_model_output_kind(m, 2, &kind, &elem, &holds_seq) == TERN_OK);
    CHECK(kind == TERN_VALUE_OPTIONAL);
    CHECK(elem == TERN_FLOAT32);
    CHECK(holds_seq == 1);
    REQUIRE(tern_model_output_kind(m, 0, &kind, nullptr, nullptr) == TERN_OK);
    CHECK(kind == TERN_VALUE_TENSOR);
    CHECK(tern_model_output_kind(m, 3, &kind, nullptr, nullptr) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_model_input_kind(nullptr, 0, &kind, nullptr, nullptr) == TERN_ERR_INVALID_ARGUMENT);
    tern_dtype dt = TERN_INT8;
    REQUIRE(tern_model_input_info(m, 0, &dt, nullptr, nullptr) == TERN_OK);
    CHECK(dt == TERN_FLOAT32);  // the elements' dtype

    tern_tensor* a = vec2(1, 2);
    tern_tensor* b = vec2(3, 4);
    const tern_tensor* items[2] = {a, b};
    tern_value* seq = nullptr;
    REQUIRE(tern_value_create_sequence(TERN_FLOAT32, items, 2, &seq) == TERN_OK);
    tern_tensor_destroy(a);  // the sequence shares and keeps the data
    tern_tensor_destroy(b);
    CHECK(tern_value_sequence_length(seq) == 2);
    CHECK(tern_value_sequence_dtype(seq) == TERN_FLOAT32);

    tern_session* s = nullptr;
    REQUIRE(tern_session_create(m, nullptr, &s) == TERN_OK);
    const char* in_names[1] = {"seq"};
    const char* out_names[3] = {"joined", "same", "wrapped"};
    const tern_value* ins[1] = {seq};
    tern_value* outs[3] = {nullptr, nullptr, nullptr};
    REQUIRE_MESSAGE(
        tern_session_run_values(s, nullptr, in_names, ins, 1, out_names, 3, outs) == TERN_OK,
        tern_last_error());
    // joined: a tensor of 4.
    REQUIRE(tern_value_get_kind(outs[0], &kind) == TERN_OK);
    CHECK(kind == TERN_VALUE_TENSOR);
    tern_tensor* joined = nullptr;
    REQUIRE(tern_value_get_tensor(outs[0], &joined) == TERN_OK);
    REQUIRE(tern_tensor_byte_size(joined) == 4 * sizeof(float));
    const float* j = static_cast<const float*>(tern_tensor_data(joined));
    CHECK((j[0] == 1 && j[1] == 2 && j[2] == 3 && j[3] == 4));
    tern_tensor_destroy(joined);
    // same: the sequence back, element by element.
    REQUIRE(tern_value_get_kind(outs[1], &kind) == TERN_OK);
    CHECK(kind == TERN_VALUE_SEQUENCE);
    REQUIRE(tern_value_sequence_length(outs[1]) == 2);
    tern_tensor* second = nullptr;
    REQUIRE(tern_value_sequence_at(outs[1], 1, &second) == TERN_OK);
    CHECK(static_cast<const float*>(tern_tensor_data(second))[1] == 4);
    tern_tensor_destroy(second);
    CHECK(tern_value_sequence_at(outs[1], 2, &second) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(has("element 2 of a sequence of 2"));
    // wrapped: an optional holding the sequence.
    CHECK(tern_value_optional_has_value(outs[2]) == 1);
    tern_value* inner = nullptr;
    REQUIRE(tern_value_optional_get(outs[2], &inner) == TERN_OK);
    CHECK(tern_value_sequence_length(inner) == 2);
    tern_value_destroy(inner);

    // Introspection gives a sequence or an optional dtype 0 (Tern's internal markers for them
    // are not tern_dtype values).
    int seen = 0;
    for (size_t i = 0; i < tern_model_value_count(m); ++i) {
      const char* name = nullptr;
      tern_dtype vt = TERN_INT8;
      REQUIRE(tern_model_value_info(m, i, &name, &vt, nullptr, nullptr, nullptr, nullptr) ==
              TERN_OK);
      const std::string n = name;
      if (n == "seq" || n == "same" || n == "wrapped") {
        CAPTURE(n);
        CHECK(vt == 0);
        ++seen;
      }
    }
    CHECK(seen == 3);
    for (const char* name : {"seq", "same", "wrapped"}) {
      tern_dtype vt = TERN_INT8;
      size_t rank = 0;
      const int64_t* dims = nullptr;
      // Held by the plan or not (values may be aliased or computed per run); when held, dtype 0.
      if (tern_session_value_shape(s, name, &vt, &rank, &dims) == TERN_OK) CHECK(vt == 0);
    }

    // The tensor-only run refuses the sequence outputs by name, and says what to use.
    tern_tensor* tensor_outs[3] = {nullptr, nullptr, nullptr};
    tern_tensor* dummy = vec2(0, 0);
    const tern_tensor* tensor_in[1] = {dummy};
    CHECK(tern_session_run(s, nullptr, in_names, tensor_in, 1, out_names, 1, tensor_outs) ==
          TERN_ERR_INVALID_ARGUMENT);  // a tensor where the model takes a sequence
    CHECK(tensor_outs[0] == nullptr);
    tern_tensor_destroy(dummy);

    // Refusals: kinds, dtypes, NULLs, an empty optional.
    CHECK(tern_value_get_tensor(seq, &second) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(has("not a tensor"));
    CHECK(tern_value_optional_has_value(seq) == -1);
    CHECK(tern_value_optional_get(seq, &inner) == TERN_ERR_INVALID_ARGUMENT);
    tern_value* empty = nullptr;
    REQUIRE(tern_value_create_optional(nullptr, &empty) == TERN_OK);
    CHECK(tern_value_optional_has_value(empty) == 0);
    CHECK(tern_value_optional_get(empty, &inner) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(has("holds nothing"));
    tern_value* nested = nullptr;
    CHECK(tern_value_create_optional(empty, &nested) == TERN_ERR_INVALID_ARGUMENT);
    tern_tensor* i32 = nullptr;
    const int64_t one[1] = {2};
    REQUIRE(tern_tensor_create(TERN_INT32, one, 1, &i32) == TERN_OK);
    const tern_tensor* bad_items[1] = {i32};
    tern_value* bad = nullptr;
    CHECK(tern_value_create_sequence(TERN_FLOAT32, bad_items, 1, &bad) ==
          TERN_ERR_INVALID_ARGUMENT);
    CHECK(has("int32"));
    // A sequence of int32 where the model takes float32: the run names the input.
    REQUIRE(tern_value_create_sequence(TERN_INT32, bad_items, 1, &bad) == TERN_OK);
    const tern_value* bad_in[1] = {bad};
    CHECK(tern_session_run_values(s, nullptr, in_names, bad_in, 1, out_names, 3, outs) ==
          TERN_ERR_INVALID_ARGUMENT);
    CHECK(has("'seq'"));
    CHECK(tern_value_create_sequence(TERN_FLOAT32, nullptr, 1, &bad) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_value_create_sequence(static_cast<tern_dtype>(999), nullptr, 0, &bad) ==
          TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_value_from_tensor(nullptr, &bad) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_value_get_kind(nullptr, &kind) == TERN_ERR_INVALID_ARGUMENT);
    CHECK(tern_value_sequence_length(nullptr) == 0);
    const tern_value* null_in[1] = {nullptr};
    CHECK(tern_session_run_values(s, nullptr, in_names, null_in, 1, out_names, 3, outs) ==
          TERN_ERR_INVALID_ARGUMENT);
    // A tensor value round trip.
    tern_value* tv = nullptr;
    REQUIRE(tern_value_from_tensor(i32, &tv) == TERN_OK);
    tern_tensor_destroy(i32);
    tern_tensor* back = nullptr;
    REQUIRE(tern_value_get_tensor(tv, &back) == TERN_OK);
    CHECK(tern_tensor_dtype(back) == TERN_INT32);
    tern_tensor_destroy(back);
    tern_value_destroy(tv);
    tern_value_destroy(nullptr);

    tern_value_destroy(bad);
    tern_value_destroy(empty);
    for (tern_value* o : outs) tern_value_destroy(o);
    tern_value_destroy(seq);
    tern_session_destroy(s);
    tern_model_destroy(m);
  }
}
