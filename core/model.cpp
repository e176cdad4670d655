#include "core/model.h"

#include <algorithm>

namespace tern {

static IOInfo io_info(const Graph& g, int id) {
  const Value& v = g.values[static_cast<size_t>(id)];
  IOInfo info;
  info.value = id;
  info.name = v.name;
  info.dtype = v.constant ? v.constant->dtype() : v.type.dtype;
  info.elem = v.type.elem;
  info.seq_elem = v.type.seq_elem;
  if (v.constant) {
    info.has_shape = true;
    info.dims = v.constant->shape();
  } else if (v.type.has_shape) {
    info.has_shape = true;
    for (const Dim& d : v.type.dims) info.dims.push_back(d.known() ? d.value : -1);
  }
  return info;
}

Expected<std::shared_ptr<const Model>> Model::create(Graph graph, std::shared_ptr<void> storage,
                                                     std::string format) {
  TERN_RETURN_IF_ERROR(graph.validate());
  auto m = std::make_shared<Model>();
  for (int id : graph.inputs) {
    const Value& v = graph.values[static_cast<size_t>(id)];
    // A graph input with an initializer: optional, the initializer its default.
    if (v.constant) {
      m->optional_inputs_.push_back(io_info(graph, id));
      continue;
    }
    if (!dtype_is_valid(static_cast<int32_t>(v.type.dtype)) && !dtype_is_composite(v.type.dtype)) {
      return invalid_model("graph input '", v.name, "' has no valid element type");
    }
    m->inputs_.push_back(io_info(graph, id));
  }
  for (int id : graph.outputs) m->outputs_.push_back(io_info(graph, id));
  m->graph_ = std::move(graph);
  m->storage_ = std::move(storage);
  m->format_ = std::move(format);
  return std::shared_ptr<const Model>(std::move(m));
}

Expected<std::shared_ptr<const Model>> Model::with_inputs_fed(
    const std::vector<std::string>& names) const {
  Graph g = graph_;
  for (const std::string& name : names) {
    auto it = std::find_if(optional_inputs_.begin(), optional_inputs_.end(),
                           [&](const IOInfo& i) { return i.name == name; });
    if (it == optional_inputs_.end()) {
      return invalid_argument("'", name,
                              "' is not an optional input (an initializer) of the model");
    }
    Value& v = g.values[static_cast<size_t>(it->value)];
    v.type.dtype = v.constant->dtype();
    v.type.has_shape = true;
    v.type.dims.clear();
    for (int64_t d : v.constant->shape()) v.type.dims.push_back(Dim{d, ""});
    v.constant.reset();
    v.packed.clear();
  }
  return Model::create(std::move(g), storage_, format_);
}

}  // namespace tern
