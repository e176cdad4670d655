package tern;

import com.sun.jna.Callback;
import com.sun.jna.IntegerType;
import com.sun.jna.Library;
import com.sun.jna.Native;
import com.sun.jna.Pointer;
import com.sun.jna.Structure;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.LongByReference;
import com.sun.jna.ptr.PointerByReference;

/** The C API of include/c_api.h as JNA sees it: every function of cmake/tern.symbols
 * (check-symbols.sh keeps it so). Handles are opaque {@link Pointer}s; enums are ints; uint32_t
 * and uint64_t are int and long. Not for direct use: see {@link Tern}, {@link Model},
 * {@link Session}. */
public interface TernLibrary extends Library {
  /** The TERN_ABI_VERSION this interface was written for. */
  int ABI_VERSION = 1;

  /** size_t. */
  final class SizeT extends IntegerType {
    private static final long serialVersionUID = 1L;

    public SizeT() {
      this(0);
    }

    public SizeT(long value) {
      super(Native.SIZE_T_SIZE, value, true);
    }
  }

  String tern_version();
  int tern_abi_version();
  String tern_status_name(int status);
  String tern_last_error();

  int tern_tensor_create(int dtype, long[] shape, SizeT rank, PointerByReference out);
  void tern_tensor_destroy(Pointer t);
  int tern_tensor_dtype(Pointer t);
  SizeT tern_tensor_rank(Pointer t);
  Pointer tern_tensor_shape(Pointer t);
  Pointer tern_tensor_data(Pointer t);
  SizeT tern_tensor_byte_size(Pointer t);
  // DLPack (struct DLManagedTensorVersioned*, see Tensor.toDLPack).
  int tern_tensor_from_dlpack(Pointer src, PointerByReference out);
  int tern_tensor_to_dlpack(Pointer t, PointerByReference out);
  int tern_tensor_is_read_only(Pointer t);

  int tern_model_load_file(String path, PointerByReference out);
  int tern_model_load_memory(byte[] data, SizeT size, PointerByReference out);
  int tern_model_save(Pointer m, String path);
  void tern_model_destroy(Pointer m);
  SizeT tern_model_input_count(Pointer m);
  String tern_model_input_name(Pointer m, SizeT i);
  SizeT tern_model_output_count(Pointer m);
  String tern_model_output_name(Pointer m, SizeT i);
  int tern_model_input_info(Pointer m, SizeT i, IntByReference dtype, SizeTByReference rank,
      PointerByReference shape);
  int tern_model_output_info(Pointer m, SizeT i, IntByReference dtype, SizeTByReference rank,
      PointerByReference shape);

  int tern_session_options_create(PointerByReference out);
  void tern_session_options_destroy(Pointer o);
  int tern_session_options_set_backends(Pointer o, String list);
  int tern_session_options_set_num_threads(Pointer o, int n);
  int tern_session_options_set_num_interop_threads(Pointer o, int n);
  int tern_session_options_set_max_memory_bytes(Pointer o, long bytes);
  int tern_session_options_set_flag(Pointer o, String name, String value);
  int tern_run_options_create(PointerByReference out);
  void tern_run_options_destroy(Pointer r);
  int tern_run_options_set_deadline_ms(Pointer r, long ms);
  int tern_run_options_cancel(Pointer r);
  int tern_run_options_clear_cancel(Pointer r);
  int tern_session_create(Pointer m, Pointer options, PointerByReference out);
  int tern_session_run(Pointer s, Pointer runOptions, String[] inputNames, Pointer[] inputs,
      SizeT nInputs, String[] outputNames, SizeT nOutputs, Pointer[] outputs);
  void tern_session_destroy(Pointer s);

  int tern_model_input_kind(Pointer m, SizeT i, IntByReference kind, IntByReference elem,
      IntByReference holdsSequence);
  int tern_model_output_kind(Pointer m, SizeT i, IntByReference kind, IntByReference elem,
      IntByReference holdsSequence);
  int tern_value_from_tensor(Pointer t, PointerByReference out);
  int tern_value_create_sequence(int elem, Pointer[] items, SizeT n, PointerByReference out);
  int tern_value_create_optional(Pointer v, PointerByReference out);
  void tern_value_destroy(Pointer v);
  int tern_value_get_kind(Pointer v, IntByReference kind);
  int tern_value_get_tensor(Pointer v, PointerByReference out);
  SizeT tern_value_sequence_length(Pointer v);
  int tern_value_sequence_dtype(Pointer v);
  int tern_value_sequence_at(Pointer v, SizeT i, PointerByReference out);
  int tern_value_optional_has_value(Pointer v);
  int tern_value_optional_get(Pointer v, PointerByReference out);
  int tern_session_run_values(Pointer s, Pointer runOptions, String[] inputNames,
      Pointer[] inputs, SizeT nInputs, String[] outputNames, SizeT nOutputs, Pointer[] outputs);

  int tern_set_num_threads(int n);
  int tern_get_num_threads();
  int tern_set_num_interop_threads(int n);
  int tern_get_num_interop_threads();
  String tern_config_show();
  String tern_cpu_get_capability();
  int tern_onednn_is_available();
  int tern_openblas_is_available();
  int tern_openmp_is_available();
  int tern_cuda_is_built();
  int tern_cuda_is_available();
  int tern_cuda_device_count();
  int tern_vulkan_is_built();
  int tern_vulkan_is_available();
  int tern_cuda_matmul_get_allow_tf32();
  void tern_cuda_matmul_set_allow_tf32(int on);
  int tern_cudnn_get_enabled();
  void tern_cudnn_set_enabled(int on);
  int tern_cudnn_get_benchmark();
  void tern_cudnn_set_benchmark(int on);
  int tern_cudnn_get_deterministic();
  void tern_cudnn_set_deterministic(int on);
  int tern_mha_get_fastpath_enabled();
  void tern_mha_set_fastpath_enabled(int on);
  int tern_use_deterministic_algorithms(int on);
  int tern_are_deterministic_algorithms_enabled();

  SizeT tern_flag_count();
  int tern_flag_info(SizeT i, PointerByReference name, PointerByReference type,
      PointerByReference doc);
  int tern_flag_get(String name, byte[] buf, SizeT len);
  int tern_flag_set(String name, String value);

  // ---- Added for completeness (issue 29): the rest of the header. ----

  int tern_format_version();
  String tern_parallel_info();

  /** The deleter of tern_tensor_create_from_data. */
  interface Deleter extends Callback {
    void invoke(Pointer data, Pointer ctx);
  }

  int tern_tensor_create_from_data(int dtype, long[] shape, SizeT rank, Pointer data,
      SizeT byteSize, Deleter deleter, Pointer ctx, PointerByReference out);
  int tern_tensor_create_on_device(int dtype, long[] shape, SizeT rank, String device,
      PointerByReference out);
  String tern_tensor_device(Pointer t);
  int tern_tensor_copy(Pointer src, Pointer dst);
  int tern_tensor_read_onnx_file(String path, PointerByReference out);

  SizeT tern_model_optional_input_count(Pointer m);
  String tern_model_optional_input_name(Pointer m, SizeT i);
  int tern_model_optional_input_info(Pointer m, SizeT i, IntByReference dtype,
      SizeTByReference rank, PointerByReference shape);
  SizeT tern_model_node_count(Pointer m);
  int tern_model_node_info(Pointer m, SizeT i, PointerByReference name, PointerByReference opType,
      PointerByReference domain, SizeTByReference nInputs, SizeTByReference nOutputs);
  String tern_model_node_input(Pointer m, SizeT i, SizeT j);
  String tern_model_node_output(Pointer m, SizeT i, SizeT j);
  SizeT tern_model_value_count(Pointer m);
  int tern_model_value_info(Pointer m, SizeT i, PointerByReference name, IntByReference dtype,
      IntByReference hasShape, SizeTByReference rank, PointerByReference shape,
      IntByReference isConstant);
  String tern_model_producer(Pointer m);
  long tern_model_opset(Pointer m);

  int tern_session_options_set_cpu_fallback(Pointer o, int enabled);
  int tern_session_options_set_plan_cache_bytes(Pointer o, long bytes);
  /** tern_progress_fn: a session's preparation progress (stage, done, total, ctx). */
  interface Progress extends Callback {
    void invoke(String stage, SizeT done, SizeT total, Pointer ctx);
  }

  /** Declared for completeness; no wrapper yet: sessions call fn for as long as they live, so a
   * wrapper must keep the callback object reachable until every such session is closed. */
  int tern_session_options_set_progress(Pointer o, Progress fn, Pointer ctx);
  int tern_session_options_enable_profiling(Pointer o, String path);
  int tern_run_options_set_flag(Pointer r, String name, String value);
  int tern_run_options_set_sdp_backends(Pointer r, int[] list, SizeT n);
  int tern_run_options_set_output_device(Pointer r, String device);
  int tern_session_save_optimized(Pointer s, String path, SizeTByReference packedCount);
  int tern_session_end_profiling(Pointer s);
  int tern_session_memory_info(Pointer s, SizeTByReference activationBytes,
      SizeTByReference packedWeightBytes);
  int tern_session_memory_stat(Pointer s, String name, LongByReference value);
  int tern_session_value_shape(Pointer s, String name, IntByReference dtype,
      SizeTByReference rank, PointerByReference shape);
  int tern_session_flag_get(Pointer s, String name, byte[] buf, SizeT len,
      PointerByReference source);
  int tern_flag_describe(String name, PointerByReference source, PointerByReference scope,
      PointerByReference defaultValue, PointerByReference envVar);

  int tern_mps_is_built();
  int tern_mps_is_available();
  int tern_cuda_matmul_get_allow_fp16_reduced_precision_reduction();
  void tern_cuda_matmul_set_allow_fp16_reduced_precision_reduction(int on);
  int tern_cuda_matmul_get_allow_bf16_reduced_precision_reduction();
  void tern_cuda_matmul_set_allow_bf16_reduced_precision_reduction(int on);
  int tern_cuda_get_preferred_blas_library();
  int tern_cuda_set_preferred_blas_library(int lib);
  int tern_cuda_get_preferred_linalg_library();
  int tern_cuda_set_preferred_linalg_library(int lib);
  int tern_cudnn_is_available();
  long tern_cudnn_version();
  int tern_cudnn_get_allow_tf32();
  void tern_cudnn_set_allow_tf32(int on);
  int tern_cudnn_get_benchmark_limit();
  int tern_cudnn_set_benchmark_limit(int limit);

  int tern_sdp_enabled(int backend);
  int tern_sdp_enable(int backend, int on);
  int tern_sdp_can_use(int backend, SdpParams params, byte[] why, SizeT whyLen);
  void tern_sdp_allow_fp16_bf16_reduction_math(int on);
  int tern_sdp_fp16_bf16_reduction_math_allowed();
  int tern_is_flash_attention_available();

  int tern_onednn_set_verbose(int level);
  int tern_blas_set_verbose(int level);
  int tern_opt_einsum_is_available();
  int tern_opt_einsum_get_enabled();
  void tern_opt_einsum_set_enabled(int on);
  String tern_opt_einsum_get_strategy();
  int tern_opt_einsum_set_strategy(String strategy);
  int tern_mkl_is_available();
  int tern_nnpack_is_available();
  int tern_cusparselt_is_available();
  String tern_backend_unavailable_reason(String name);

  /** tern_sdp_params (struct_size set to this layout's size). */
  @Structure.FieldOrder({"struct_size", "batch", "num_heads", "seq_len_q", "seq_len_kv",
      "head_dim", "dtype", "is_causal", "has_mask", "dropout_p"})
  class SdpParams extends Structure {
    public SizeT struct_size = new SizeT();
    public long batch, num_heads, seq_len_q, seq_len_kv, head_dim;
    public int dtype, is_causal, has_mask;
    public float dropout_p;

    public SdpParams() {
      struct_size = new SizeT(size());
    }
  }

  /** size_t* out-parameter. */
  final class SizeTByReference extends com.sun.jna.ptr.ByReference {
    public SizeTByReference() {
      super(Native.SIZE_T_SIZE);
    }

    public long getValue() {
      return Native.SIZE_T_SIZE == 8 ? getPointer().getLong(0) : getPointer().getInt(0);
    }
  }
}
