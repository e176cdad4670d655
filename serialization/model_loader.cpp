#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/op_registry.h"
#include "serialization/model_io.h"

namespace tern::serialization {

namespace {

bool is_tern(const uint8_t* data, size_t size) {
  return size >= 8 && std::memcmp(data + 4, "TERN", 4) == 0;
}

// Names the first op no schema exists for, or the first attribute its schema does not know, in
// the graph or any subgraph, so loading reports it before any session is made (ONNX and .tern
// alike).
Status check_ops_known(const Graph& g) {
  const OpRegistry& ops = OpRegistry::global();
  for (const Value& v : g.values) {  // (a selective build's left-out dtypes)
    const DType t = v.constant ? v.constant->dtype() : v.type.dtype;
    if (!dtype_built(t)) return require_dtype_built(t, str_cat("value '", shorten(v.name), "'"));
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.op_type.empty()) return invalid_model(g.describe_node(i), ": the node has no op type");
    if (!n.domain.empty() && n.domain != "ai.onnx") {
      return unsupported(g.describe_node(i), ": op domain '", n.domain, "' is not supported");
    }
    const OpSchema* schema = ops.find(n.op_type);
    if (!schema && ops.left_out(n.op_type)) {
      return unsupported(g.describe_node(i), ": op type ", n.op_type,
                         " was left out of this selective build of Tern (TERN_SELECTED_OPS); "
                         "rebuild with it selected");
    }
    if (!schema) {
      return unsupported(g.describe_node(i), ": op type ", n.op_type, " (opset ", g.opset,
                         ") is not supported by Tern");
    }
    TERN_RETURN_IF_ERROR(check_attributes(*schema, n.attrs, g.opset, g.describe_node(i)));
    for (const Graph* sub : subgraphs_of(n)) {
      TERN_RETURN_IF_ERROR(
          check_ops_known(*sub).with_prefix(str_cat(g.describe_node(i), ": in a subgraph")));
    }
  }
  return Status::ok();
}

Expected<std::shared_ptr<const Model>> finish(Expected<Graph> graph, std::shared_ptr<void> keep,
                                              const char* format) {
  if (!graph) return graph.status();
  TERN_RETURN_IF_ERROR(check_ops_known(*graph));
  return Model::create(std::move(*graph), std::move(keep), format);
}

}  // namespace

Expected<std::shared_ptr<const Model>> load_model_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error("cannot open '", path, "': ", std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return io_error("'", path, "' is not a regular file");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    return invalid_model("'", path, "' is empty");
  }
  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (addr == MAP_FAILED) return io_error("cannot map '", path, "': ", std::strerror(errno));
  std::shared_ptr<void> mapping(addr, [size](void* p) { ::munmap(p, size); });
  const auto* data = static_cast<const uint8_t*>(addr);
  const bool tern = is_tern(data, size);
  std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  auto model = tern ? finish(load_tern(mapping, data, size), mapping, "tern")
                    : finish(import_onnx(data, size, dir), nullptr, "onnx");
  if (!model) return model.status().with_prefix(str_cat("'", path, "'"));
  return model;
}

Expected<std::shared_ptr<const Model>> load_model_memory(const void* data, size_t size) {
  if (size == 0) return invalid_model("the model buffer is empty");
  auto copy = aligned_buffer(size);
  if (!copy) return out_of_memory("cannot copy the ", size, "-byte model");
  std::memcpy(copy.get(), data, size);
  const auto* bytes = static_cast<const uint8_t*>(copy.get());
  if (is_tern(bytes, size)) return finish(load_tern(copy, bytes, size), copy, "tern");
  return finish(import_onnx(bytes, size, ""), nullptr, "onnx");
}

}  // namespace tern::serialization
