#include "test_util.h"

#if defined(TERN_HAVE_ONNX)
#include "serialization/onnx_tensor.h"
#endif

namespace tern_test {

ReferenceCase load_reference_case(const std::string& dir, const tern_model* model) {
  ReferenceCase rc;
#if !defined(TERN_HAVE_ONNX)
  FAIL("reference cases are ONNX TensorProto files: this build has no ONNX importer");
#else
  const std::string data = dir + "/test_data_set_0/";
  for (size_t i = 0; i < tern_model_input_count(model); ++i) {
    auto t =
        tern::serialization::read_onnx_tensor_file(data + "input_" + std::to_string(i) + ".pb");
    REQUIRE_MESSAGE(t.has_value(), t.status().message());
    rc.input_names.push_back(tern_model_input_name(model, i));
    rc.inputs.push_back(std::move(*t));
  }
  for (size_t i = 0; i < tern_model_output_count(model); ++i) {
    auto t =
        tern::serialization::read_onnx_tensor_file(data + "output_" + std::to_string(i) + ".pb");
    REQUIRE_MESSAGE(t.has_value(), t.status().message());
    rc.output_names.push_back(tern_model_output_name(model, i));
    rc.outputs.push_back(std::move(*t));
  }
#endif
  return rc;
}

}  // namespace tern_test
