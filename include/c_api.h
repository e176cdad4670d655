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
 *   objects and tensors are not synchronised (use one per thread or lock).
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
  TERN_ERR_IO,      /* a file could not be opened, read, mapped or written */
  TERN_ERR_INTERNAL /* a bug in Tern: please report it with tern_last_error() */
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
  TERN_BFLOAT16 = 16
} tern_dtype;

/* The library version, "MAJOR.MINOR.PATCH". Static string. */
TERN_API const char* tern_version(void);
/* The ABI version: incremented whenever a function signature, enum value or documented
 * ownership rule of this header changes incompatibly. A binding built against ABI N may refuse
 * to run on a library reporting another value. */
TERN_API uint32_t tern_abi_version(void);
/* The highest .tern format version this library reads and the one it writes. */
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
 * be NULL. TERN_ERR_INVALID_ARGUMENT for a NULL model or i out of range. */
TERN_API tern_status tern_model_input_info(const tern_model* m, size_t i, tern_dtype* dtype,
                                           size_t* rank, const int64_t** shape);
TERN_API tern_status tern_model_output_info(const tern_model* m, size_t i, tern_dtype* dtype,
                                            size_t* rank, const int64_t** shape);

/* ---- Sessions -------------------------------------------------------------------------------- */

typedef struct tern_session tern_session;
typedef struct tern_session_options tern_session_options;
typedef struct tern_run_options tern_run_options;

TERN_API tern_status tern_session_options_create(tern_session_options** out);
TERN_API void tern_session_options_destroy(tern_session_options* o);
/* Ordered backend preference, comma-separated ("cuda,cpu"). Nodes a backend cannot run fall back
 * to the next one. "cpu" is appended when absent, so every op Tern knows can run.
 * TERN_ERR_INVALID_ARGUMENT names an unknown backend. A known backend that is not built or has
 * no device is reported by tern_session_create with TERN_ERR_BACKEND_UNAVAILABLE. */
TERN_API tern_status tern_session_options_set_backends(tern_session_options* o, const char* list);
/* Intra-op threads for this session's runs; 0 means the process default. n < 0 is invalid. */
TERN_API tern_status tern_session_options_set_num_threads(tern_session_options* o, int n);
/* Inter-op threads for this session's runs; 0 means the process default. n < 0 is invalid.
 * The value is validated and kept, but this version runs a graph's nodes in order on the calling
 * thread (intra-op threads parallelise inside each node), so it has no effect yet. */
TERN_API tern_status tern_session_options_set_num_interop_threads(tern_session_options* o, int n);
/* Sets a session option by name. Known names: "num_threads", "num_interop_threads" (integers).
 * Unknown names give TERN_ERR_INVALID_ARGUMENT. */
TERN_API tern_status tern_session_options_set_flag(tern_session_options* o, const char* name,
                                                   const char* value);

TERN_API tern_status tern_run_options_create(tern_run_options** out);
TERN_API void tern_run_options_destroy(tern_run_options* r);

/* Compiles the model for the options' backends (NULL options: defaults, "cpu"). The session keeps
 * what it needs of the model, so the model may be destroyed first. When every input shape is
 * static the execution plan is built here, so shape errors surface now rather than in the first
 * run. Returns TERN_ERR_UNSUPPORTED naming the node and op type that no backend implements. */
TERN_API tern_status tern_session_create(const tern_model* m, const tern_session_options* o,
                                         tern_session** out);
/* Runs the model. input_names[i] names inputs[i] (every model input must be given, once); the
 * inputs are borrowed for the call only. output_names lists the outputs wanted; outputs[j]
 * receives a new tensor the caller destroys. On failure no output is written.
 * TERN_ERR_INVALID_ARGUMENT: NULL pointers, unknown/missing/duplicate names, wrong dtype, rank or
 * dims (the message names the input and the expected and given values). Errors inside a kernel
 * name the node, its op type and the tensor. Safe to call from many threads at once. */
TERN_API tern_status tern_session_run(tern_session* s, const tern_run_options* r,
                                      const char* const* input_names,
                                      const tern_tensor* const* inputs, size_t n_inputs,
                                      const char* const* output_names, size_t n_outputs,
                                      tern_tensor** outputs);
/* Destroys a session (NULL is ignored). No run may be in flight on it. */
TERN_API void tern_session_destroy(tern_session* s);

/* ---- Build and machine queries --------------------------------------------------------------- */

/* The build configuration (version, compiler, optional libraries and their versions, backends
 * built and available), as text. Static string. */
TERN_API const char* tern_config_show(void);
/* The CPU's vector capability as detected at run time: "DEFAULT" | "NO AVX" | "AVX2" |
 * "AVX512" | "VSX" | "Z VECTOR" | "SVE256". Static string. */
TERN_API const char* tern_cpu_get_capability(void);
/* 1 when the optional library was built in and can be used, else 0. */
TERN_API int tern_onednn_is_available(void);
TERN_API int tern_openblas_is_available(void);
TERN_API int tern_openmp_is_available(void);
/* Backends: built into this library, and usable on this machine (a device is present). */
TERN_API int tern_cuda_is_built(void);
TERN_API int tern_cuda_is_available(void);
TERN_API int tern_cuda_device_count(void);
TERN_API int tern_vulkan_is_built(void);
TERN_API int tern_vulkan_is_available(void);
TERN_API int tern_mps_is_built(void);
TERN_API int tern_mps_is_available(void);

#ifdef __cplusplus
}
#endif

#endif /* TERN_C_API_H */
