// The minimal build's libtern.so (README, mobile): it leaves the .tern writer out unless
// TERN_MINIMAL_TERN_WRITER, so tern_model_save either writes a file that loads back or refuses
// with TERN_ERR_UNSUPPORTED saying why and writes nothing. The tests link libtern.a, which keeps
// the writer, so the check opens the shared library beside them (minimal builds only).
#include <dlfcn.h>
#include <doctest/doctest.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <filesystem>
#include <string>

#include "c_api.h"
#include "graph_builder.h"
#include "serialization/model_io.h"

using namespace tern;

namespace {

// The build directory's libtern.so (the tests are in its tests/); "" when absent.
std::string shared_library_path() {
  char exe[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return "";
  exe[n] = '\0';
  const auto lib = std::filesystem::path(exe).parent_path().parent_path() / "libtern.so";
  return std::filesystem::exists(lib) ? lib.string() : "";
}

template <class F>
F symbol(void* lib, const char* name) {
  void* p = ::dlsym(lib, name);
  REQUIRE_MESSAGE(p != nullptr, name);
  return reinterpret_cast<F>(p);
}

}  // namespace

TEST_SUITE("api") {
  TEST_CASE("the minimal libtern.so writes .tern, or refuses with UNSUPPORTED saying why") {
    if (std::string(tern_config_show()).find("minimal=ON") == std::string::npos) {
      MESSAGE("not a minimal build: its writer is tested everywhere else");
      return;
    }
    const std::string lib_path = shared_library_path();
    if (lib_path.empty()) {
      MESSAGE("no libtern.so beside the tests: skipped");
      return;
    }
    const Graph g = tern_test::relu_graph(DType::kFloat32);
    const std::string dir = "/tmp/tern_minimal_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir);
    REQUIRE(serialization::save_tern(g, dir + "/in.tern").is_ok());  // (libtern.a's writer)

    void* lib = ::dlopen(lib_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    REQUIRE_MESSAGE(lib != nullptr, ::dlerror());
    auto load = symbol<tern_status (*)(const char*, tern_model**)>(lib, "tern_model_load_file");
    auto save = symbol<tern_status (*)(const tern_model*, const char*)>(lib, "tern_model_save");
    auto destroy = symbol<void (*)(tern_model*)>(lib, "tern_model_destroy");
    auto last_error = symbol<const char* (*)()>(lib, "tern_last_error");
    tern_model* m = nullptr;
    REQUIRE(load((dir + "/in.tern").c_str(), &m) == TERN_OK);
    const std::string out = dir + "/out.tern";
    const tern_status st = save(m, out.c_str());
    if (st == TERN_OK) {
      tern_model* back = nullptr;
      CHECK(load(out.c_str(), &back) == TERN_OK);
      destroy(back);
    } else {
      CHECK(st == TERN_ERR_UNSUPPORTED);
      const std::string why = last_error();
      CHECK(why.find("cannot write '" + out + "'") != std::string::npos);
      CHECK(why.find("minimal build of Tern leaves the .tern writer out") != std::string::npos);
      CHECK_FALSE(std::filesystem::exists(out));
    }
    destroy(m);
    ::dlclose(lib);
    std::filesystem::remove_all(dir);
  }
}
