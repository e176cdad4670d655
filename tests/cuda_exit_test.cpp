// A CUDA session that is still alive when the process exits, destroyed by a static object's
// destructor after the CUDA runtime has shut itself down: its device buffers go back to the CUDA
// module's allocators, which must still exist then (they are never destroyed). Exits 0 on success,
// 77 (ctest's skip) where there is no CUDA device, 1 on a failure. Usage: cuda_exit_test MODEL
// DIM...
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "c_api.h"

namespace {

struct Holder {
  tern_model* model = nullptr;
  tern_session* session = nullptr;
  ~Holder() {  // runs after the CUDA runtime's exit handlers (it was constructed before them)
    tern_session_destroy(session);
    tern_model_destroy(model);
  }
};

int fail(const char* what, tern_status s) {
  std::fprintf(stderr, "%s: %s: %s\n", what, tern_status_name(s), tern_last_error());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  static Holder holder;  // before any CUDA call, so its destructor runs after CUDA's
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL [DIM...]\n", argv[0]);
    return 2;
  }
  if (!tern_cuda_is_available()) {
    std::printf("skipped: no CUDA device\n");
    return 77;
  }
  tern_status s = tern_model_load_file(argv[1], &holder.model);
  if (s != TERN_OK) return fail("load", s);
  tern_session_options* o = nullptr;
  if ((s = tern_session_options_create(&o)) != TERN_OK) return fail("options", s);
  s = tern_session_options_set_backends(o, "cuda");
  if (s == TERN_OK) s = tern_session_create(holder.model, o, &holder.session);
  tern_session_options_destroy(o);
  if (s != TERN_OK) return fail("session", s);
  tern_dtype dtype;
  size_t rank;
  const int64_t* shape;
  if ((s = tern_model_input_info(holder.model, 0, &dtype, &rank, &shape)) != TERN_OK) {
    return fail("input info", s);
  }
  std::vector<int64_t> dims(shape, shape + rank);
  int next = 2;
  for (int64_t& d : dims) {
    if (d < 0) d = next < argc ? std::atoll(argv[next++]) : 1;
  }
  tern_tensor* x = nullptr;
  if ((s = tern_tensor_create(dtype, dims.data(), rank, &x)) != TERN_OK) return fail("tensor", s);
  const char* in = tern_model_input_name(holder.model, 0);
  const char* out = tern_model_output_name(holder.model, 0);
  tern_tensor* y = nullptr;
  s = tern_session_run(holder.session, nullptr, &in, &x, 1, &out, 1, &y);
  tern_tensor_destroy(x);
  tern_tensor_destroy(y);
  if (s != TERN_OK) return fail("run", s);
  std::printf("ran on CUDA; the session is destroyed at exit\n");
  return 0;
}
