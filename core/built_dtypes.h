// The element types this build has kernels for, in words: what a refusal of a left-out type
// calls the build, and the list `tern info` shows (core/dtype.h has the set, kBuiltDTypes).
#pragma once

#include <string>

namespace tern {

// "selective" (TERN_SELECTED_OPS), "minimal" (TERN_MINIMAL's default set) or "full" (every
// type); defined by the generated registration beside kBuiltDTypes.
extern const char kBuiltDTypesBuild[];

// The built element types, "float32 int64 ..." in dtype order; empty when every type is built.
std::string built_dtypes_text();

}  // namespace tern
