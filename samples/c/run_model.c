/* Loads a model, fills every input with a fixed pattern, runs it once and prints each output's
 * shape and first values. Checks every status. C99.
 * Usage: run_model MODEL [DIM ...]  -- DIMs fill the inputs' dynamic dims in order (default 1),
 * e.g. run_model ppocr_cls.onnx 1 48 192 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_api.h"

static int check(tern_status s, const char* what) {
  if (s == TERN_OK) return 0;
  fprintf(stderr, "%s: %s: %s\n", what, tern_status_name(s), tern_last_error());
  return 1;
}

/* The input pattern: floats in [-0.5, 0.5), integers 0..6 (token ids, indices), bools alternate. */
static void fill(tern_tensor* t) {
  size_t bytes = tern_tensor_byte_size(t), i;
  void* data = tern_tensor_data(t);
  switch (tern_tensor_dtype(t)) {
    case TERN_FLOAT32:
      for (i = 0; i < bytes / sizeof(float); ++i) ((float*)data)[i] = (float)(i * 7 % 23) / 23.0f - 0.5f;
      break;
    case TERN_INT64:
      for (i = 0; i < bytes / sizeof(int64_t); ++i) ((int64_t*)data)[i] = (int64_t)(i % 7);
      break;
    case TERN_INT32:
      for (i = 0; i < bytes / sizeof(int32_t); ++i) ((int32_t*)data)[i] = (int32_t)(i % 7);
      break;
    case TERN_BOOL:
      for (i = 0; i < bytes; ++i) ((unsigned char*)data)[i] = (unsigned char)(i % 2);
      break;
    default:
      memset(data, 0, bytes);
  }
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
  if (tern_abi_version() != TERN_ABI_VERSION) {
    fprintf(stderr, "libtern has ABI %u, this program was built for %u\n",
            (unsigned)tern_abi_version(), (unsigned)TERN_ABI_VERSION);
    return 1;
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
  if (!inputs || !in_names || !outputs || !out_names) {
    fprintf(stderr, "out of memory\n");
    goto done;
  }
  for (i = 0; i < n_in; ++i) {
    tern_dtype dtype;
    size_t rank, d;
    const int64_t* shape;
    int64_t dims[16];
    if (check(tern_model_input_info(model, i, &dtype, &rank, &shape), "input info")) goto done;
    if (rank > 16) {
      fprintf(stderr, "input %u has rank %u (this sample handles up to 16)\n", (unsigned)i,
              (unsigned)rank);
      goto done;
    }
    for (d = 0; d < rank; ++d) {
      dims[d] = shape[d];
      if (dims[d] < 0) dims[d] = next_dim < argc ? strtoll(argv[next_dim++], NULL, 10) : 1;
    }
    if (check(tern_tensor_create(dtype, dims, rank, &inputs[i]), "tensor")) goto done;
    fill(inputs[i]);
    in_names[i] = tern_model_input_name(model, i);
  }
  for (j = 0; j < n_out; ++j) out_names[j] = tern_model_output_name(model, j);
  if (check(tern_session_run(session, NULL, in_names, (const tern_tensor* const*)inputs, n_in,
                             out_names, n_out, outputs),
            "run")) {
    goto done;
  }
  for (j = 0; j < n_out; ++j) {
    size_t rank = tern_tensor_rank(outputs[j]), d, count;
    printf("%s: dtype %d shape [", out_names[j], (int)tern_tensor_dtype(outputs[j]));
    for (d = 0; d < rank; ++d) printf(d ? ",%lld" : "%lld", (long long)tern_tensor_shape(outputs[j])[d]);
    printf("]");
    if (tern_tensor_dtype(outputs[j]) == TERN_FLOAT32) {
      const float* v = (const float*)tern_tensor_data(outputs[j]);
      count = tern_tensor_byte_size(outputs[j]) / sizeof(float);
      for (d = 0; d < count && d < 6; ++d) printf(" %.6g", v[d]);
      if (count > 6) printf(" ...");
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
