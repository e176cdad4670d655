package tern;

import com.sun.jna.IntegerType;
import com.sun.jna.Library;
import com.sun.jna.Native;
import com.sun.jna.Pointer;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.PointerByReference;

/** The C API of include/c_api.h as JNA sees it (the functions the Java classes use). Handles are
 * opaque {@link Pointer}s; enums are ints. Not for direct use: see {@link Model}, {@link Session}. */
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
