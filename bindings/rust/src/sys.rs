//! Raw declarations of the C API in `include/c_api.h` (ABI version [`ABI_VERSION`]). Every
//! function here is `unsafe`; the safe API of this crate wraps them. Enums are plain `c_int`
//! values: the library may return values this crate does not know.
#![allow(non_camel_case_types, non_upper_case_globals)]

use std::os::raw::{c_char, c_int, c_void};

/// The `TERN_ABI_VERSION` these declarations were written for.
pub const ABI_VERSION: u32 = 1;

pub type tern_status = c_int;
pub type tern_dtype = c_int;
pub type tern_sdp_backend = c_int;
pub type tern_blas_library = c_int;
pub type tern_linalg_library = c_int;
pub type tern_verbose_level = c_int;

pub const TERN_OK: tern_status = 0;
pub const TERN_ERR_INVALID_ARGUMENT: tern_status = 1;
pub const TERN_ERR_INVALID_MODEL: tern_status = 2;
pub const TERN_ERR_UNSUPPORTED: tern_status = 3;
pub const TERN_ERR_BACKEND_UNAVAILABLE: tern_status = 4;
pub const TERN_ERR_OUT_OF_MEMORY: tern_status = 5;
pub const TERN_ERR_IO: tern_status = 6;
pub const TERN_ERR_INTERNAL: tern_status = 7;
pub const TERN_ERR_CANCELLED: tern_status = 8;
pub const TERN_ERR_DEADLINE_EXCEEDED: tern_status = 9;

#[repr(C)]
pub struct tern_tensor {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct tern_model {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct tern_session {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct tern_session_options {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct tern_run_options {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct tern_value {
    _opaque: [u8; 0],
}

pub type tern_value_kind = c_int;
pub const TERN_VALUE_TENSOR: tern_value_kind = 0;
pub const TERN_VALUE_SEQUENCE: tern_value_kind = 1;
pub const TERN_VALUE_OPTIONAL: tern_value_kind = 2;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct tern_sdp_params {
    pub struct_size: usize,
    pub batch: i64,
    pub num_heads: i64,
    pub seq_len_q: i64,
    pub seq_len_kv: i64,
    pub head_dim: i64,
    pub dtype: tern_dtype,
    pub is_causal: c_int,
    pub has_mask: c_int,
    pub dropout_p: f32,
}

/// Progress of a session's preparation (`tern_session_options_set_progress`): stage, done, total,
/// ctx. The session keeps calling it (runs that build plans) as long as it lives, so ctx must
/// outlive every session made with the options.
pub type tern_progress_fn = Option<unsafe extern "C" fn(stage: *const c_char, done: usize, total: usize, ctx: *mut c_void)>;

extern "C" {
    pub fn tern_version() -> *const c_char;
    pub fn tern_abi_version() -> u32;
    pub fn tern_format_version() -> u32;
    pub fn tern_status_name(s: tern_status) -> *const c_char;
    pub fn tern_last_error() -> *const c_char;
    pub fn tern_tensor_create(dtype: tern_dtype, shape: *const i64, rank: usize, out: *mut *mut tern_tensor) -> tern_status;
    pub fn tern_tensor_create_from_data(dtype: tern_dtype, shape: *const i64, rank: usize, data: *mut c_void, byte_size: usize, deleter: Option<unsafe extern "C" fn(*mut c_void, *mut c_void)>, ctx: *mut c_void, out: *mut *mut tern_tensor) -> tern_status;
    pub fn tern_tensor_destroy(t: *mut tern_tensor);
    pub fn tern_tensor_dtype(t: *const tern_tensor) -> tern_dtype;
    pub fn tern_tensor_rank(t: *const tern_tensor) -> usize;
    pub fn tern_tensor_shape(t: *const tern_tensor) -> *const i64;
    pub fn tern_tensor_data(t: *mut tern_tensor) -> *mut c_void;
    pub fn tern_tensor_byte_size(t: *const tern_tensor) -> usize;
    pub fn tern_model_load_file(path: *const c_char, out: *mut *mut tern_model) -> tern_status;
    pub fn tern_model_load_memory(data: *const c_void, size: usize, out: *mut *mut tern_model) -> tern_status;
    pub fn tern_model_save(m: *const tern_model, path: *const c_char) -> tern_status;
    pub fn tern_model_destroy(m: *mut tern_model);
    pub fn tern_model_input_count(m: *const tern_model) -> usize;
    pub fn tern_model_input_name(m: *const tern_model, i: usize) -> *const c_char;
    pub fn tern_model_output_count(m: *const tern_model) -> usize;
    pub fn tern_model_output_name(m: *const tern_model, i: usize) -> *const c_char;
    pub fn tern_model_input_info(m: *const tern_model, i: usize, dtype: *mut tern_dtype, rank: *mut usize, shape: *mut *const i64) -> tern_status;
    pub fn tern_model_output_info(m: *const tern_model, i: usize, dtype: *mut tern_dtype, rank: *mut usize, shape: *mut *const i64) -> tern_status;
    pub fn tern_session_options_create(out: *mut *mut tern_session_options) -> tern_status;
    pub fn tern_session_options_destroy(o: *mut tern_session_options);
    pub fn tern_session_options_set_backends(o: *mut tern_session_options, list: *const c_char) -> tern_status;
    pub fn tern_session_options_set_num_threads(o: *mut tern_session_options, n: c_int) -> tern_status;
    pub fn tern_session_options_set_num_interop_threads(o: *mut tern_session_options, n: c_int) -> tern_status;
    pub fn tern_session_options_set_max_memory_bytes(o: *mut tern_session_options, bytes: u64) -> tern_status;
    pub fn tern_session_options_set_flag(o: *mut tern_session_options, name: *const c_char, value: *const c_char) -> tern_status;
    pub fn tern_run_options_create(out: *mut *mut tern_run_options) -> tern_status;
    pub fn tern_run_options_destroy(r: *mut tern_run_options);
    pub fn tern_run_options_set_flag(r: *mut tern_run_options, name: *const c_char, value: *const c_char) -> tern_status;
    pub fn tern_run_options_set_sdp_backends(r: *mut tern_run_options, list: *const tern_sdp_backend, n: usize) -> tern_status;
    pub fn tern_run_options_set_deadline_ms(r: *mut tern_run_options, ms: i64) -> tern_status;
    pub fn tern_run_options_cancel(r: *mut tern_run_options) -> tern_status;
    pub fn tern_run_options_clear_cancel(r: *mut tern_run_options) -> tern_status;
    pub fn tern_session_create(m: *const tern_model, o: *const tern_session_options, out: *mut *mut tern_session) -> tern_status;
    pub fn tern_session_run(s: *mut tern_session, r: *const tern_run_options, input_names: *const *const c_char, inputs: *const *const tern_tensor, n_inputs: usize, output_names: *const *const c_char, n_outputs: usize, outputs: *mut *mut tern_tensor) -> tern_status;
    pub fn tern_session_save_optimized(s: *const tern_session, path: *const c_char, packed_count: *mut usize) -> tern_status;
    pub fn tern_session_destroy(s: *mut tern_session);
    pub fn tern_session_options_enable_profiling(o: *mut tern_session_options, path: *const c_char) -> tern_status;
    pub fn tern_session_end_profiling(s: *mut tern_session) -> tern_status;
    pub fn tern_session_memory_info(s: *const tern_session, activation_bytes: *mut usize, packed_weight_bytes: *mut usize) -> tern_status;
    pub fn tern_set_num_threads(n: c_int) -> tern_status;
    pub fn tern_get_num_threads() -> c_int;
    pub fn tern_set_num_interop_threads(n: c_int) -> tern_status;
    pub fn tern_get_num_interop_threads() -> c_int;
    pub fn tern_parallel_info() -> *const c_char;
    pub fn tern_config_show() -> *const c_char;
    pub fn tern_cpu_get_capability() -> *const c_char;
    pub fn tern_onednn_is_available() -> c_int;
    pub fn tern_openblas_is_available() -> c_int;
    pub fn tern_openmp_is_available() -> c_int;
    pub fn tern_cuda_is_built() -> c_int;
    pub fn tern_cuda_is_available() -> c_int;
    pub fn tern_cuda_device_count() -> c_int;
    pub fn tern_vulkan_is_built() -> c_int;
    pub fn tern_vulkan_is_available() -> c_int;
    pub fn tern_mps_is_built() -> c_int;
    pub fn tern_mps_is_available() -> c_int;
    pub fn tern_cuda_matmul_get_allow_tf32() -> c_int;
    pub fn tern_cuda_matmul_set_allow_tf32(on: c_int);
    pub fn tern_cuda_matmul_get_allow_fp16_reduced_precision_reduction() -> c_int;
    pub fn tern_cuda_matmul_set_allow_fp16_reduced_precision_reduction(on: c_int);
    pub fn tern_cuda_matmul_get_allow_bf16_reduced_precision_reduction() -> c_int;
    pub fn tern_cuda_matmul_set_allow_bf16_reduced_precision_reduction(on: c_int);
    pub fn tern_cuda_get_preferred_blas_library() -> tern_blas_library;
    pub fn tern_cuda_set_preferred_blas_library(lib: tern_blas_library) -> tern_status;
    pub fn tern_cuda_get_preferred_linalg_library() -> tern_linalg_library;
    pub fn tern_cuda_set_preferred_linalg_library(lib: tern_linalg_library) -> tern_status;
    pub fn tern_sdp_enabled(b: tern_sdp_backend) -> c_int;
    pub fn tern_sdp_enable(b: tern_sdp_backend, on: c_int) -> tern_status;
    pub fn tern_sdp_can_use(b: tern_sdp_backend, p: *const tern_sdp_params, why: *mut c_char, why_len: usize) -> c_int;
    pub fn tern_cudnn_is_available() -> c_int;
    pub fn tern_cudnn_version() -> i64;
    pub fn tern_cudnn_get_enabled() -> c_int;
    pub fn tern_cudnn_set_enabled(on: c_int);
    pub fn tern_cudnn_get_allow_tf32() -> c_int;
    pub fn tern_cudnn_set_allow_tf32(on: c_int);
    pub fn tern_cudnn_get_deterministic() -> c_int;
    pub fn tern_cudnn_set_deterministic(on: c_int);
    pub fn tern_cudnn_get_benchmark() -> c_int;
    pub fn tern_cudnn_set_benchmark(on: c_int);
    pub fn tern_cudnn_get_benchmark_limit() -> c_int;
    pub fn tern_cudnn_set_benchmark_limit(limit: c_int) -> tern_status;
    pub fn tern_mha_get_fastpath_enabled() -> c_int;
    pub fn tern_mha_set_fastpath_enabled(on: c_int);
    pub fn tern_onednn_set_verbose(level: tern_verbose_level) -> tern_status;
    pub fn tern_opt_einsum_get_enabled() -> c_int;
    pub fn tern_opt_einsum_set_enabled(on: c_int);
    pub fn tern_opt_einsum_get_strategy() -> *const c_char;
    pub fn tern_opt_einsum_set_strategy(s: *const c_char) -> tern_status;
    pub fn tern_use_deterministic_algorithms(on: c_int) -> tern_status;
    pub fn tern_are_deterministic_algorithms_enabled() -> c_int;
    pub fn tern_flag_count() -> usize;
    pub fn tern_flag_info(i: usize, name: *mut *const c_char, type_: *mut *const c_char, doc: *mut *const c_char) -> tern_status;
    pub fn tern_flag_get(name: *const c_char, buf: *mut c_char, len: usize) -> tern_status;
    pub fn tern_flag_set(name: *const c_char, value: *const c_char) -> tern_status;
    pub fn tern_flag_describe(name: *const c_char, source: *mut *const c_char, scope: *mut *const c_char, default_value: *mut *const c_char, env_var: *mut *const c_char) -> tern_status;
    pub fn tern_model_input_kind(m: *const tern_model, i: usize, kind: *mut tern_value_kind, elem: *mut tern_dtype, holds_sequence: *mut c_int) -> tern_status;
    pub fn tern_model_output_kind(m: *const tern_model, i: usize, kind: *mut tern_value_kind, elem: *mut tern_dtype, holds_sequence: *mut c_int) -> tern_status;
    pub fn tern_value_from_tensor(t: *const tern_tensor, out: *mut *mut tern_value) -> tern_status;
    pub fn tern_value_create_sequence(elem: tern_dtype, items: *const *const tern_tensor, n: usize, out: *mut *mut tern_value) -> tern_status;
    pub fn tern_value_create_optional(v: *const tern_value, out: *mut *mut tern_value) -> tern_status;
    pub fn tern_value_destroy(v: *mut tern_value);
    pub fn tern_value_get_kind(v: *const tern_value, kind: *mut tern_value_kind) -> tern_status;
    pub fn tern_value_get_tensor(v: *const tern_value, out: *mut *mut tern_tensor) -> tern_status;
    pub fn tern_value_sequence_length(v: *const tern_value) -> usize;
    pub fn tern_value_sequence_dtype(v: *const tern_value) -> tern_dtype;
    pub fn tern_value_sequence_at(v: *const tern_value, i: usize, out: *mut *mut tern_tensor) -> tern_status;
    pub fn tern_value_optional_has_value(v: *const tern_value) -> c_int;
    pub fn tern_value_optional_get(v: *const tern_value, out: *mut *mut tern_value) -> tern_status;
    pub fn tern_session_run_values(s: *mut tern_session, r: *const tern_run_options, input_names: *const *const c_char, inputs: *const *const tern_value, n_inputs: usize, output_names: *const *const c_char, n_outputs: usize, outputs: *mut *mut tern_value) -> tern_status;
    pub fn tern_session_flag_get(s: *const tern_session, name: *const c_char, buf: *mut c_char, len: usize, source: *mut *const c_char) -> tern_status;
    pub fn tern_tensor_create_on_device(dtype: tern_dtype, shape: *const i64, rank: usize, device: *const c_char, out: *mut *mut tern_tensor) -> tern_status;
    pub fn tern_tensor_device(t: *const tern_tensor) -> *const c_char;
    pub fn tern_tensor_copy(src: *const tern_tensor, dst: *mut tern_tensor) -> tern_status;
    pub fn tern_tensor_read_onnx_file(path: *const c_char, out: *mut *mut tern_tensor) -> tern_status;
    pub fn tern_model_optional_input_count(m: *const tern_model) -> usize;
    pub fn tern_model_optional_input_name(m: *const tern_model, i: usize) -> *const c_char;
    pub fn tern_model_optional_input_info(m: *const tern_model, i: usize, dtype: *mut tern_dtype, rank: *mut usize, shape: *mut *const i64) -> tern_status;
    pub fn tern_model_node_count(m: *const tern_model) -> usize;
    pub fn tern_model_node_info(m: *const tern_model, i: usize, name: *mut *const c_char, op_type: *mut *const c_char, domain: *mut *const c_char, n_inputs: *mut usize, n_outputs: *mut usize) -> tern_status;
    pub fn tern_model_node_input(m: *const tern_model, i: usize, j: usize) -> *const c_char;
    pub fn tern_model_node_output(m: *const tern_model, i: usize, j: usize) -> *const c_char;
    pub fn tern_model_value_count(m: *const tern_model) -> usize;
    pub fn tern_model_value_info(m: *const tern_model, i: usize, name: *mut *const c_char, dtype: *mut tern_dtype, has_shape: *mut c_int, rank: *mut usize, shape: *mut *const i64, is_constant: *mut c_int) -> tern_status;
    pub fn tern_model_producer(m: *const tern_model) -> *const c_char;
    pub fn tern_model_opset(m: *const tern_model) -> i64;
    pub fn tern_session_options_set_cpu_fallback(o: *mut tern_session_options, enabled: c_int) -> tern_status;
    pub fn tern_session_options_set_progress(o: *mut tern_session_options, f: tern_progress_fn, ctx: *mut c_void) -> tern_status;
    pub fn tern_session_options_set_plan_cache_bytes(o: *mut tern_session_options, bytes: u64) -> tern_status;
    pub fn tern_run_options_set_output_device(r: *mut tern_run_options, device: *const c_char) -> tern_status;
    pub fn tern_session_memory_stat(s: *const tern_session, name: *const c_char, value: *mut u64) -> tern_status;
    pub fn tern_session_value_shape(s: *const tern_session, name: *const c_char, dtype: *mut tern_dtype, rank: *mut usize, shape: *mut *const i64) -> tern_status;
    pub fn tern_opt_einsum_is_available() -> c_int;
    pub fn tern_mkl_is_available() -> c_int;
    pub fn tern_nnpack_is_available() -> c_int;
    pub fn tern_cusparselt_is_available() -> c_int;
    pub fn tern_is_flash_attention_available() -> c_int;
    pub fn tern_backend_unavailable_reason(name: *const c_char) -> *const c_char;
    pub fn tern_blas_set_verbose(level: tern_verbose_level) -> tern_status;
    pub fn tern_sdp_allow_fp16_bf16_reduction_math(on: c_int);
    pub fn tern_sdp_fp16_bf16_reduction_math_allowed() -> c_int;
}

// DLPack 1.x, as include/c_api.h declares it (dlpack.h's names).
pub type DLDeviceType = i32;
pub const kDLCPU: DLDeviceType = 1;
pub const kDLCUDA: DLDeviceType = 2;
pub const kDLCUDAHost: DLDeviceType = 3;
pub const kDLInt: u8 = 0;
pub const kDLUInt: u8 = 1;
pub const kDLFloat: u8 = 2;
pub const kDLBfloat: u8 = 4;
pub const kDLBool: u8 = 6;
pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1;
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 2;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct DLPackVersion {
    pub major: u32,
    pub minor: u32,
}
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DLDevice {
    pub device_type: DLDeviceType,
    pub device_id: i32,
}
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DLDataType {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}
#[repr(C)]
#[derive(Debug)]
pub struct DLTensor {
    pub data: *mut c_void,
    pub device: DLDevice,
    pub ndim: i32,
    pub dtype: DLDataType,
    pub shape: *mut i64,
    pub strides: *mut i64,
    pub byte_offset: u64,
}
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    pub version: DLPackVersion,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    pub flags: u64,
    pub dl_tensor: DLTensor,
}

extern "C" {
    pub fn tern_tensor_from_dlpack(src: *mut DLManagedTensorVersioned, out: *mut *mut tern_tensor) -> tern_status;
    pub fn tern_tensor_to_dlpack(t: *const tern_tensor, out: *mut *mut DLManagedTensorVersioned) -> tern_status;
    pub fn tern_tensor_is_read_only(t: *const tern_tensor) -> c_int;
}
