// The .tern writer's stand-in in the minimal libtern.so (TERN_MINIMAL_TERN_WRITER=OFF, README's
// mobile section): an app on a phone loads models a full build converted, so writing .tern
// (tern_model_save, tern_session_save_optimized, `tern convert`) is refused and says why.
// libtern.a keeps the writer (tests save models with it; a program's link drops it unused).
#include "serialization/model_io.h"

namespace tern::serialization {

bool tern_writer_built() {
  return false;
}

Status tern_writer_refusal(const std::string& path) {
  return unsupported("cannot write '", path,
                     "': this minimal build of Tern leaves the .tern writer out of libtern.so "
                     "(TERN_MINIMAL_TERN_WRITER=OFF); save models with a full build's "
                     "`tern convert`");
}

Status save_tern(const Graph&, const std::string& path) {
  return tern_writer_refusal(path);
}

}  // namespace tern::serialization
