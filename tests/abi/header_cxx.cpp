// include/c_api.h as C++11 (-pedantic -Wall -Wextra -Werror): the same layout as C sees, calls with
// C linkage, and the ABI version of the header equal to the library's.
#include "c_api.h"

#include <cstdio>

extern "C" size_t tern_abi_c_sizeof_sdp_params(void);
extern "C" size_t tern_abi_c_sizeof_enums(void);
extern "C" const void* tern_abi_c_function(void);

int main() {
  int failures = 0;
  auto check = [&](bool ok, const char* what) {
    std::printf("%s: %s\n", ok ? "ok" : "FAILED", what);
    failures += ok ? 0 : 1;
  };
  check(tern_abi_c_sizeof_sdp_params() == sizeof(tern_sdp_params),
        "tern_sdp_params has one size in C and C++");
  check(tern_abi_c_sizeof_enums() == sizeof(tern_status) * 1000 + sizeof(tern_dtype) * 100 +
                                         sizeof(tern_blas_library) * 10 + sizeof(tern_sdp_backend),
        "enums have one size in C and C++");
  check(sizeof(tern_status) == 4 && sizeof(tern_dtype) == 4, "status and dtype are 32-bit");
  check(tern_abi_c_function() ==
            reinterpret_cast<const void*>(reinterpret_cast<size_t>(&tern_model_load_file)),
        "a function named in C and in C++ is one symbol (C linkage)");
  check(tern_abi_version() == TERN_ABI_VERSION, "tern_abi_version() equals TERN_ABI_VERSION");
  std::printf("%d checks failed\n", failures);
  return failures == 0 ? 0 : 1;
}
