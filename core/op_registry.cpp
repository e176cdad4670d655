#include "core/op_registry.h"

namespace tern {

const OpRegistry& OpRegistry::global() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    register_all_ops(r);
    return r;
  }();
  return registry;
}

void OpRegistry::add(OpSchema schema) {
  std::string key = schema.op_type;
  schemas_[key] = std::move(schema);
}

const OpSchema* OpRegistry::find(const std::string& op_type) const {
  auto it = schemas_.find(op_type);
  return it == schemas_.end() ? nullptr : &it->second;
}

std::vector<std::string> OpRegistry::op_types() const {
  std::vector<std::string> out;
  for (const auto& kv : schemas_) out.push_back(kv.first);
  return out;
}

Status infer_node(const OpSchema& schema, OpContext& ctx) {
  int present_inputs = 0;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    if (ctx.inputs[i].present) present_inputs = static_cast<int>(i) + 1;
  }
  int n_out = static_cast<int>(ctx.outputs.size());
  if (present_inputs < schema.min_inputs ||
      static_cast<int>(ctx.inputs.size()) > schema.max_inputs) {
    return invalid_model(ctx.where, ": has ", ctx.inputs.size(), " inputs, expected ",
                         schema.min_inputs, " to ", schema.max_inputs);
  }
  for (int i = 0; i < schema.min_inputs; ++i) {
    if (!ctx.inputs[static_cast<size_t>(i)].present) {
      return invalid_model(ctx.where, ": required input ", i, " is missing");
    }
  }
  if (n_out < schema.min_outputs || n_out > schema.max_outputs) {
    return invalid_model(ctx.where, ": has ", n_out, " outputs, expected ", schema.min_outputs,
                         " to ", schema.max_outputs);
  }
  ctx.output_values.assign(ctx.outputs.size(), std::nullopt);
  return schema.infer(ctx).with_prefix(ctx.where);
}

}  // namespace tern
