/* Loads a model, feeds zeros to every input, runs it once and prints each output's shape and
 * first value. Checks every status.
 * Usage: run_model MODEL [DIM ...]  -- DIMs fill the inputs' dynamic dims in order (default 1),
 * e.g. run_model ppocr_cls.onnx 1 48 192 */
#include <stdio.h>
#include <stdlib.h>

#include "c_api.h"

static int check(tern_status s, const char* what) {
  if (s == TERN_OK) return 0;
  fprintf(stderr, "%s: %s: %s\n", what, tern_status_name(s), tern_last_error());
  return 1;
}

int main(int argc, char** argv) {
  tern_model* model = NULL;
  tern_session* session = NULL;
  tern_tensor** inputs = NULL;
  tern_tensor** outputs = NULL;
  const char** in_names = NULL;
  const char** out_names = NULL;
  size_t n_in, n_out, i, j;
  int rc = 1, next_dim = 2;
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL [DIM ...]\n", argv[0]);
    return 2;
  }
  printf("Tern %s\n", tern_version());
  if (check(tern_model_load_file(argv[1], &model), "load")) goto done;
  if (check(tern_session_create(model, NULL, &session), "session")) goto done;
  n_in = tern_model_input_count(model);
  n_out = tern_model_output_count(model);
  inputs = calloc(n_in ? n_in : 1, sizeof *inputs);
  in_names = calloc(n_in ? n_in : 1, sizeof *in_names);
  outputs = calloc(n_out ? n_out : 1, sizeof *outputs);
  out_names = calloc(n_out ? n_out : 1, sizeof *out_names);
  if (!inputs || !in_names || !outputs || !out_names) goto done;
  for (i = 0; i < n_in; ++i) {
    tern_dtype dtype;
    size_t rank, d;
    const int64_t* shape;
    int64_t dims[16];
    if (check(tern_model_input_info(model, i, &dtype, &rank, &shape), "input info")) goto done;
    if (rank > 16) goto done;
    for (d = 0; d < rank; ++d) {
      dims[d] = shape[d];
      if (dims[d] < 0) dims[d] = next_dim < argc ? strtoll(argv[next_dim++], NULL, 10) : 1;
    }
    if (check(tern_tensor_create(dtype, dims, rank, &inputs[i]), "tensor")) goto done;
    in_names[i] = tern_model_input_name(model, i);
  }
  for (j = 0; j < n_out; ++j) out_names[j] = tern_model_output_name(model, j);
  if (check(tern_session_run(session, NULL, in_names, (const tern_tensor* const*)inputs, n_in,
                             out_names, n_out, outputs),
            "run")) {
    goto done;
  }
  for (j = 0; j < n_out; ++j) {
    size_t rank = tern_tensor_rank(outputs[j]), d;
    printf("%s: dtype %d shape [", out_names[j], (int)tern_tensor_dtype(outputs[j]));
    for (d = 0; d < rank; ++d)
      printf(d ? ",%lld" : "%lld", (long long)tern_tensor_shape(outputs[j])[d]);
    printf("]");
    if (tern_tensor_dtype(outputs[j]) == TERN_FLOAT32 && tern_tensor_byte_size(outputs[j]) >= 4) {
      printf(" first %g", ((const float*)tern_tensor_data(outputs[j]))[0]);
    }
    printf("\n");
  }
  rc = 0;
done:
  for (i = 0; inputs && i < n_in; ++i) tern_tensor_destroy(inputs[i]);
  for (j = 0; outputs && j < n_out; ++j) tern_tensor_destroy(outputs[j]);
  free(inputs);
  free(outputs);
  free((void*)in_names);
  free((void*)out_names);
  tern_session_destroy(session);
  tern_model_destroy(model);
  return rc;
}
