// Model: an immutable, validated graph plus the storage its constants live in (a mapped .tern
// file, or the buffers an importer filled). Shared by sessions and threads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/graph.h"

namespace tern {

struct IOInfo {
  int value = -1;
  std::string name;
  DType dtype = DType::kUndefined;
  bool has_shape = false;
  std::vector<int64_t> dims;  // -1 for a dynamic dim; a sequence's or optional's elements' dims
  // dtype kSequence / kOptional: what the value holds (ValueType::elem, ::seq_elem).
  DType elem = DType::kUndefined;
  DType seq_elem = DType::kUndefined;
};

class Model {
 public:
  // Validates the graph (structure, cycles) and derives the caller-facing inputs and outputs.
  static Expected<std::shared_ptr<const Model>> create(Graph graph, std::shared_ptr<void> storage,
                                                       std::string format);
  const Graph& graph() const { return graph_; }
  // The inputs a caller must feed.
  const std::vector<IOInfo>& inputs() const { return inputs_; }
  // Graph inputs that have an initializer (ONNX before IR 4 lists every weight so; later IRs to
  // let a caller replace a weight): optional, their default the initializer; shape and dtype
  // are the initializer's. ONNX Runtime calls them overridable initializers.
  const std::vector<IOInfo>& optional_inputs() const { return optional_inputs_; }
  // This model with the named optional inputs turned into inputs the caller feeds (their
  // initializers dropped, so that nothing is folded from them). Every name must be one of
  // optional_inputs(). Shares this model's storage.
  Expected<std::shared_ptr<const Model>> with_inputs_fed(
      const std::vector<std::string>& names) const;
  const std::vector<IOInfo>& outputs() const { return outputs_; }
  const std::string& format() const { return format_; }  // "tern" or "onnx"

 private:
  Graph graph_;
  std::shared_ptr<void> storage_;
  std::string format_;
  std::vector<IOInfo> inputs_, optional_inputs_, outputs_;
};

}  // namespace tern
