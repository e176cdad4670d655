/* Sequence workloads through the C API, where shapes change on every call:
 *
 *   seq_bench decode PREFILL DECODE [--prompt 32] [--tokens 128] [--threads N] [--seed S]
 *                                   [--plan-cache BYTES]
 *       Greedy decoding with a KV cache: PREFILL (input_ids [1, S] -> logits [1, S, V] and the
 *       present key/value tensors) on a prompt of --prompt token ids, then --tokens steps of
 *       DECODE (input_ids [1, 1] and past_* = the last step's present_* -> logits [1, 1, V],
 *       present_*). Each next token is the argmax of the last logits row.
 *   seq_bench varlen ENCODER [--calls 200] [--max-len 512] [--threads N] [--seed S]
 *                            [--plan-cache BYTES]
 *       An encoder (input_ids, attention_mask int64 [1, L]) fed --calls random lengths L in
 *       1..--max-len.
 *
 * Prints one JSON object: the per-call latencies' p50/p90 (ms), tokens/s (decode), the tokens
 * (decode), the resident set size (VmRSS, MiB) at points named in the output, and a checksum of
 * the outputs (varlen). Token ids and lengths come from a small LCG seeded by --seed, the same
 * sequence tests/bench/seq_ort.js draws, so both engines see the same inputs. C99. */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "c_api.h"

#define MAX_KV 64

static void die(tern_status s, const char* what) {
  fprintf(stderr, "seq_bench: %s: %s: %s\n", what, tern_status_name(s), tern_last_error());
  exit(1);
}
#define CHECK(call, what)                     \
  do {                                        \
    tern_status s_ = (call);                  \
    if (s_ != TERN_OK) die(s_, (what));       \
  } while (0)

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double rss_mib(void) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  double kb = 0;
  if (!f) return 0;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "VmRSS:", 6) == 0) kb = atof(line + 6);
  }
  fclose(f);
  return kb / 1024.0;
}

/* The LCG shared with seq_ort.js: x = x * 6364136223846793005 + 1442695040888963407 (mod 2^64),
 * value = (x >> 33) mod n. */
static unsigned long long g_state;
static long long next_int(long long n) {
  g_state = g_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (long long)((g_state >> 33) % (unsigned long long)n);
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}
static double percentile(double* v, size_t n, double p) {
  size_t i;
  qsort(v, n, sizeof *v, cmp_double);
  i = (size_t)(p * (double)(n - 1) + 0.5);
  return v[i < n ? i : n - 1];
}

static long long g_plan_cache = -1; /* --plan-cache BYTES; -1: the default */

static tern_session* open_session(const char* path, int threads, tern_model** model) {
  tern_session_options* o = NULL;
  tern_session* s = NULL;
  CHECK(tern_model_load_file(path, model), path);
  CHECK(tern_session_options_create(&o), "options");
  if (g_plan_cache >= 0) {
    CHECK(tern_session_options_set_plan_cache_bytes(o, (uint64_t)g_plan_cache), "plan cache");
  }
  if (threads > 0) {
    CHECK(tern_session_options_set_num_threads(o, threads), "threads");
    CHECK(tern_session_options_set_num_interop_threads(o, 1), "interop threads");
  }
  CHECK(tern_session_create(*model, o, &s), "session");
  tern_session_options_destroy(o);
  return s;
}

/* Argmax over the last row of logits [1, T, V]. */
static long long last_argmax(tern_tensor* logits) {
  const int64_t* shape = tern_tensor_shape(logits);
  size_t rank = tern_tensor_rank(logits);
  int64_t v = shape[rank - 1], rows = 1, i;
  const float* x;
  long long best = 0;
  for (i = 0; i + 1 < (int64_t)rank; ++i) rows *= shape[i];
  x = (const float*)tern_tensor_data(logits) + (rows - 1) * v;
  for (i = 1; i < v; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return best;
}

static int run_decode(int argc, char** argv) {
  const char *prefill_path = argv[2], *decode_path = argv[3];
  int prompt = 32, tokens = 128, threads = 0, i, step;
  unsigned long long seed = 1;
  tern_model *pm = NULL, *dm = NULL;
  tern_session *ps, *ds;
  const char* out_names[1 + MAX_KV];
  const char* in_names[1 + MAX_KV];
  char names[2][1 + MAX_KV][64];
  tern_tensor* outs[1 + MAX_KV];
  tern_tensor* past[MAX_KV];
  tern_tensor* ids = NULL;
  size_t n_kv, k;
  int64_t shape[2] = {1, 0};
  int64_t* id_data;
  long long* generated;
  double *lat, rss_start, rss_first = 0, rss_end, t_all = 0;
  for (i = 4; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--prompt")) prompt = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--tokens")) tokens = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--seed")) seed = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--plan-cache")) g_plan_cache = atoll(argv[i + 1]);
  }
  g_state = seed;
  rss_start = rss_mib();
  ps = open_session(prefill_path, threads, &pm);
  ds = open_session(decode_path, threads, &dm);
  n_kv = tern_model_output_count(pm) - 1;
  if (n_kv > MAX_KV || tern_model_input_count(dm) != n_kv + 1) {
    fprintf(stderr, "seq_bench: the decode graph must take input_ids and the %u present tensors\n",
            (unsigned)n_kv);
    return 1;
  }
  /* Output k+1 of either graph is present_<name>; the decode graph's input k+1 is past_<name>. */
  for (k = 0; k <= n_kv; ++k) {
    strncpy(names[0][k], tern_model_output_name(dm, k), 63);
    names[0][k][63] = 0;
    out_names[k] = names[0][k];
    strncpy(names[1][k], tern_model_input_name(dm, k), 63);
    names[1][k][63] = 0;
    in_names[k] = names[1][k];
  }
  generated = calloc((size_t)tokens + 1, sizeof *generated);
  lat = calloc((size_t)tokens, sizeof *lat);
  /* Prefill. */
  shape[1] = prompt;
  CHECK(tern_tensor_create(TERN_INT64, shape, 2, &ids), "ids");
  id_data = tern_tensor_data(ids);
  for (i = 0; i < prompt; ++i) id_data[i] = next_int(4096);
  {
    const char* pin[1] = {"input_ids"};
    const tern_tensor* pt[1];
    pt[0] = ids;
    CHECK(tern_session_run(ps, NULL, pin, pt, 1, out_names, n_kv + 1, outs), "prefill");
  }
  tern_tensor_destroy(ids);
  generated[0] = last_argmax(outs[0]);
  tern_tensor_destroy(outs[0]);
  for (k = 0; k < n_kv; ++k) past[k] = outs[k + 1];
  /* Decode steps. */
  shape[1] = 1;
  for (step = 0; step < tokens; ++step) {
    const tern_tensor* in[1 + MAX_KV];
    double t0;
    CHECK(tern_tensor_create(TERN_INT64, shape, 2, &ids), "ids");
    ((int64_t*)tern_tensor_data(ids))[0] = generated[step];
    in[0] = ids;
    for (k = 0; k < n_kv; ++k) in[k + 1] = past[k];
    t0 = now_ms();
    CHECK(tern_session_run(ds, NULL, in_names, in, n_kv + 1, out_names, n_kv + 1, outs), "decode");
    lat[step] = now_ms() - t0;
    t_all += lat[step];
    tern_tensor_destroy(ids);
    for (k = 0; k < n_kv; ++k) {
      tern_tensor_destroy(past[k]);
      past[k] = outs[k + 1];
    }
    generated[step + 1] = last_argmax(outs[0]);
    tern_tensor_destroy(outs[0]);
    if (step == 0) rss_first = rss_mib();
  }
  rss_end = rss_mib();
  printf("{\"engine\": \"tern\", \"mode\": \"decode\", \"threads\": %d, \"prompt\": %d, "
         "\"steps\": %d, \"tokens_per_s\": %.2f, ",
         threads, prompt, tokens, tokens / (t_all / 1e3));
  printf("\"p50_ms\": %.4f, \"p90_ms\": %.4f, ", percentile(lat, (size_t)tokens, 0.5),
         percentile(lat, (size_t)tokens, 0.9));
  printf("\"rss_start_mib\": %.1f, \"rss_first_step_mib\": %.1f, \"rss_end_mib\": %.1f, ",
         rss_start, rss_first, rss_end);
  printf("\"tokens\": [");
  for (i = 0; i <= tokens; ++i) printf("%s%lld", i ? ", " : "", generated[i]);
  printf("]}\n");
  for (k = 0; k < n_kv; ++k) tern_tensor_destroy(past[k]);
  tern_session_destroy(ps);
  tern_session_destroy(ds);
  tern_model_destroy(pm);
  tern_model_destroy(dm);
  free(generated);
  free(lat);
  return 0;
}

static int run_varlen(int argc, char** argv) {
  const char* path = argv[2];
  int calls = 200, max_len = 512, threads = 0, i, c;
  unsigned long long seed = 1;
  tern_model* m = NULL;
  tern_session* s;
  double *lat, rss_start, rss_20 = 0, rss_end, checksum = 0;
  const char* in_names[2] = {"input_ids", "attention_mask"};
  const char* out_name;
  for (i = 3; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--calls")) calls = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--max-len")) max_len = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--seed")) seed = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--plan-cache")) g_plan_cache = atoll(argv[i + 1]);
  }
  g_state = seed;
  rss_start = rss_mib();
  s = open_session(path, threads, &m);
  out_name = tern_model_output_name(m, 0);
  lat = calloc((size_t)calls, sizeof *lat);
  for (c = 0; c < calls; ++c) {
    int64_t shape[2] = {1, 1 + next_int(max_len)};
    tern_tensor *ids, *mask, *out;
    const tern_tensor* in[2];
    int64_t j;
    double t0;
    CHECK(tern_tensor_create(TERN_INT64, shape, 2, &ids), "ids");
    CHECK(tern_tensor_create(TERN_INT64, shape, 2, &mask), "mask");
    for (j = 0; j < shape[1]; ++j) {
      ((int64_t*)tern_tensor_data(ids))[j] = next_int(8192);
      ((int64_t*)tern_tensor_data(mask))[j] = 1;
    }
    in[0] = ids;
    in[1] = mask;
    t0 = now_ms();
    CHECK(tern_session_run(s, NULL, in_names, in, 2, &out_name, 1, &out), "run");
    lat[c] = now_ms() - t0;
    checksum += (double)((const float*)tern_tensor_data(out))[0];
    tern_tensor_destroy(out);
    tern_tensor_destroy(ids);
    tern_tensor_destroy(mask);
    if (c == 19) rss_20 = rss_mib();
  }
  rss_end = rss_mib();
  printf("{\"engine\": \"tern\", \"mode\": \"varlen\", \"threads\": %d, \"calls\": %d, ", threads,
         calls);
  printf("\"p50_ms\": %.4f, \"p90_ms\": %.4f, ", percentile(lat, (size_t)calls, 0.5),
         percentile(lat, (size_t)calls, 0.9));
  printf("\"rss_start_mib\": %.1f, \"rss_20_mib\": %.1f, \"rss_end_mib\": %.1f, "
         "\"checksum\": %.6g}\n",
         rss_start, rss_20, rss_end, checksum);
  tern_session_destroy(s);
  tern_model_destroy(m);
  free(lat);
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 4 && !strcmp(argv[1], "decode")) return run_decode(argc, argv);
  if (argc >= 3 && !strcmp(argv[1], "varlen")) return run_varlen(argc, argv);
  fprintf(stderr,
          "usage: seq_bench decode PREFILL DECODE [--prompt N] [--tokens N] [--threads N] "
          "[--seed S]\n       seq_bench varlen ENCODER [--calls N] [--max-len N] [--threads N] "
          "[--seed S]\n");
  return 2;
}
