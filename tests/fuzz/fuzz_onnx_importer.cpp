// Fuzz target: the ONNX importer (protobuf parse, then ModelProto -> graph: initializers, Constant
// nodes, attributes, value infos, opsets; no base folder, so external data is refused) on
// arbitrary bytes. A model it accepts must be usable: saved as .tern and loaded again.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto model = tern::serialization::load_model_memory(data, size);
  if (!model) {
    if (model.status().message().empty()) std::abort();  // every rejection says why
    return 0;
  }
  tern_fuzz::check_round_trip(**model, "fuzz_onnx_importer");
  return 0;
}
