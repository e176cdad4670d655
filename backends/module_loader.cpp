#include "backends/module_loader.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "core/status.h"
#include "tern_build_id.h"

#ifndef TERN_INSTALL_LIBDIR
#define TERN_INSTALL_LIBDIR ""
#endif

namespace tern {

namespace {

// The directory of the file holding this code: libtern.so's, or the program's for a static link.
std::string own_directory() {
  Dl_info info{};
  std::string file;
  if (dladdr(reinterpret_cast<void*>(&load_module), &info) && info.dli_fname) {
    file = info.dli_fname;
  }
  char buf[PATH_MAX];
  if (!file.empty() && realpath(file.c_str(), buf)) {
    file = buf;
  } else {
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    file = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  }
  const size_t slash = file.rfind('/');
  return slash == std::string::npos ? std::string() : file.substr(0, slash);
}

std::string dl_error() {
  const char* e = dlerror();
  return e ? e : "unknown dlopen error";
}

// Opens `what` (a path, or a bare file name for the dynamic linker's search) and checks the
// module's entry point and build id. Returns false when the file itself was not there (only
// possible for a bare name: paths are checked before).
bool try_open(const std::string& what, const std::string& symbol, uint32_t table_size,
              ModuleLoad* m) {
  void* h = dlopen(what.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const std::string e = dl_error();
    // "libtern_cuda.so: cannot open shared object file" is the module itself missing; any other
    // name is a library it needs.
    if (what.find('/') == std::string::npos && e.rfind(what + ":", 0) == 0) return false;
    m->found = true;
    m->path = what;
    // "libcublasLt.so.13: cannot open shared object file": a library the module needs.
    const bool dependency = e.find("cannot open shared object file") != std::string::npos;
    m->error = str_cat(m->file, " was found at ", what, " but cannot be opened: ", e,
                       dependency ? " (a library it needs is missing)" : "");
    return true;
  }
  m->found = true;
  m->path = what;
  using Entry = const ModuleHeader* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(h, symbol.c_str()));
  if (!entry) {
    m->error = str_cat(m->path, " has no ", symbol, " (not a Tern backend module)");
    return true;
  }
  // Where the dynamic linker found it, when it searched.
  Dl_info info{};
  if (what.find('/') == std::string::npos && dladdr(reinterpret_cast<void*>(entry), &info) &&
      info.dli_fname) {
    m->path = info.dli_fname;
  }
  const ModuleHeader* t = entry();
  if (!t || !t->build_id || std::strcmp(t->build_id, TERN_BUILD_ID) != 0) {
    m->error = str_cat(m->path, " was built for another libtern (build ",
                       t && t->build_id ? t->build_id : "?", "; this one is ", TERN_BUILD_ID,
                       "): install the module of the same build");
    return true;
  }
  if (t->size != table_size) {
    m->error =
        str_cat(m->path, " has an interface table of ", t->size, " bytes, expected ", table_size);
    return true;
  }
  m->table = t;
  m->loaded = true;
  return true;
}

void search(const std::string& name, uint32_t table_size, ModuleLoad* m) {
  m->file = str_cat("libtern_", name, ".so");
  const std::string symbol = str_cat("tern_", name, "_module");
  std::string upper = name;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const std::string env = str_cat("TERN_", upper, "_MODULE");
  if (const char* p = std::getenv(env.c_str()); p && *p) {
    m->searched.push_back(str_cat(env, "=", p));
    if (access(p, F_OK) != 0) {
      m->error = str_cat(env, " names ", p, ", which does not exist");
      return;
    }
    try_open(p, symbol, table_size, m);
    return;
  }
  std::vector<std::string> dirs;
  const std::string own = own_directory();
  if (!own.empty()) dirs.push_back(own);
  const std::string install = TERN_INSTALL_LIBDIR;
  if (!install.empty() && install != own) dirs.push_back(install);
  for (const std::string& d : dirs) {
    const std::string path = str_cat(d, "/", m->file);
    m->searched.push_back(path);
    if (access(path.c_str(), F_OK) != 0) continue;
    try_open(path, symbol, table_size, m);
    return;
  }
  m->searched.push_back(str_cat(m->file, " through the dynamic linker's search path"));
  if (try_open(m->file, symbol, table_size, m)) return;
  m->error = str_cat(m->file, " was not found");
}

}  // namespace

const ModuleLoad& load_module(const std::string& name, uint32_t table_size) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<ModuleLoad>>* loads =
      new std::map<std::string, std::unique_ptr<ModuleLoad>>();  // never destroyed: modules stay
  std::lock_guard<std::mutex> lock(mu);
  auto& m = (*loads)[name];
  if (!m) {
    m = std::make_unique<ModuleLoad>();
    search(name, table_size, m.get());
  }
  return *m;
}

std::string module_report(const ModuleLoad& m) {
  std::string looked;
  for (const std::string& s : m.searched) looked += (looked.empty() ? "" : ", ") + s;
  if (m.loaded) return str_cat("module ", m.path, " (loaded; looked in: ", looked, ")");
  return str_cat(m.error, " (looked in: ", looked, ")");
}

}  // namespace tern
