/*
 * Tern: an embeddable neural-network inference engine. This is its only public header.
 *
 * Conventions (they hold for every function below unless its comment says otherwise):
 * - Every fallible call returns a tern_status; TERN_OK (0) is success. On failure the detail is
 *   available from tern_last_error() on the same thread until the next failing call there.
 *   Out-parameters are left untouched on failure.
 * - No C++ exception and no abort crosses this boundary, whatever the input.
 * - Objects are opaque. Every _create/_load has a _destroy that accepts NULL.
 * - Strings returned as `const char*` are owned by the library. Unless a comment says they live
 *   as long as their object, they stay valid until the same function is called again on the
 *   same thread.
 * - Thread safety: models are immutable and may be shared by any number of threads and
 *   sessions; tern_session_run may be called on one session from many threads at once; options
 *   objects and tensors are not synchronised (use one per thread or lock), except that
 *   tern_run_options_cancel may be called from another thread during a run.
 *
 * C99; every symbol is prefixed tern_.
 */
#ifndef TERN_C_API_H
#define TERN_C_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(TERN_BUILDING_LIBRARY)
#define TERN_API __attribute__((visibility("default")))
#else
#define TERN_API
#endif

/* ---- Status and version ---------------------------------------------------------------------- */

typedef enum {
  TERN_OK = 0,
  TERN_ERR_INVALID_ARGUMENT,    /* a NULL pointer, unknown name, wrong shape/dtype, bad value */
  TERN_ERR_INVALID_MODEL,       /* the model file or graph is malformed */
  TERN_ERR_UNSUPPORTED,         /* valid, but an op/attribute/dtype Tern does not implement */
  TERN_ERR_BACKEND_UNAVAILABLE, /* the backend is not built or has no device */
  TERN_ERR_OUT_OF_MEMORY,
  TERN_ERR_IO,                      /* a file could not be opened, read, mapped or written */
  TERN_ERR_INTERNAL,                /* a bug in Tern: please report it with tern_last_error() */
  TERN_ERR_CANCELLED,               /* the run's options were cancelled (tern_run_options_cancel) */
  TERN_ERR_DEADLINE_EXCEEDED,       /* the run passed its deadline (tern_run_options_set_deadline_ms) */
  TERN_STATUS_MAX_ENUM = 0x7FFFFFFF /* not a status: see TERN_DTYPE_MAX_ENUM */
} tern_status;

/* Tensor element types; the values are ONNX's TensorProto.DataType numbers. */
typedef enum {
  TERN_FLOAT32 = 1,
  TERN_UINT8 = 2,
  TERN_INT8 = 3,
  TERN_UINT16 = 4,
  TERN_INT16 = 5,
  TERN_INT32 = 6,
  TERN_INT64 = 7,
  TERN_STRING = 8,
  TERN_BOOL = 9,
  TERN_FLOAT16 = 10,
  TERN_FLOAT64 = 11,
  TERN_UINT32 = 12,
  TERN_UINT64 = 13,
  TERN_BFLOAT16 = 16,
  /* Not a type: makes every non-negative int representable in tern_dtype (bindings pass plain
   * ints; an unknown one gets TERN_ERR_INVALID_ARGUMENT or TERN_ERR_UNSUPPORTED). */
  TERN_DTYPE_MAX_ENUM = 0x7FFFFFFF
} tern_dtype;

/* The library version, "MAJOR.MINOR.PATCH". Static string. */
TERN_API const char* tern_version(void);
/* The ABI version of this header. tern_abi_version() returns the value the library was built
 * with; the two differ when a program or binding compiled against one header loads a library
 * built from another.
 *
 * The policy: the ABI version is incremented whenever a change could break a program compiled
 * against the previous header: a function removed or renamed, a parameter or return type changed,
 * an enum value renumbered, a struct's layout changed other than by growing one that carries its
 * own struct_size, or a documented ownership or lifetime rule changed. Adding functions, adding
 * enum values before a *_MAX_ENUM, and growing a struct_size-versioned struct keep the ABI
 * version (a program built against the older header works unchanged). The exported symbol list
 * (cmake/tern.symbols, checked by the test suite) changes only by additions within one ABI
 * version. The shared library's soname carries the number: libtern.so.1 for ABI version 1.
 *
 * Bindings compare the two at load time and refuse a library with another ABI version. */
#define TERN_ABI_VERSION 1
/* The ABI version the library was built with (TERN_ABI_VERSION of its header). Never fails. */
TERN_API uint32_t tern_abi_version(void);
/* The highest .tern format version this library reads (it reads every version from 1 on). A
 * written file carries the oldest version that can read it: 1 unless the model has subgraphs
 * (If, Loop, Scan), which need 2. */
TERN_API uint32_t tern_format_version(void);
/* The name of a status code ("TERN_ERR_IO", ...); "TERN_UNKNOWN_STATUS" for other values.
 * Static string. */
TERN_API const char* tern_status_name(tern_status s);
/* The message of the last failing call on this thread ("" when none failed yet). The message
 * names what was wrong: the argument, the file position, or the node, op type and tensor. */
TERN_API const char* tern_last_error(void);

/* ---- Tensors --------------------------------------------------------------------------------- */

typedef struct tern_tensor tern_tensor;

/* Creates a tensor that owns zero-initialised, 64-byte aligned storage.
 * shape may be NULL when rank is 0 (a scalar). Dims must be >= 0; a dim of 0 gives an empty
 * tensor. Returns TERN_ERR_INVALID_ARGUMENT for a NULL out, negative dims, an unknown dtype or a
 * size that overflows; TERN_ERR_UNSUPPORTED for TERN_STRING; TERN_ERR_OUT_OF_MEMORY. */
TERN_API tern_status tern_tensor_create(tern_dtype dtype, const int64_t* shape, size_t rank,
                                        tern_tensor** out);
/* Creates a tensor that borrows `data` (zero-copy). The caller keeps `data` alive and unchanged
 * until the tensor is destroyed; then `deleter(data, ctx)` is called if deleter is not NULL.
 * byte_size must be at least the tensor's size (else TERN_ERR_INVALID_ARGUMENT). data may be
 * NULL only for an empty tensor. On failure the deleter is not called. */
TERN_API tern_status tern_tensor_create_from_data(tern_dtype dtype, const int64_t* shape,
                                                  size_t rank, void* data, size_t byte_size,
                                                  void (*deleter)(void* data, void* ctx), void* ctx,
                                                  tern_tensor** out);
/* Destroys a tensor (NULL is ignored). */
TERN_API void tern_tensor_destroy(tern_tensor* t);
/* Element type; 0 for NULL. */
TERN_API tern_dtype tern_tensor_dtype(const tern_tensor* t);
/* Number of dims; 0 for a scalar or NULL. */
TERN_API size_t tern_tensor_rank(const tern_tensor* t);
/* The dims (rank entries), living as long as the tensor; NULL for NULL. */
TERN_API const int64_t* tern_tensor_shape(const tern_tensor* t);
/* The element data, living as long as the tensor; NULL for NULL or an empty tensor. */
TERN_API void* tern_tensor_data(tern_tensor* t);
/* Size of the element data in bytes; 0 for NULL. */
TERN_API size_t tern_tensor_byte_size(const tern_tensor* t);

/* ---- Device tensors (IO binding) -------------------------------------------------------------
 * A tensor may live in a device's memory ("cuda" = "cuda:0", "cuda:N"; "cpu" is host memory) so
 * that inputs and outputs stay on the GPU across runs. tern_tensor_data of a device tensor is a
 * device address (for CUDA: usable with the CUDA runtime, not dereferenceable on the host). A
 * session whose backends include that device reads device inputs where they are; otherwise they
 * are copied to the host first. */

/* Owned, zero-filled storage on `device`. TERN_ERR_INVALID_ARGUMENT for a bad dtype, shape or
 * device name; TERN_ERR_BACKEND_UNAVAILABLE when the device is not built or not present;
 * TERN_ERR_OUT_OF_MEMORY. */
TERN_API tern_status tern_tensor_create_on_device(tern_dtype dtype, const int64_t* shape,
                                                  size_t rank, const char* device,
                                                  tern_tensor** out);
/* Where the tensor's data is: "cpu", "cuda:0", ...; living as long as the tensor; NULL for NULL. */
TERN_API const char* tern_tensor_device(const tern_tensor* t);
/* Copies src's elements into dst (same dtype and shape; any pair of devices). Complete when it
 * returns. TERN_ERR_INVALID_ARGUMENT on a mismatch. */
TERN_API tern_status tern_tensor_copy(const tern_tensor* src, tern_tensor* dst);

/* ---- Models ---------------------------------------------------------------------------------- */

typedef struct tern_model tern_model;

/* Loads a model from a file: a .tern file (recognised by its identifier, weights are mmapped,
 * never copied) or an ONNX ModelProto (imported). The file's name does not matter.
 * The graph is verified before use. Returns TERN_ERR_IO when the file cannot be read,
 * TERN_ERR_INVALID_MODEL when it is malformed (the message says what and where),
 * TERN_ERR_UNSUPPORTED when it uses an op Tern does not implement (named in the message). */
TERN_API tern_status tern_model_load_file(const char* path, tern_model** out);
/* Same as tern_model_load_file from a buffer; the bytes are copied, so the caller may free
 * `data` as soon as the call returns. */
TERN_API tern_status tern_model_load_memory(const void* data, size_t size, tern_model** out);
/* Writes the model in the .tern format (weights in 64-byte aligned segments). */
TERN_API tern_status tern_model_save(const tern_model* m, const char* path);
/* Destroys a model (NULL is ignored). Sessions created from it stay valid. */
TERN_API void tern_model_destroy(tern_model* m);
/* Number of graph inputs the caller feeds (initializers excluded); 0 for NULL. */
TERN_API size_t tern_model_input_count(const tern_model* m);
/* Name of input i, living as long as the model; NULL when m is NULL or i is out of range. */
TERN_API const char* tern_model_input_name(const tern_model* m, size_t i);
TERN_API size_t tern_model_output_count(const tern_model* m);
TERN_API const char* tern_model_output_name(const tern_model* m, size_t i);
/* Declared dtype and shape of input i. *shape lives as long as the model; -1 marks a dynamic
 * dim. *rank is 0 and *shape NULL when the model declares no shape. Any of the out pointers may
 * be NULL. TERN_ERR_INVALID_ARGUMENT for a NULL model or i out of range. For an input that is a
 * sequence or an optional (tern_model_input_kind), dtype and shape are those of its tensors. */
TERN_API tern_status tern_model_input_info(const tern_model* m, size_t i, tern_dtype* dtype,
                                           size_t* rank, const int64_t** shape);
TERN_API tern_status tern_model_output_info(const tern_model* m, size_t i, tern_dtype* dtype,
                                            size_t* rank, const int64_t** shape);
/* Optional inputs: graph inputs that have an initializer (ONNX models before IR 4 list every
 * weight so; later ones to let a caller replace a weight; ONNX Runtime calls them overridable
 * initializers). A run needs none of them: each defaults to its initializer. A run may give any
 * of them by name, with the initializer's dtype and shape, to use that value instead; the
 * session compiles, on the first such run, a variant without those initializers folded in (one
 * per set of names given). Count, name and info as for the inputs above. */
TERN_API size_t tern_model_optional_input_count(const tern_model* m);
TERN_API const char* tern_model_optional_input_name(const tern_model* m, size_t i);
TERN_API tern_status tern_model_optional_input_info(const tern_model* m, size_t i,
                                                    tern_dtype* dtype, size_t* rank,
                                                    const int64_t** shape);

/* ---- Values: sequences and optionals ----------------------------------------------------------
 * Besides tensors, a model's inputs and outputs may be sequences of tensors or optionals (holding
 * a tensor, a sequence, or nothing): ONNX's sequence and optional types. A tern_value holds any
 * of the three, and tern_session_run_values takes and returns them; tern_session_run keeps taking
 * and returning tensors, so a model whose inputs and outputs are all tensors needs none of this.
 * Values are immutable once made. Handles follow the tensor rules: every function that makes a
 * handle gives one the caller destroys. */

typedef struct tern_value tern_value;
typedef enum { TERN_VALUE_TENSOR = 0, TERN_VALUE_SEQUENCE = 1, TERN_VALUE_OPTIONAL = 2 } tern_value_kind;

/* Whether input (or output) i is a tensor, a sequence or an optional, and the dtype of the
 * tensors it holds. *holds_sequence (for an optional: whether it holds a sequence) may be NULL,
 * like the other out pointers. TERN_ERR_INVALID_ARGUMENT for a NULL model or i out of range. */
TERN_API tern_status tern_model_input_kind(const tern_model* m, size_t i, tern_value_kind* kind,
                                           tern_dtype* elem, int* holds_sequence);
TERN_API tern_status tern_model_output_kind(const tern_model* m, size_t i, tern_value_kind* kind,
                                            tern_dtype* elem, int* holds_sequence);
/* A value holding tensor t. The value shares t's data (no copy) and keeps it alive: t may be
 * destroyed first; data t borrows (tern_tensor_create_from_data) must stay valid, and its deleter
 * runs, once both are destroyed. Host tensors only. */
TERN_API tern_status tern_value_from_tensor(const tern_tensor* t, tern_value** out);
/* A sequence of the n tensors items[0..n) (shared as above), all of dtype `elem` (their shapes may
 * differ). n may be 0 (then items may be NULL): an empty sequence of `elem`. */
TERN_API tern_status tern_value_create_sequence(tern_dtype elem, const tern_tensor* const* items,
                                                size_t n, tern_value** out);
/* An optional holding v (a tensor or a sequence value, shared), or nothing when v is NULL. */
TERN_API tern_status tern_value_create_optional(const tern_value* v, tern_value** out);
/* Destroys a value (NULL is ignored). */
TERN_API void tern_value_destroy(tern_value* v);
/* The value's kind. TERN_ERR_INVALID_ARGUMENT for NULL arguments. */
TERN_API tern_status tern_value_get_kind(const tern_value* v, tern_value_kind* kind);
/* The tensor of a TERN_VALUE_TENSOR value: a new handle sharing the value's data.
 * TERN_ERR_INVALID_ARGUMENT for NULL arguments or another kind. */
TERN_API tern_status tern_value_get_tensor(const tern_value* v, tern_tensor** out);
/* A sequence's length (0 for NULL or another kind) and its elements' dtype (0 likewise). */
TERN_API size_t tern_value_sequence_length(const tern_value* v);
TERN_API tern_dtype tern_value_sequence_dtype(const tern_value* v);
/* Element i of a sequence: a new tensor handle sharing its data. TERN_ERR_INVALID_ARGUMENT for
 * NULL arguments, another kind or i out of range. */
TERN_API tern_status tern_value_sequence_at(const tern_value* v, size_t i, tern_tensor** out);
/* Whether an optional holds something: 1 or 0; -1 for NULL or another kind. */
TERN_API int tern_value_optional_has_value(const tern_value* v);
/* What an optional holds (a tensor or a sequence value, shared). TERN_ERR_INVALID_ARGUMENT for
 * NULL arguments, another kind, or an optional that holds nothing. */
TERN_API tern_status tern_value_optional_get(const tern_value* v, tern_value** out);

/* ---- Sessions -------------------------------------------------------------------------------- */

typedef struct tern_session tern_session;
typedef struct tern_session_options tern_session_options;
typedef struct tern_run_options tern_run_options;

TERN_API tern_status tern_session_options_create(tern_session_options** out);
TERN_API void tern_session_options_destroy(tern_session_options* o);
/* Ordered backend preference, comma-separated ("cuda,cpu"; "cuda" is "cuda:0", "cuda:N" picks
 * device N). Nodes a backend cannot run fall back to the next one. "cpu" is appended when absent
 * (unless tern_session_options_set_cpu_fallback turned that off), so every op Tern knows can run.
 * TERN_ERR_INVALID_ARGUMENT names an unknown backend. A known backend that is not built, cannot
 * be loaded or has no device is reported by tern_session_create with
 * TERN_ERR_BACKEND_UNAVAILABLE, saying which (see tern_cuda_is_built); a session is never
 * silently moved to another backend. */
TERN_API tern_status tern_session_options_set_backends(tern_session_options* o, const char* list);
/* enabled 0: runs execute kernels of the listed backends only, "cpu" is not appended. A node
 * none of them can run fails tern_session_create (or, when only the input shapes rule a kernel
 * out, tern_session_run) with TERN_ERR_UNSUPPORTED naming the node, instead of running on the
 * CPU: a way to prove a model runs wholly on a device. What is known before a run still comes
 * from the CPU's kernels: constants folded at creation and the shape arithmetic of each plan
 * (Shape and the integer ops on shapes, computed while planning); such nodes run no kernel.
 * Default 1. */
TERN_API tern_status tern_session_options_set_cpu_fallback(tern_session_options* o, int enabled);
/* Intra-op threads for this session's runs (the "num_threads" flag for this session only);
 * 0 means follow the process value (tern_set_num_threads). n < 0 or > 4096 is invalid. */
TERN_API tern_status tern_session_options_set_num_threads(tern_session_options* o, int n);
/* Inter-op threads for this session's runs: how many independent nodes may run at the same time
 * (the "num_interop_threads" flag for this session only); 0 means follow the process value. */
TERN_API tern_status tern_session_options_set_num_interop_threads(tern_session_options* o, int n);
/* A limit on the memory the session allocates: its packed weights, constants it folds, the arena
 * of every run in flight, and the outputs of its runs until the caller destroys them. A creation
 * or run that would pass it fails with TERN_ERR_OUT_OF_MEMORY (the message names the limit),
 * allocating nothing more, and the session stays usable. 0 (the default) means no limit.
 * Memory oneDNN or OpenBLAS allocate inside themselves is not counted. */
TERN_API tern_status tern_session_options_set_max_memory_bytes(tern_session_options* o,
                                                               uint64_t bytes);
/* How much memory the session's plans may keep: a plan is made for each set of input shapes a
 * run brings (cheaply when only dims changed: shape inference, the kernels whose inputs changed
 * and the memory plan, with the weights packed once per session), and kept for runs with the same
 * shapes until the plans together pass this many bytes; then the least recently used go (the most
 * recent one is always kept). Run arenas are pooled by the session apart from this. Default
 * 4 MiB; 0 keeps the latest plan only. TERN_ERR_INVALID_ARGUMENT: o is NULL. */
TERN_API tern_status tern_session_options_set_plan_cache_bytes(tern_session_options* o,
                                                               uint64_t bytes);
/* Progress of the long steps before a session can run, for tools that draw a bar (`tern convert
 * --optimize`): fn(stage, done, total, ctx) is called on the thread calling tern_session_create
 * with these options, and on a thread whose tern_session_run builds a plan for new input shapes,
 * as each stage advances from done = 0 to done = total. Stages (static strings): "fold
 * constants" (nodes visited), "optimize" (graph rewrite passes), "prepare kernels" (nodes; the
 * kernels pack their weights here, the long part for big models). A stage may come more than
 * once (subgraphs, each new plan). fn must return quickly and must not call Tern; ctx is passed
 * through. NULL fn: no reports (the default). TERN_ERR_INVALID_ARGUMENT: o is NULL. */
typedef void (*tern_progress_fn)(const char* stage, size_t done, size_t total, void* ctx);
TERN_API tern_status tern_session_options_set_progress(tern_session_options* o,
                                                       tern_progress_fn fn, void* ctx);
/* Overrides any flag of scope "session" or "run" for this session alone (names and values as in
 * tern_flag_set; "num_threads" and "num_interop_threads" included). The session reads the global
 * value of every flag it does not override at the start of each run. TERN_ERR_INVALID_ARGUMENT:
 * unknown name, a global-scope flag (like "cpu.max_capability"), or a bad value (the message
 * lists the allowed values). */
TERN_API tern_status tern_session_options_set_flag(tern_session_options* o, const char* name,
                                                   const char* value);

typedef enum {
  TERN_SDP_MATH = 0,
  TERN_SDP_FLASH,
  TERN_SDP_MEM_EFFICIENT,
  TERN_SDP_CUDNN,
  TERN_SDP_MAX_ENUM = 0x7FFFFFFF /* not a backend: see TERN_DTYPE_MAX_ENUM */
} tern_sdp_backend;

/* Per-run options, passed to tern_session_run (NULL: none). Not synchronised: one per thread,
 * except tern_run_options_cancel and tern_run_options_clear_cancel, which any thread may call. */
TERN_API tern_status tern_run_options_create(tern_run_options** out);
TERN_API void tern_run_options_destroy(tern_run_options* r);
/* Overrides a flag of scope "run" (the sdp.* flags, "onednn.verbose", "blas.verbose") for the
 * runs given these options. Session- and global-scope flags give TERN_ERR_INVALID_ARGUMENT. */
TERN_API tern_status tern_run_options_set_flag(tern_run_options* r, const char* name,
                                               const char* value);
/* The sdpa_kernel idea: only the n listed attention backends may be used in runs given these
 * options (n = 0 allows none); the others are disabled for those runs, whatever the global
 * sdp flags say. */
TERN_API tern_status tern_run_options_set_sdp_backends(tern_run_options* r,
                                                       const tern_sdp_backend* list, size_t n);
/* Runs given these options return their outputs on `device` ("cpu", the default, or a device the
 * session runs on, like "cuda" or "cuda:1"): IO binding of outputs. Refused here:
 * TERN_ERR_INVALID_ARGUMENT for an unknown name, TERN_ERR_BACKEND_UNAVAILABLE for a device this
 * build or machine lacks (as tern_tensor_create_on_device). A device that exists but is not the
 * session's is refused by tern_session_run (TERN_ERR_INVALID_ARGUMENT). */
TERN_API tern_status tern_run_options_set_output_device(tern_run_options* r, const char* device);
/* A deadline for each run given these options: a run that has not finished `ms` milliseconds
 * after tern_session_run was called stops and returns TERN_ERR_DEADLINE_EXCEEDED (the message
 * says what it stopped before and when). 0 (the default) means no deadline.
 * TERN_ERR_INVALID_ARGUMENT: r is NULL or ms < 0.
 * How soon a run stops: runs check their deadline and cancel flag (below) before every node they
 * execute, and Loop, Scan and SequenceMap before every iteration of their body (whose nodes
 * check too), so a run stops within one node's time. A node that has started runs to its end
 * (one big MatMul or convolution is not interrupted). On CUDA and Vulkan the check is made on the
 * host before each kernel is queued; work already queued finishes before the run returns (its
 * memory goes back to the session), and a CUDA graph captured under cuda.graphs replays whole.
 * Vulkan submits a run in chunks of about 2 ms of estimated device work and records at most two
 * chunks ahead of the device, so a stop there returns once the chunk running and the one queued
 * behind it are done (on llvmpipe a few milliseconds; the kernels recorded but not yet submitted
 * are dropped).
 * A stopped run writes no output, leaks nothing, and leaves the session usable: the next run
 * gives the same results as if the stopped one never happened. */
TERN_API tern_status tern_run_options_set_deadline_ms(tern_run_options* r, int64_t ms);
/* Cancels the runs given these options (ONNX Runtime's RunOptions terminate flag). Unlike the
 * other functions on run options, this one may be called from any thread while runs using r
 * are in flight (r must stay alive until they return). Runs in flight stop as
 * tern_run_options_set_deadline_ms describes and return TERN_ERR_CANCELLED. Cancel is sticky,
 * as ONNX Runtime's is: runs started later with r return TERN_ERR_CANCELLED at once, without
 * running anything, until tern_run_options_clear_cancel (or use one run options object per
 * cancellable request). TERN_ERR_INVALID_ARGUMENT: r is NULL. */
TERN_API tern_status tern_run_options_cancel(tern_run_options* r);
/* Undoes tern_run_options_cancel for the runs started afterwards (ONNX Runtime's
 * UnsetTerminate). Thread-safe like tern_run_options_cancel; a run in flight that has not yet
 * seen the cancel goes on. TERN_ERR_INVALID_ARGUMENT: r is NULL. */
TERN_API tern_status tern_run_options_clear_cancel(tern_run_options* r);

/* Compiles the model for the options' backends (NULL options: defaults, "cpu"). The session keeps
 * what it needs of the model, so the model may be destroyed first. When every input shape is
 * static the execution plan is built here, so shape errors surface now rather than in the first
 * run. Returns TERN_ERR_UNSUPPORTED naming the node and op type that no backend implements. */
TERN_API tern_status tern_session_create(const tern_model* m, const tern_session_options* o,
                                         tern_session** out);
/* Runs the model. input_names[i] names inputs[i] (every model input must be given, once, and
 * optional inputs may be); the inputs are borrowed for the call only. output_names lists the
 * outputs wanted; outputs[j]
 * receives a new tensor the caller destroys. On failure no output is written.
 * TERN_ERR_INVALID_ARGUMENT: NULL pointers, unknown/missing/duplicate names, wrong dtype, rank or
 * dims (the message names the input and the expected and given values). Errors inside a kernel
 * name the node, its op type and the tensor. TERN_ERR_CANCELLED / TERN_ERR_DEADLINE_EXCEEDED:
 * r was cancelled or its deadline passed (tern_run_options_cancel); the session stays usable.
 * Safe to call from many threads at once. */
TERN_API tern_status tern_session_run(tern_session* s, const tern_run_options* r,
                                      const char* const* input_names,
                                      const tern_tensor* const* inputs, size_t n_inputs,
                                      const char* const* output_names, size_t n_outputs,
                                      tern_tensor** outputs);
/* tern_session_run with values: inputs[i] may be a tensor, sequence or optional value, and
 * outputs[j] receives a new value of the output's kind (a tensor output as a TERN_VALUE_TENSOR
 * value). Everything else as tern_session_run; a model with sequence or optional outputs must be
 * run this way (tern_session_run refuses them with TERN_ERR_UNSUPPORTED). */
TERN_API tern_status tern_session_run_values(tern_session* s, const tern_run_options* r,
                                             const char* const* input_names,
                                             const tern_value* const* inputs, size_t n_inputs,
                                             const char* const* output_names, size_t n_outputs,
                                             tern_value** outputs);
/* Writes the session's model as .tern after its graph optimizations (constant folding, fusions),
 * with the weights its kernels packed into layouts of their own stored beside the plain ones. A
 * session created from that file skips the optimizations and uses the packed weights in place
 * from the file's mapping instead of packing them again; kernels on another CPU or library
 * version that want other layouts pack from the plain weights as usual, so the file stays
 * portable. Weights are packed when a plan is built: at creation for models with static input
 * shapes, at the first run for each new input shape otherwise. packed_count (may be NULL)
 * receives the number of packed layouts written. Writes atomically (temporary file renamed).
 * TERN_ERR_INVALID_ARGUMENT for NULL s or path, TERN_ERR_IO when the file cannot be written. */
TERN_API tern_status tern_session_save_optimized(const tern_session* s, const char* path,
                                                 size_t* packed_count);
/* Destroys a session (NULL is ignored). No run may be in flight on it. A profiling session whose
 * trace was not written by tern_session_end_profiling writes it now (errors are ignored here). */
TERN_API void tern_session_destroy(tern_session* s);

/* Profiling, like ONNX Runtime's enable_profiling: sessions created with these options record one
 * event per executed node of every run (node name, op type, backend, kernel, input and output
 * dtypes and shapes, threads, duration) plus one per run, one for session creation and one
 * "plan" event each time a run's input shapes need a plan the session has not cached (its input
 * shapes, and whether a template for those ranks was refitted or a full plan built). path
 * (copied) is where tern_session_end_profiling writes them as a Chrome trace JSON
 * (chrome://tracing, Perfetto); NULL or "" turns profiling off. Recording costs a clock read and
 * a few strings per node. TERN_ERR_INVALID_ARGUMENT: o is NULL. */
TERN_API tern_status tern_session_options_enable_profiling(tern_session_options* o,
                                                           const char* path);
/* Writes the trace of every event recorded so far to the path given at creation (each call
 * rewrites the whole file). TERN_ERR_INVALID_ARGUMENT: s is NULL or was not created with
 * profiling; TERN_ERR_IO: the file cannot be written. */
TERN_API tern_status tern_session_end_profiling(tern_session* s);
/* Memory of the session's most recent plan (the one built at creation for static input shapes,
 * else the one the last run used): *activation_bytes is the run arena holding every intermediate
 * tensor, with buffers reused once their last reader ran; *packed_weight_bytes counts the weight
 * copies kernels made into their own layouts (oneDNN's blocked formats, packed GEMM panels).
 * Weights used in place from the model are not counted; graph outputs are allocated per run and
 * not counted either. For a model whose shapes depend on values computed at run time (a
 * detector), *activation_bytes is the arena of the part planned ahead (the nodes that do not
 * depend on such values); the rest allocates per node. Subgraphs' packed weights are included.
 * Either pointer may be NULL. TERN_ERR_INVALID_ARGUMENT: s is NULL, or no plan exists yet
 * (dynamic input shapes before the first run). */
TERN_API tern_status tern_session_memory_info(const tern_session* s, size_t* activation_bytes,
                                              size_t* packed_weight_bytes);
/* One figure of the session's memory and planning, by name:
 *   "plans"                plans kept in the plan cache (tern_session_options_set_plan_cache_bytes)
 *   "plan_bytes"           the memory they hold (steps, value layouts, values computed while
 *                          planning)
 *   "packed_weight_bytes"  weights packed into kernels' layouts, once per session whatever the
 *                          shapes run (layouts found in an optimized .tern file are used in place
 *                          and not counted)
 *   "arena_bytes"          run arenas held, in use or pooled for the next runs (host and device)
 *   "full_plans"           plans built from scratch so far
 *   "template_plans"       plans made from an earlier plan's decisions so far (only shapes changed)
 * TERN_ERR_INVALID_ARGUMENT: s, name or value is NULL, or an unknown name (the message lists the
 * known ones). */
TERN_API tern_status tern_session_memory_stat(const tern_session* s, const char* name,
                                              uint64_t* value);

/* ---- Graph introspection (for tools: `tern inspect`, `tern check`) ---------------------------
 * The model's main graph as loaded, before Tern's optimizations: nodes in file order and values
 * by index. Strings live as long as the model. */

/* Number of nodes of the main graph (subgraphs of If/Loop/Scan not counted); 0 for NULL. */
TERN_API size_t tern_model_node_count(const tern_model* m);
/* Node i's name ("" when the file gave none), op type, domain ("" for ai.onnx) and its numbers of
 * inputs and outputs (omitted optional ones included). Any out pointer may be NULL.
 * TERN_ERR_INVALID_ARGUMENT for a NULL model or i out of range. */
TERN_API tern_status tern_model_node_info(const tern_model* m, size_t i, const char** name,
                                          const char** op_type, const char** domain,
                                          size_t* n_inputs, size_t* n_outputs);
/* The name of node i's input (output) j: "" for an omitted optional one, NULL when m is NULL or
 * i or j is out of range. */
TERN_API const char* tern_model_node_input(const tern_model* m, size_t i, size_t j);
TERN_API const char* tern_model_node_output(const tern_model* m, size_t i, size_t j);
/* Number of values (tensors) of the main graph: inputs, weights, intermediates, outputs. */
TERN_API size_t tern_model_value_count(const tern_model* m);
/* Value i: its name, dtype, whether its shape is known (*has_shape 0: not even the rank), rank
 * and dims (-1 for a dim not known before a run), and whether it is a constant (a weight or
 * folded data: its shape is exact). *shape stays valid until this function is called again on
 * the same thread. Any out pointer may be NULL. Sequence and optional values have dtype 0 here.
 * TERN_ERR_INVALID_ARGUMENT for a NULL model or i out of range. */
TERN_API tern_status tern_model_value_info(const tern_model* m, size_t i, const char** name,
                                           tern_dtype* dtype, int* has_shape, size_t* rank,
                                           const int64_t** shape, int* is_constant);
/* The producer the file names ("pytorch 2.1", "" when none); lives as long as the model. NULL for
 * NULL. */
TERN_API const char* tern_model_producer(const tern_model* m);
/* The ai.onnx opset the model's nodes follow; 0 for NULL. */
TERN_API int64_t tern_model_opset(const tern_model* m);
/* The dtype and shape the session's most recent plan (made at creation for static input shapes,
 * else by the last run) gives the value `name` of the model: every dim known (dtype 0 for a
 * sequence or an optional value, as in tern_model_value_info). *shape stays valid
 * until this function is called again on the same thread. TERN_ERR_INVALID_ARGUMENT when there is
 * no plan yet, or the value is not in it (optimized away, fused into another node, or computed
 * per run because shapes depend on data). */
TERN_API tern_status tern_session_value_shape(const tern_session* s, const char* name,
                                              tern_dtype* dtype, size_t* rank,
                                              const int64_t** shape);
/* Reads a serialized ONNX TensorProto file (the input_N.pb / output_N.pb files of ONNX test
 * data sets) into a new tensor the caller destroys. TERN_ERR_IO when the file cannot be read,
 * TERN_ERR_INVALID_MODEL when it is not a TensorProto, TERN_ERR_UNSUPPORTED for a dtype Tern
 * lacks or in a build without ONNX support. */
TERN_API tern_status tern_tensor_read_onnx_file(const char* path, tern_tensor** out);

/* ---- Backends API: threads, flags and torch.backends-style queries (DESIGN §3) ----------------
 */

/* Each enum below ends with a *_MAX_ENUM value that is not a choice: it makes any non-negative
 * int representable, so an unknown one from a binding is refused with a status. */
typedef enum {
  TERN_BLAS_DEFAULT = 0,
  TERN_BLAS_CUBLAS,
  TERN_BLAS_CUBLASLT,
  TERN_BLAS_MAX_ENUM = 0x7FFFFFFF
} tern_blas_library;
typedef enum {
  TERN_LINALG_DEFAULT = 0,
  TERN_LINALG_CUSOLVER,
  TERN_LINALG_MAGMA,
  TERN_LINALG_MAX_ENUM = 0x7FFFFFFF
} tern_linalg_library;
typedef enum {
  TERN_VERBOSE_OFF = 0,
  TERN_VERBOSE_ON,
  TERN_VERBOSE_ON_CREATION,
  TERN_VERBOSE_MAX_ENUM = 0x7FFFFFFF
} tern_verbose_level;

/* Threads, with PyTorch's rules. Intra-op threads ("num_threads") are the threads one node may
 * use: Tern's kernels, oneDNN and OpenBLAS all run on one OpenMP pool of that size, so a run
 * never keeps more cores busy than asked. Inter-op threads ("num_interop_threads") run
 * independent nodes of a graph at the same time when the plan's cost estimate says that beats
 * running them one after another: W = min(inter, the graph's widest level) workers (the calling
 * thread and W - 1 inter-op pool threads) each run a node on num_threads / W intra-op threads
 * (at least 1). With num_threads 1 that pays when the branches carry more work than handing
 * nodes between threads costs (a few microseconds each); with more, when the nodes are too
 * small to split well. Otherwise nodes run one after another, each on all intra-op threads. So
 * a run keeps at most max(intra, inter) cores busy.
 * One budget: all runs of all sessions in the process share the "cpu.thread_budget" flag's
 * threads (default: the logical CPUs of the affinity mask, at most the cgroup CPU quota rounded
 * up; env TERN_THREAD_BUDGET). A run takes min(its num_threads, what is free) of it as its
 * intra-op threads, and at least its calling thread, which runs anyway; its inter-op workers
 * beyond those come from the budget too. So N application threads calling tern_session_run at
 * once keep about max(budget, N) threads busy, not N x num_threads; with the run-scoped
 * "cpu.thread_budget_wait" flag a run that finds nothing free waits (its deadline and
 * cancellation still apply) and the process keeps at most the budget busy. The run's plan is
 * made for the thread count it got (a first run at a new count plans, as a new shape does).
 * Contention: with "cpu.adaptive_threads" (default on) a session runs with fewer threads
 * (halving down to 1) while other processes hold the CPUs its threads would need (each parallel
 * region would wait for a preempted thread): at once when the CPUs other processes left to this
 * one over the last ~100 ms (idle ones plus those it used itself, /proc/stat) are fewer than its
 * threads by over half a CPU; and, per input shapes and thread count, while that is measured
 * faster: slow runs (two of four over 1.5x the best at their count, or one over 3x) try fewer
 * threads, kept unless clearly slower. It tries more now and then (1 run in 16, backing off to
 * 1 in 256), but not while they would not fit in the CPUs left to it. Where kernels run on OpenMP, a run with several
 * intra-op threads is planned and run on one of a few long-lived Tern threads ("cpu.run_homes",
 * default on) while the calling thread waits, and a CPU session is created there too: OpenMP
 * gives every calling thread a team of its own, and more team threads than CPUs make every team
 * sleep at each parallel region.
 * tern_parallel_info reports the budget.
 * Defaults (both): the physical cores among the CPUs this process may use (its sched_getaffinity
 * mask, or under OMP_PROC_BIND the CPUs of all OpenMP places), at most the process's cgroup CPU
 * quota rounded up (cgroup v2 cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us, over its cgroup
 * and the ancestors: 1.5 CPUs give 2), at least 1; computed once, at first use. tern_parallel_info
 * says what the default came from. Precedence for num_threads: tern_set_num_threads >
 * MKL_NUM_THREADS > OMP_NUM_THREADS > default; for inter-op: tern_set_num_interop_threads >
 * TERN_NUM_INTEROP_THREADS > default. Both may change at any time (unlike PyTorch's once-only
 * inter-op setting) and take effect at the next run of every session that does not override
 * them. n must be 1..4096 (else TERN_ERR_INVALID_ARGUMENT). Idle threads spin a bounded time,
 * then sleep: OpenMP's as OMP_WAIT_POLICY / GOMP_SPINCOUNT said when the process started
 * (unset: libgomp's default, about 300,000 pauses, some milliseconds), Tern's own pools (the
 * inter-op pool; the intra-op pool of builds without OpenMP) for the "cpu.spin_us" flag's
 * microseconds (default 200); cpu.spin_us 0 also releases a run's OpenMP team as the run
 * returns, so nothing spins after it.
 * Placement: the "cpu.affinity" flag (a CPU list like "0-3,8"; "none", the default, pins nothing;
 * env TERN_CPU_AFFINITY; per session through tern_session_options_set_flag) pins a run's threads:
 * the calling thread and its OpenMP team for the run (the calling thread gets its own mask back
 * when the run returns; the team's workers keep the list until a run on that thread without
 * one gives them back their own), and inter-op pool threads while they work for the run. Every
 * thread gets the whole list. It replaces, for those threads, the binding OMP_PROC_BIND /
 * OMP_PLACES gave them; leave it "none" to keep OpenMP's placement. A num_threads left at its
 * default becomes at most the list's physical cores (one set by the API, the environment or the
 * session is kept). A malformed list ("0-", "3-1", "a") or one naming CPUs the machine does not have
 * is TERN_ERR_INVALID_ARGUMENT; CPUs the kernel refuses at run time (outside the process's
 * cpuset) leave the masks unchanged, and tern_parallel_info reports it. */
TERN_API tern_status tern_set_num_threads(int n);
TERN_API int tern_get_num_threads(void);
TERN_API tern_status tern_set_num_interop_threads(int n);
TERN_API int tern_get_num_interop_threads(void);
/* Like PyTorch's torch.__config__.parallel_info(): thread counts and where each came from (for a
 * default, the affinity mask, physical cores and cgroup quota it was derived from), cpu.affinity
 * and the latest pinning, what oneDNN and OpenBLAS were given, the OpenMP runtime and the
 * environment variables. */
TERN_API const char* tern_parallel_info(void);

/* ---- Build and machine queries --------------------------------------------------------------- */

/* The build configuration (version, compiler, optional libraries and their versions, CPU
 * capability, thread settings, backends built and available), as text, like PyTorch's
 * torch.__config__.show(). Rebuilt on each call. */
TERN_API const char* tern_config_show(void);
/* The vector capability Tern's kernels dispatch to: what the CPU has (cpuid / auxv) capped by the
 * "cpu.max_capability" flag (env TERN_CPU_CAPABILITY, e.g. AVX2 or DEFAULT): "DEFAULT" |
 * "NO AVX" | "AVX2" | "AVX512" | "VSX" | "Z VECTOR" | "SVE256". Static string. The cap also
 * limits oneDNN's ISA, which oneDNN accepts once per process: the value current when the first
 * session is created. */
TERN_API const char* tern_cpu_get_capability(void);
/* 1 when the optional library was built in and can be used, else 0. */
TERN_API int tern_onednn_is_available(void);
TERN_API int tern_openblas_is_available(void);
TERN_API int tern_openmp_is_available(void);
/* Backends: built into this library, and usable on this machine (a device is present).
 *
 * The CUDA backend is a module, libtern_cuda.so, installed beside libtern and opened the first
 * time a CUDA backend, tern_cuda_is_built/_is_available/_device_count, tern_cudnn_is_available/
 * _version, tern_sdp_can_use or tern_config_show needs it; the CUDA flags never open it. A process
 * that asks for none of these never maps a CUDA library, and libtern loads on machines without
 * one. It is looked for: at the path in the environment variable TERN_CUDA_MODULE when set (only
 * there); beside libtern (or beside the program, for a static link); in the library directory
 * libtern was configured to install into; then by the dynamic linker's search (LD_LIBRARY_PATH,
 * the program's runpath). tern_config_show says where it looked and what it found.
 * tern_cuda_is_built: 1 when the module was found (even if a CUDA library it needs is missing).
 * tern_cuda_is_available: 1 when the module and its CUDA libraries load and the driver reports a
 * device. tern_cuda_device_count: those devices, 0 when the module, a CUDA library or the driver is
 * missing. A session asking for "cuda" or "cuda:N" then fails with TERN_ERR_BACKEND_UNAVAILABLE,
 * its message naming what is missing: the module (and where it was looked for), the library that
 * could not be loaded, or the driver. */
TERN_API int tern_cuda_is_built(void);
TERN_API int tern_cuda_is_available(void);
TERN_API int tern_cuda_device_count(void);
TERN_API int tern_vulkan_is_built(void);
TERN_API int tern_vulkan_is_available(void);
TERN_API int tern_mps_is_built(void);
TERN_API int tern_mps_is_available(void);

/* CUDA matmul flags (torch.backends.cuda.matmul). They keep their values in every build and take
 * effect on CUDA sessions. */
TERN_API int tern_cuda_matmul_get_allow_tf32(void);
TERN_API void tern_cuda_matmul_set_allow_tf32(int on);
TERN_API int tern_cuda_matmul_get_allow_fp16_reduced_precision_reduction(void);
TERN_API void tern_cuda_matmul_set_allow_fp16_reduced_precision_reduction(int on);
TERN_API int tern_cuda_matmul_get_allow_bf16_reduced_precision_reduction(void);
TERN_API void tern_cuda_matmul_set_allow_bf16_reduced_precision_reduction(int on);
/* Env TERN_BLAS_PREFER_CUBLASLT=1 makes CUBLASLT the initial value. An out-of-range value gives
 * TERN_ERR_INVALID_ARGUMENT. */
TERN_API tern_blas_library tern_cuda_get_preferred_blas_library(void);
TERN_API tern_status tern_cuda_set_preferred_blas_library(tern_blas_library lib);
/* Env TERN_LINALG_PREFER_CUSOLVER=1 makes CUSOLVER the initial value. No effect yet: no op Tern
 * implements uses a linear-algebra solver (cuSOLVER or MAGMA), so nothing reads it; kept for
 * torch.backends parity (tern info --flags says so too). */
TERN_API tern_linalg_library tern_cuda_get_preferred_linalg_library(void);
TERN_API tern_status tern_cuda_set_preferred_linalg_library(tern_linalg_library lib);

/* Scaled-dot-product attention backends (torch.backends.cuda.*_sdp_enabled; on CPU, MATH and
 * FLASH exist). The Attention op (ONNX Attention, and MatMul-Softmax-MatMul subgraphs fused by
 * the mha fastpath) on the CPU uses MATH (the faster there) when it is enabled and its score
 * matrix (batch x heads x seq_q x seq_kv floats) stays within 64 MiB, else FLASH when it is
 * enabled and can run the case, else MATH; when neither may run, the plan fails with
 * TERN_ERR_INVALID_ARGUMENT saying why. Cases only the portable kernel takes (qk_matmul_output,
 * nonpad_kv_seqlen) are MATH and run only while MATH is enabled. One rule on every backend: with
 * no enabled backend able to run a case (all disabled included) the plan fails with
 * TERN_ERR_INVALID_ARGUMENT. CUDA tries FLASH, MEM_EFFICIENT, then MATH. TERN_SDP_CUDNN has no
 * effect yet: no kernel uses cuDNN's fused attention, so enabling it enables nothing and
 * disabling it disables nothing (tern info --flags says so too). The flags are
 * "sdp.math_enabled", "sdp.flash_enabled", "sdp.mem_efficient_enabled", "sdp.cudnn_enabled"
 * (scope run). */
TERN_API int tern_sdp_enabled(tern_sdp_backend b); /* 0 also for an unknown b */
TERN_API tern_status tern_sdp_enable(tern_sdp_backend b, int on);
/* struct_size lets the struct grow: set it to sizeof(tern_sdp_params) of the header you compile
 * against. The library accepts every size from the first version's (TERN_SDP_PARAMS_SIZE_V1) on:
 * fields past a caller's struct_size take their defaults, and fields of a newer header that this
 * library does not know must be zero. is_causal and has_mask are 0 or 1; every attention kernel
 * of Tern handles causal and masked attention, so they do not change the answer today. dropout_p
 * must be in [0, 1); above 0 no kernel applies (inference kernels do not apply dropout). */
typedef struct {
  size_t struct_size;
  int64_t batch, num_heads, seq_len_q, seq_len_kv, head_dim;
  tern_dtype dtype;
  int is_causal;
  int has_mask;
  float dropout_p;
} tern_sdp_params;
/* The first version's size: the fields above (64 bytes on 64-bit platforms). */
#define TERN_SDP_PARAMS_SIZE_V1 (offsetof(tern_sdp_params, dropout_p) + sizeof(float))
/* 1 when backend b is enabled, built and able to run attention with these parameters on this
 * machine; else 0, with the reasons in why (NUL-terminated, truncated to why_len; why may be
 * NULL when why_len is 0): also for a NULL p, a struct_size below TERN_SDP_PARAMS_SIZE_V1 (or
 * above 4096), unknown fields set, dropout_p outside [0, 1) and is_causal or has_mask other
 * than 0 and 1. */
TERN_API int tern_sdp_can_use(tern_sdp_backend b, const tern_sdp_params* p, char* why,
                              size_t why_len);

/* cuDNN (torch.backends.cudnn). tern_cudnn_version is -1 when the CUDA module (which links cuDNN)
 * is not built or cannot be loaded; tern_cudnn_is_available needs a CUDA device too. */
TERN_API int tern_cudnn_is_available(void);
TERN_API int64_t tern_cudnn_version(void);
TERN_API int tern_cudnn_get_enabled(void);
TERN_API void tern_cudnn_set_enabled(int on);
TERN_API int tern_cudnn_get_allow_tf32(void);
TERN_API void tern_cudnn_set_allow_tf32(int on);
TERN_API int tern_cudnn_get_deterministic(void);
TERN_API void tern_cudnn_set_deterministic(int on);
TERN_API int tern_cudnn_get_benchmark(void);
TERN_API void tern_cudnn_set_benchmark(int on);
TERN_API int tern_cudnn_get_benchmark_limit(void);
/* limit 0..1048576 (0 = try every algorithm); else TERN_ERR_INVALID_ARGUMENT. */
TERN_API tern_status tern_cudnn_set_benchmark_limit(int limit);

/* torch.backends.mha: fuse MatMul-Softmax-MatMul attention subgraphs into one Attention kernel.
 * Read when a plan is built (plans are cached per value). */
TERN_API int tern_mha_get_fastpath_enabled(void);
TERN_API void tern_mha_set_fastpath_enabled(int on);

/* oneDNN verbose output on stdout (torch.backends.mkldnn.verbose): OFF, ON (each primitive
 * execution), ON_CREATION (creation too). Applied at the start of the next run; for a single
 * run, set the "onednn.verbose" flag in that run's options instead. oneDNN's switch is
 * process-wide: while a run with its own level is in progress, primitives of other threads'
 * runs print (or stay silent) by that level too, and the level goes back to the global value
 * when that run ends. TERN_ERR_BACKEND_UNAVAILABLE
 * when oneDNN is not built in; TERN_ERR_INVALID_ARGUMENT for an unknown level. */
TERN_API tern_status tern_onednn_set_verbose(tern_verbose_level level);

/* torch.backends.opt_einsum: Einsum contracts its operands pairwise in the order a path search
 * picks ("auto": optimal for up to 4 operands, else greedy; "greedy"; "optimal"); disabled, it
 * contracts left to right. Same result, different cost. */
TERN_API int tern_opt_einsum_get_enabled(void);
TERN_API void tern_opt_einsum_set_enabled(int on);
TERN_API const char* tern_opt_einsum_get_strategy(void); /* static string */
TERN_API tern_status tern_opt_einsum_set_strategy(const char* s);

/* torch.backends.opt_einsum.is_available: 1. The path search is Tern's own (built into its Einsum
 * kernel, no opt_einsum package needed), so it is there in every build. */
TERN_API int tern_opt_einsum_is_available(void);

/* torch.backends.{mkl,nnpack,cusparselt}.is_available: 0 in every build of Tern today, for the
 * reasons tern_backend_unavailable_reason gives: Tern's CPU GEMMs run on OpenBLAS (or Tern's own
 * GEMM) and oneDNN, never on MKL; its convolutions on oneDNN and its own kernels, not NNPACK; and
 * no kernel uses structured-sparse matmuls, so the CUDA module does not link cuSPARSELt. */
TERN_API int tern_mkl_is_available(void);
TERN_API int tern_nnpack_is_available(void);
TERN_API int tern_cusparselt_is_available(void);
/* torch.backends.cuda.is_flash_attention_available: 1 when a FLASH scaled-dot-product attention
 * kernel is built and can run on this machine. The CPU backend's FLASH kernel (tiled online
 * softmax, float32/float16/bfloat16) is always built, so this is 1 in every build; CUDA adds its
 * own where a device is. Whether FLASH takes a given case (head_dim, dtype, the sdp flags) is
 * tern_sdp_can_use(TERN_SDP_FLASH, ...). */
TERN_API int tern_is_flash_attention_available(void);
/* Why the optional library, backend or feature `name` cannot be used here; "" when it can. Names
 * are torch.backends' module names: "mkl", "nnpack", "cusparselt", "opt_einsum", "mkldnn" (alias
 * "onednn"), "openblas", "openmp", "cuda", "cudnn", "mps", "vulkan", "flash_attention". NULL for
 * another name or a NULL one. The string follows the usual rule (valid until the next call on
 * this thread). tern info and tern_config_show list every name with its answer. */
TERN_API const char* tern_backend_unavailable_reason(const char* name);

/* torch.backends.mkl.verbose for Tern's GEMMs: ON prints one line on stdout (as oneDNN's verbose
 * does) for each matrix product a CPU kernel runs: MatMul, FusedMatMul and Gemm (OpenBLAS's or
 * Tern's own sgemm, the panel GEMM of constant weights, oneDNN's matmul), and the GEMMs of Conv
 * by im2col, ConvTranspose and Einsum. A line reads
 *   tern_blas_verbose,exec,<op>,<library:kernel>,<trans>,m=<M>,n=<N>,k=<K>,batch=<count>,
 *   threads=<T>,<milliseconds>
 * (one line, comma-separated; batch is the number of products of that shape in the call).
 * Attention's internal products are not listed. OFF (the default) prints nothing.
 * ON_CREATION gives TERN_ERR_INVALID_ARGUMENT: these GEMMs have no creation step to print.
 * Takes effect at the next run. For a single run set the "blas.verbose" flag (scope run) in that
 * run's options: only that run prints, whatever the global value; env TERN_BLAS_VERBOSE=1 sets
 * the initial value. */
TERN_API tern_status tern_blas_set_verbose(tern_verbose_level level);

/* torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp: float16/bfloat16 attention on the
 * MATH kernel keeps its intermediates in the input's precision, as PyTorch's math path does when
 * allowed: the scaled scores Q Kᵀ and the softmax probabilities are rounded to float16 (bfloat16)
 * before the next step; products still accumulate in float32. Off (the default), MATH computes
 * in float32 throughout and rounds only the output. On the CPU this is an accuracy setting, not
 * a speed one (the kernel widens its operands either way); FLASH and float32 attention are not
 * affected, and CUDA's MATH takes float32 only. Flag "sdp.allow_fp16_bf16_reduction_math"
 * (scope run); read when a plan is built. */
TERN_API void tern_sdp_allow_fp16_bf16_reduction_math(int on);
TERN_API int tern_sdp_fp16_bf16_reduction_math_allowed(void);

/* torch.use_deterministic_algorithms: kernels whose outputs are bitwise identical across runs
 * and thread counts (GEMMs on a fixed, shape-only partition; Conv by im2col + GEMM instead of
 * oneDNN, whose partition follows the thread count). Slower. Env
 * TERN_DETERMINISTIC_ALGORITHMS=1 sets the initial value. */
TERN_API tern_status tern_use_deterministic_algorithms(int on);
TERN_API int tern_are_deterministic_algorithms_enabled(void);

/* The generic view of the one flags registry behind every function above. Names are PyTorch's
 * dotted paths without "torch.backends." ("cudnn.benchmark", "num_threads", ...); `tern info
 * --flags` lists them. Values are text: bools "true"/"false" (1/0, on/off accepted), ints in
 * decimal, enums by name (case-insensitive), CPU lists as "0-3,8".
 * tern_flag_info: i < tern_flag_count(); type is "bool" | "int" | "enum" | "cpulist" (a CPU list
 *   like "0-3,8", "none" when empty); strings are static.
 * tern_flag_get: the current global value; TERN_ERR_INVALID_ARGUMENT for an unknown name or
 *   when len is too small (the message gives the size needed).
 * tern_flag_set: checks and sets the global value (takes effect at the next run); an invalid
 *   value gives TERN_ERR_INVALID_ARGUMENT naming the allowed values. */
TERN_API size_t tern_flag_count(void);
TERN_API tern_status tern_flag_info(size_t i, const char** name, const char** type,
                                    const char** doc);
TERN_API tern_status tern_flag_get(const char* name, char* buf, size_t len);
TERN_API tern_status tern_flag_set(const char* name, const char* value);
/* Where the flag's global value came from ("default" | "environment" | "api"), its scope (the
 * narrowest level that may override it: "global" | "session" | "run"), its default as text and
 * its environment variable(s) ("" when none). Any out-pointer may be NULL; strings are static
 * except default_value, which follows the usual rule. */
TERN_API tern_status tern_flag_describe(const char* name, const char** source, const char** scope,
                                        const char** default_value, const char** env_var);
/* The value a run of session s would use now for flag `name`, and where it came from
 * ("default" | "environment" | "api" | "session"). source may be NULL. */
TERN_API tern_status tern_session_flag_get(const tern_session* s, const char* name, char* buf,
                                           size_t len, const char** source);

/* ---- DLPack: tensors shared with other frameworks without a copy ------------------------------
 * DLPack (https://dmlc.github.io/dlpack) is the exchange format of NumPy, PyTorch, JAX, CuPy and
 * others. Its versioned (1.x) structs are declared below exactly as dlpack.h 1.1 spells them, so no
 * external header is needed; they keep DLPack's names, not the tern_ prefix. The block carries
 * dlpack.h's own include guard: a program that includes dlpack.h (1.0 or later) before this header
 * uses its declarations instead, and one that includes it after gets these (dlpack.h is then
 * skipped: include it first to use parts of a newer DLPack). A pre-1.0 dlpack.h, which lacks the
 * versioned struct, included first is an error here. */
#if defined(DLPACK_DLPACK_H_) && !defined(DLPACK_MAJOR_VERSION)
#error "c_api.h needs DLPack 1.0 or later: include a newer dlpack.h, or none"
#endif
#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_

#ifdef __cplusplus
#define DLPACK_EXTERN_C extern "C"
#else
#define DLPACK_EXTERN_C
#endif
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 1
#define DLPACK_DLL

/* A major version changes the struct layouts; a minor one adds enum values. */
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

#ifdef __cplusplus
typedef enum : int32_t {
#else
typedef enum {
#endif
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3, /* pinned host memory */
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17,
  kDLTrn = 18,
} DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id; /* 0 for kDLCPU */
} DLDevice;

typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U,
  kDLBool = 6U,
  kDLFloat8_e3m4 = 7U,
  kDLFloat8_e4m3 = 8U,
  kDLFloat8_e4m3b11fnuz = 9U,
  kDLFloat8_e4m3fn = 10U,
  kDLFloat8_e4m3fnuz = 11U,
  kDLFloat8_e5m2 = 12U,
  kDLFloat8_e5m2fnuz = 13U,
  kDLFloat8_e8m0fnu = 14U,
  kDLFloat6_e2m3fn = 15U,
  kDLFloat6_e3m2fn = 16U,
  kDLFloat4_e2m1fn = 17U,
} DLDataTypeCode;

/* code: a DLDataTypeCode; bits per lane; lanes: 1 for a scalar type. */
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

/* data + byte_offset is the first element. strides count elements, not bytes; NULL strides mean
 * a dense row-major (C-contiguous) tensor. */
typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;

/* The unversioned (pre-1.0) managed tensor; Tern's functions take the versioned one below. */
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

/* The tensor must not be written through. */
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
/* The producer made a copy that the consumer owns alone. */
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
/* A sub-byte type (fp4, fp6) is padded to a byte per element rather than packed. */
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)

/* The versioned managed tensor: the one DLPack 1.x exchanges. Whoever receives it calls
 * deleter(self) once when done (deleter may be NULL); the deleter frees self as well. */
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};

#endif /* DLPACK_DLPACK_H_ */

/* Makes a tensor over a DLPack tensor's memory without copying it, and takes ownership of src:
 * src->deleter(src) (when not NULL) is called exactly once, when the tensor and every run still
 * using it are done; the caller must not use or delete src after a success. On failure nothing
 * changes: src stays the caller's and its deleter is not called.
 * Accepted: version.major 1 (any minor); memory the CPU reads in place (kDLCPU, kDLCUDAHost);
 * Tern's dtypes with one lane: int and uint of 8/16/32/64 bits, float of 16/32/64 bits, bfloat16,
 * and bool of 8 bits; strides that describe a dense row-major layout (NULL, or the C-contiguous
 * strides; dims of size 1 may have any stride, and an empty tensor any strides); data + byte_offset
 * aligned to the element size.
 * The DLPACK_FLAG_BITMASK_READ_ONLY flag is kept: tern_tensor_is_read_only answers 1,
 * tern_tensor_copy refuses the tensor as a destination, and tern_tensor_to_dlpack passes the flag
 * on. (Sessions only read their inputs, so a read-only tensor may be a run's input.)
 * Returns TERN_ERR_INVALID_ARGUMENT for a NULL src or out, ndim < 0 or > 64, a NULL shape with
 * ndim > 0, a negative dim, a size that overflows, or NULL data for a non-empty tensor;
 * TERN_ERR_UNSUPPORTED, saying why, for another major version, another device, a dtype Tern lacks
 * (lanes other than 1 included), strides Tern cannot represent (a transposed or sliced view: copy
 * it into a contiguous tensor first) or misaligned data. */
TERN_API tern_status tern_tensor_from_dlpack(struct DLManagedTensorVersioned* src,
                                             tern_tensor** out);
/* Exports t as a DLPack 1.1 managed tensor without copying: *out shares t's memory and keeps it
 * alive until (*out)->deleter(*out) is called, which the receiver must do exactly once; t may be
 * destroyed before or after. The struct is allocated by Tern and freed by that deleter. shape and
 * strides (C-contiguous, in elements) are always set; byte_offset is 0; flags has
 * DLPACK_FLAG_BITMASK_READ_ONLY when t is read-only. Host tensors give kDLCPU, CUDA device
 * tensors kDLCUDA with their device index.
 * Returns TERN_ERR_INVALID_ARGUMENT for a NULL t or out; TERN_ERR_UNSUPPORTED for string tensors
 * and tensors on a device DLPack cannot name for Tern (Vulkan buffers are not addresses). */
TERN_API tern_status tern_tensor_to_dlpack(const tern_tensor* t,
                                           struct DLManagedTensorVersioned** out);
/* 1 when t came from a DLPack tensor flagged DLPACK_FLAG_BITMASK_READ_ONLY, else 0 (also for
 * NULL). */
TERN_API int tern_tensor_is_read_only(const tern_tensor* t);

#ifdef __cplusplus
}
#endif

#endif /* TERN_C_API_H */
