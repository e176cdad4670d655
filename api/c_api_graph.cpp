// The model's graph for tools (`tern inspect`): nodes, values, producer and opset as loaded, the
// shapes a session's latest plan gave its values, and ONNX TensorProto files read as tensors
// (`tern check`). Read-only views of immutable models; nothing here changes what runs.
#include <vector>

#include "api/api_internal.h"
#include "core/plan/plan.h"
#include "serialization/onnx_tensor.h"

using tern::Status;

namespace {

// Shapes handed out as int64 arrays: valid until the same function is called again on the thread.
thread_local std::vector<int64_t> t_model_shape, t_session_shape;

// A value's dtype as tern_dtype: 0 for a sequence or an optional (kSequence and kOptional are
// Tern's internal markers, never tern_dtype values).
tern_dtype c_dtype(tern::DType t) {
  return tern::dtype_is_composite(t) ? static_cast<tern_dtype>(0) : static_cast<tern_dtype>(t);
}

const tern::Node* node_at(const tern_model* m, size_t i) {
  if (!m) return nullptr;
  const auto& nodes = m->m->graph().nodes;
  return i < nodes.size() ? &nodes[i] : nullptr;
}

const char* node_value_name(const tern_model* m, size_t i, size_t j, bool input) {
  const tern::Node* n = node_at(m, i);
  if (!n) return nullptr;
  // Inputs: the formal ones only (a control-flow node's captured outer values are not the op's).
  const size_t count = input ? tern::formal_inputs(*n) : n->outputs.size();
  if (j >= count) return nullptr;
  const int id = input ? n->inputs[j] : n->outputs[j];
  return id < 0 ? "" : m->m->graph().value_name(id).c_str();
}

}  // namespace

extern "C" {

size_t tern_model_node_count(const tern_model* m) {
  return m ? m->m->graph().nodes.size() : 0;
}

tern_status tern_model_node_info(const tern_model* m, size_t i, const char** name,
                                 const char** op_type, const char** domain, size_t* n_inputs,
                                 size_t* n_outputs) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(m, "model is NULL");
    const tern::Node* n = node_at(m, i);
    TERN_API_REQUIRE(n, "node index ", i, " is out of range (the model has ",
                     m->m->graph().nodes.size(), ")");
    if (name) *name = n->name.c_str();
    if (op_type) *op_type = n->op_type.c_str();
    if (domain) *domain = n->domain.c_str();
    if (n_inputs) *n_inputs = tern::formal_inputs(*n);
    if (n_outputs) *n_outputs = n->outputs.size();
    return Status::ok();
  });
}

const char* tern_model_node_input(const tern_model* m, size_t i, size_t j) {
  return node_value_name(m, i, j, true);
}

const char* tern_model_node_output(const tern_model* m, size_t i, size_t j) {
  return node_value_name(m, i, j, false);
}

size_t tern_model_value_count(const tern_model* m) {
  return m ? m->m->graph().values.size() : 0;
}

tern_status tern_model_value_info(const tern_model* m, size_t i, const char** name,
                                  tern_dtype* dtype, int* has_shape, size_t* rank,
                                  const int64_t** shape, int* is_constant) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(m, "model is NULL");
    const auto& values = m->m->graph().values;
    TERN_API_REQUIRE(i < values.size(), "value index ", i, " is out of range (the model has ",
                     values.size(), ")");
    const tern::Value& v = values[i];
    // A constant's own shape is exact; otherwise what the file declared (-1: unknown dim).
    std::vector<int64_t> dims;
    bool known = v.constant.has_value() || v.type.has_shape;
    if (v.constant) {
      dims = v.constant->shape();
    } else {
      for (const tern::Dim& d : v.type.dims) dims.push_back(d.value);
    }
    if (name) *name = v.name.c_str();
    if (dtype) *dtype = c_dtype(v.constant ? v.constant->dtype() : v.type.dtype);
    if (has_shape) *has_shape = known ? 1 : 0;
    if (rank) *rank = known ? dims.size() : 0;
    if (shape) {
      t_model_shape = std::move(dims);
      *shape = t_model_shape.data();
    }
    if (is_constant) *is_constant = v.constant ? 1 : 0;
    return Status::ok();
  });
}

const char* tern_model_producer(const tern_model* m) {
  return m ? m->m->graph().producer.c_str() : nullptr;
}

int64_t tern_model_opset(const tern_model* m) {
  return m ? m->m->graph().opset : 0;
}

tern_status tern_session_value_shape(const tern_session* s, const char* name, tern_dtype* dtype,
                                     size_t* rank, const int64_t** shape) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(s && name, "session or name is NULL");
    std::shared_ptr<const tern::Plan> plan = s->s->last_plan();
    TERN_API_REQUIRE(plan, "the session has no plan yet (run it once first)");
    const auto& values = s->s->graph().values;
    for (size_t id = 0; id < values.size() && id < plan->values.size(); ++id) {
      if (values[id].name != name) continue;
      const tern::PlannedValue& pv = plan->values[id];
      TERN_API_REQUIRE(pv.where != tern::PlannedValue::Where::kNone, "value '", name,
                       "' is not in the session's plan (optimized away, or computed per run)");
      if (dtype) *dtype = c_dtype(pv.dtype);
      if (rank) *rank = pv.shape.size();
      if (shape) {
        t_session_shape = pv.shape;
        *shape = t_session_shape.data();
      }
      return Status::ok();
    }
    return tern::invalid_argument("the session's graph has no value '", name,
                                  "' (optimized away?)");
  });
}

tern_status tern_tensor_read_onnx_file(const char* path, tern_tensor** out) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(path && out, "path or out is NULL");
    TERN_ASSIGN_OR_RETURN(tern::Tensor t,
                          tern::serialization::read_onnx_value_file(path, "tensor", nullptr));
    *out = new tern_tensor{std::move(t)};
    return Status::ok();
  });
}

}  // extern "C"
