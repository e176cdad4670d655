// Model files in and out: the one interface of serialization/ that the rest of Tern uses.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/model.h"

namespace tern::serialization {

// 2: subgraph attributes (Attribute.g / graphs, Graph.captured). Version 1 files still load.
constexpr uint32_t kFormatVersion = 2;

// Loads a .tern or ONNX file, told apart by content. .tern weights stay in the mapping.
Expected<std::shared_ptr<const Model>> load_model_file(const std::string& path);
// The same from memory; the bytes are copied first.
Expected<std::shared_ptr<const Model>> load_model_memory(const void* data, size_t size);
// Writes the graph as .tern (atomically: a temporary file renamed into place).
Status save_tern(const Graph& graph, const std::string& path);
// False in the minimal libtern.so, which leaves the writer out
// (serialization/tern_writer_absent.cpp): save_tern refuses there, and tern_writer_refusal(path)
// says why (a constant, so link-time optimisation drops what would only feed the writer).
bool tern_writer_built();
Status tern_writer_refusal(const std::string& path);

// Builds a graph from a verified .tern image; constants point into `data`, kept alive by `keep`.
Expected<Graph> load_tern(std::shared_ptr<void> keep, const uint8_t* data, size_t size);
// ONNX ModelProto bytes -> graph. base_dir resolves external data ("" when there is no file).
Expected<Graph> import_onnx(const uint8_t* data, size_t size, const std::string& base_dir);

}  // namespace tern::serialization
