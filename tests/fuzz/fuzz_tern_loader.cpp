// Fuzz target: the .tern loader (FlatBuffers verification, then the semantic checks: format
// version, dtypes, indices, segment bounds and sizes, packed layouts, acyclic graph) on arbitrary
// bytes. A model it accepts must be usable: its inputs and outputs are read, and it saves and
// loads again.
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
  const tern::Model& m = **model;
  size_t names = 0;
  for (const auto& in : m.inputs()) names += in.name.size() + in.dims.size();
  for (const auto& out : m.outputs()) names += out.name.size() + out.dims.size();
  tern_fuzz::check_round_trip(m, "fuzz_tern_loader");
  return names == SIZE_MAX;  // keeps the loop above from being optimised away
}
