#include "core/op_registry.h"

#include <algorithm>

#include "core/built_dtypes.h"
#include "core/onnx_schema.h"

namespace tern {

const OpRegistry& OpRegistry::global() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    register_all_ops(r);
    return r;
  }();
  return registry;
}

void OpRegistry::add(const OpDef& def) {
  OpSchema schema{def.op_type, def.min_inputs, def.max_inputs,   def.min_outputs, def.max_outputs,
                  def.infer,   def.reference,  def.value_inputs, std::nullopt};
  if (def.attributes.declared) {
    OpAttributes& a = schema.attributes.emplace();
    for (const char* p = def.attributes.read; p != nullptr && *p != '\0';) {
      while (*p == ',' || *p == ' ') ++p;
      const char* end = p;
      while (*end != '\0' && *end != ',' && *end != ' ') ++end;
      if (end != p) a.read.emplace_back(p, end);
      p = end;
    }
    for (const OpAttributeNames::Ignored& i : def.attributes.ignored) {
      a.ignored.push_back({i.name, i.why});
    }
  }
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

void OpRegistry::select(const std::vector<std::string>& selected,
                        std::vector<std::string> left_out) {
  for (auto it = schemas_.begin(); it != schemas_.end();) {
    const bool keep = std::find(selected.begin(), selected.end(), it->first) != selected.end();
    if (keep) {
      ++it;
    } else {
      left_out.push_back(it->first);
      it = schemas_.erase(it);
    }
  }
  std::sort(left_out.begin(), left_out.end());
  left_out.erase(std::unique(left_out.begin(), left_out.end()), left_out.end());
  left_out_ = std::move(left_out);
}

void OpRegistry::select_packed(const char* selected, const char* left_out) {
  select(split_names(selected), split_names(left_out));
}

std::vector<std::string> split_names(const char* names) {
  std::vector<std::string> out;
  for (const char* p = names; *p != '\0'; p += out.back().size() + 1) out.emplace_back(p);
  return out;
}

bool OpRegistry::left_out(const std::string& op_type) const {
  return std::binary_search(left_out_.begin(), left_out_.end(), op_type);
}

Status check_arity(const OpSchema& schema, const std::vector<bool>& inputs_present,
                   size_t n_outputs, const std::string& where) {
  const auto n_in = static_cast<int>(inputs_present.size());
  if (n_in < schema.min_inputs || n_in > schema.max_inputs) {
    return invalid_model(where, ": has ", n_in, " inputs, expected ", schema.min_inputs, " to ",
                         schema.max_inputs);
  }
  for (int i = 0; i < schema.min_inputs; ++i) {
    if (!inputs_present[static_cast<size_t>(i)]) {
      return invalid_model(where, ": required input ", i, " is missing");
    }
  }
  const auto n_out = static_cast<int>(n_outputs);
  if (n_out < schema.min_outputs || n_out > schema.max_outputs) {
    return invalid_model(where, ": has ", n_out, " outputs, expected ", schema.min_outputs, " to ",
                         schema.max_outputs);
  }
  return Status::ok();
}

Status check_attributes(const OpSchema& schema, const Attributes& attributes, int64_t opset,
                        const std::string& where) {
  if (!schema.attributes) return Status::ok();
  const OpAttributes& known = *schema.attributes;
  for (const auto& entry : attributes.all()) {
    const std::string& name = entry.first;
    if (std::find(known.read.begin(), known.read.end(), name) != known.read.end()) continue;
    if (std::any_of(known.ignored.begin(), known.ignored.end(),
                    [&](const IgnoredAttribute& a) { return a.name == name; })) {
      continue;
    }
    const std::vector<std::string> onnx = onnx_schema::attributes_at(schema.op_type, opset);
    if (std::find(onnx.begin(), onnx.end(), name) != onnx.end()) {
      return unsupported(where, ": attribute '", name, "' of ", schema.op_type, " (opset ", opset,
                         ") is not implemented by Tern");
    }
    return invalid_model(where, ": ", schema.op_type, " has no attribute '", name, "'",
                         onnx_schema::is_onnx_op(schema.op_type)
                             ? str_cat(" at opset ", opset, " (misspelt?)")
                             : std::string());
  }
  return Status::ok();
}

Status infer_node(const OpSchema& schema, OpContext& ctx) {
  std::vector<bool> present;  // the formal inputs: a subgraph's captured values are extra
  const size_t captured = ctx.node ? captured_inputs(*ctx.node) : 0;
  const size_t formal = ctx.inputs.size() > captured ? ctx.inputs.size() - captured : 0;
  for (size_t i = 0; i < formal && i < ctx.inputs.size(); ++i) {
    present.push_back(ctx.inputs[i].present);
  }
  TERN_RETURN_IF_ERROR(check_arity(schema, present, ctx.outputs.size(), ctx.where));
  ctx.output_values.assign(ctx.outputs.size(), std::nullopt);
  TERN_RETURN_IF_ERROR(schema.infer(ctx).with_prefix(ctx.where));
  // Later ops multiply an input's dims freely: no inferred shape may pass 2^62 elements (dims
  // not known yet, negative, are left out).
  for (size_t o = 0; o < ctx.outputs.size(); ++o) {
    int64_t n = 1;
    for (int64_t d : ctx.outputs[o].shape) {
      if (d <= 0) continue;
      if (n > (int64_t{1} << 62) / d) {
        return invalid_argument(ctx.where, ": output ", o, " of shape ",
                                shape_str(ctx.outputs[o].shape), " has more than 2^62 elements");
      }
      n *= d;
    }
  }
  return Status::ok();
}

Status require_dtype_built(DType t, std::string_view what, uint64_t built) {
  if (dtype_built(t, built)) return Status::ok();
  return unsupported(what, " is ", dtype_name(t), ", a dtype left out of this ", kBuiltDTypesBuild,
                     " build of Tern (TERN_SELECTED_DTYPES); rebuild with it selected");
}

std::string built_dtypes_text() {
  std::string text;
  bool all = true;
  for (int32_t v = 1; v < 64; ++v) {
    if (!dtype_is_valid(v)) continue;
    if (!dtype_built(static_cast<DType>(v))) {
      all = false;
      continue;
    }
    if (!text.empty()) text += ' ';
    text += dtype_name(static_cast<DType>(v));
  }
  return all ? std::string() : text;
}

}  // namespace tern
