// Backend modules: backends built as shared libraries of their own (libtern_<name>.so) that libtern
// opens with dlopen the first time a backend, query or flag needs one, so a process that never
// asks for the backend never maps its vendor libraries (cuBLAS, cuDNN, ...), and libtern loads on
// machines that lack them.
//
// A module exports one C function, tern_<name>_module, returning its interface table, which starts
// with a ModuleHeader. A module is built from the same sources as the libtern that opens it: C++
// objects (Backend, Kernel, Tensor, Status) cross the boundary, so the build ids must be equal.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tern {

struct ModuleHeader {
  const char* build_id;  // TERN_BUILD_ID of the build that made it
  uint32_t size;         // sizeof the whole table, checked before any other field is read
};

// What the search for one module found. The search runs once per process; later calls return
// the first answer.
struct ModuleLoad {
  bool found = false;   // the module's file was found (whether or not it could be opened)
  bool loaded = false;  // opened, entry point found, same build id: `table` is usable
  std::string path;     // the file found
  std::string file;     // the module's file name, "libtern_cuda.so"
  std::vector<std::string> searched;  // where it was looked for, in order
  std::string error;  // why it is not usable (not found, a library it needs is missing, ...)
  const ModuleHeader* table = nullptr;
};

// Finds and opens libtern_<name>.so. Where, in order: the file named by the environment variable
// TERN_<NAME>_MODULE when it is set (nothing else then); the directory of the library or program
// holding libtern's code; the library directory libtern was configured to install into; the
// dynamic linker's own search by file name (LD_LIBRARY_PATH, the program's runpath, ld.so.cache).
// `table_size` is the size of the interface table the caller expects.
const ModuleLoad& load_module(const std::string& name, uint32_t table_size);

// The search and its outcome in one line, for tern info.
std::string module_report(const ModuleLoad& m);

}  // namespace tern
