// ONNX import when the library is built without it (TERN_WITH_ONNX=OFF, TERN_MINIMAL=ON).
#include "serialization/model_io.h"
#include "serialization/onnx_tensor.h"

namespace tern::serialization {

Expected<Graph> import_onnx(const uint8_t*, size_t, const std::string&) {
  return unsupported(
      "not a .tern file, and ONNX import is not built into this library "
      "(TERN_WITH_ONNX=OFF); convert the model with `tern convert` from a full build");
}

Expected<Tensor> read_onnx_value_file(const std::string& path, const std::string&, std::string*) {
  return unsupported("cannot read '", path,
                     "': ONNX TensorProto files need ONNX support, which is not built into this "
                     "library (TERN_WITH_ONNX=OFF)");
}

}  // namespace tern::serialization
