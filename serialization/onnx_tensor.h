// ONNX TensorProto -> Tensor. Used by the importer and by tests that read reference data.
#pragma once

#include <string>

#include "core/tensor.h"

namespace onnx {
class TensorProto;
}

namespace tern::serialization {

// base_dir resolves external data; "" refuses it.
Expected<Tensor> tensor_from_onnx(const onnx::TensorProto& t, const std::string& base_dir);
// tensor_from_onnx for a TensorProto the caller is done with (the importer's initializers): a
// large raw_data field becomes the tensor's storage, moved out of `t` instead of copied (its
// alignment is malloc's, 16 bytes, which every kernel accepts as it accepts borrowed inputs).
Expected<Tensor> take_tensor_from_onnx(onnx::TensorProto& t, const std::string& base_dir);
// Reads a serialized TensorProto file (the .pb files of ONNX test cases).
Expected<Tensor> read_onnx_tensor_file(const std::string& path, std::string* name = nullptr);
// Reads a test case's value file of the given kind: "tensor" (a TensorProto), "sequence" (a
// SequenceProto of tensors) or "optional" (an OptionalProto of a tensor or a sequence), as a
// Tensor of that kind (Tensor::sequence, Tensor::optional).
Expected<Tensor> read_onnx_value_file(const std::string& path, const std::string& kind,
                                      std::string* name = nullptr);

}  // namespace tern::serialization
