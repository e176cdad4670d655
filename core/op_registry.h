// Op schemas: arity, shape inference and the portable reference kernel of each op type.
// ops/<op>.cpp defines register_op_<op>(OpRegistry&); CMake generates register_all_ops().
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/kernel.h"

namespace tern {

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
};

class OpRegistry {
 public:
  // The process-wide registry, filled by register_all_ops() on first use.
  static const OpRegistry& global();
  void add(OpSchema schema);
  const OpSchema* find(const std::string& op_type) const;
  std::vector<std::string> op_types() const;

 private:
  std::map<std::string, OpSchema> schemas_;
};

void register_all_ops(OpRegistry& r);  // generated

// Runs shape inference for ctx.node and checks arity first.
Status infer_node(const OpSchema& schema, OpContext& ctx);
// The input and output counts of a node against its schema: INVALID_MODEL (prefixed by `where`)
// for too few or too many, or a required input (below min_inputs) that is not present.
Status check_arity(const OpSchema& schema, const std::vector<bool>& inputs_present,
                   size_t n_outputs, const std::string& where);

}  // namespace tern
