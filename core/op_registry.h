// Op schemas: arity, shape inference and the portable reference kernel of each op type.
// ops/<op>.cpp defines register_op_<op>(OpRegistry&); CMake generates register_all_ops().
#pragma once

#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/kernel.h"

namespace tern {

// An attribute an op accepts and ignores on purpose (it has no effect on inference).
struct IgnoredAttribute {
  std::string name;
  std::string why;
};

// The attributes an op understands: those its code reads (including ones it reads only to refuse
// values it does not implement), and those it ignores on purpose. Any other attribute on a node is
// refused when the model is loaded (check_attributes).
struct OpAttributes {
  std::vector<std::string> read;
  std::vector<IgnoredAttribute> ignored;
};

// What a registration declares (OpDef::attributes): string literals, which OpRegistry::add copies
// into the schema's OpAttributes. Made by attrs() within the registration's own expression (the
// ignored list's array lives until its end).
struct OpAttributeNames {
  struct Ignored {
    const char* name;
    const char* why;
  };
  bool declared = false;
  // The names read, in one literal separated by commas: "axes, keepdims" (null or "": none). An
  // array of pointers would be relocated data in the shared library (32 bytes a name on aarch64).
  const char* read = nullptr;
  std::initializer_list<Ignored> ignored;
};

// attrs("axis, keepdims"); an op with no attributes declares attrs({}).
inline OpAttributeNames attrs(const char* read,
                              std::initializer_list<OpAttributeNames::Ignored> ignored = {}) {
  return OpAttributeNames{true, read, ignored};
}

struct OpSchema {
  std::string op_type;
  int min_inputs = 1, max_inputs = 1;
  int min_outputs = 1, max_outputs = 1;
  InferFn infer = nullptr;
  // The portable kernel: plain loops, the ground truth for tests, and what the CPU backend runs
  // when it has no optimised kernel for the op and dtype.
  KernelFactory reference = nullptr;
  // Inputs whose values shape inference reads (Reshape's shape, Slice's starts...). They must be
  // known before the run: constants, or computed from shapes.
  std::vector<int> value_inputs;
  // The attributes the op understands. Every op declares them (attrs({}) for none); an op left
  // undeclared is named by the registry's unit test, and its attributes go unchecked.
  std::optional<OpAttributes> attributes;
};

// One op's registration, as ops/<op>.cpp writes it: r.add({"Concat", 1, 1 << 20, 1, 1,
// infer_concat, make_concat, {}, attrs("axis")}). Literals and plain values only, so that each
// registration is little code; OpRegistry::add makes the OpSchema (fields as there).
struct OpDef {
  const char* op_type;
  int min_inputs = 1, max_inputs = 1;
  int min_outputs = 1, max_outputs = 1;
  InferFn infer = nullptr;
  KernelFactory reference = nullptr;
  std::initializer_list<int> value_inputs;
  OpAttributeNames attributes;
};

// The names of a list packed as one string, each ended by a NUL, the list by an empty name:
// "Conv\0" "Relu\0" (a literal's own NUL ends it).
std::vector<std::string> split_names(const char* names);

class OpRegistry {
 public:
  // The process-wide registry, filled by register_all_ops() on first use.
  static const OpRegistry& global();
  void add(const OpDef& def);
  const OpSchema* find(const std::string& op_type) const;
  std::vector<std::string> op_types() const;
  // A selective build (TERN_SELECTED_OPS): keeps the `selected` op types only, and remembers
  // Tern's other ops, `left_out`, so a model needing one is told so (the generated
  // register_all_ops calls it last).
  void select(const std::vector<std::string>& selected, std::vector<std::string> left_out);
  // The same with each list one string of names, each ended by a NUL ("Conv\0" "Relu\0"): what
  // the generated registration passes (a braced list of std::strings is code for every name).
  void select_packed(const char* selected, const char* left_out);
  // True for an op Tern has that this selective build left out.
  bool left_out(const std::string& op_type) const;

 private:
  std::map<std::string, OpSchema> schemas_;
  std::vector<std::string> left_out_;  // sorted
};

void register_all_ops(OpRegistry& r);  // generated

// Runs shape inference for ctx.node and checks arity first.
Status infer_node(const OpSchema& schema, OpContext& ctx);
// The input and output counts of a node against its schema: INVALID_MODEL (prefixed by `where`)
// for too few or too many, or a required input (below min_inputs) that is not present.
Status check_arity(const OpSchema& schema, const std::vector<bool>& inputs_present,
                   size_t n_outputs, const std::string& where);
// A node's attributes against its schema's declaration, at the model's ai.onnx opset: an
// attribute the op neither reads nor ignores is UNSUPPORTED when ONNX defines it for the op at
// that opset (Tern does not implement it), INVALID_MODEL otherwise (a misspelt name, or one of
// another opset or op); both name the attribute, prefixed by `where`.
Status check_attributes(const OpSchema& schema, const Attributes& attributes, int64_t opset,
                        const std::string& where);

// UNSUPPORTED when `t` is a tensor dtype this selective build left out (kBuiltDTypes): "WHAT is
// float64, a dtype left out of this selective build of Tern (TERN_SELECTED_DTYPES) ...".
Status require_dtype_built(DType t, std::string_view what, uint64_t built = kBuiltDTypes);

}  // namespace tern
