/* include/c_api.h as strict C99 (-std=c99 -pedantic -Wall -Wextra -Werror, see tests/CMakeLists.txt),
 * included twice (the include guard), and the layout C programs see, which header_cxx.cpp compares
 * with C++'s. */
#include "c_api.h"
#include "c_api.h"

size_t tern_abi_c_sizeof_sdp_params(void);
size_t tern_abi_c_sizeof_enums(void);
const void* tern_abi_c_function(void);

size_t tern_abi_c_sizeof_sdp_params(void) {
  return sizeof(tern_sdp_params);
}
size_t tern_abi_c_sizeof_enums(void) {
  return sizeof(tern_status) * 1000 + sizeof(tern_dtype) * 100 + sizeof(tern_blas_library) * 10 +
         sizeof(tern_sdp_backend);
}
/* A C caller takes a function's address through the header's prototype. */
const void* tern_abi_c_function(void) {
  tern_status (*fn)(const char*, tern_model**) = tern_model_load_file;
  return (const void*)(size_t)fn;
}
