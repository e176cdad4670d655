package tern;

import com.sun.jna.Library;
import com.sun.jna.Native;
import com.sun.jna.Pointer;
import com.sun.jna.ptr.PointerByReference;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * Library-wide entry points: version, threads, the torch.backends-style queries and the flags
 * registry. The library is opened on first use: {@code $TERN_LIB_DIR/libtern.so.1} when
 * TERN_LIB_DIR is set, else libtern from the system's library path or the installed package's
 * libdir ({@code pkg-config --variable=libdir tern}); its ABI version must be the one this
 * binding was written for.
 */
public final class Tern {
  private Tern() {}

  private static volatile TernLibrary lib;
  private static String libPath;

  /** The loaded library (opened on first call; every call after that reads one volatile field). */
  static TernLibrary lib() {
    TernLibrary l = lib;
    return l != null ? l : open();
  }

  private static synchronized TernLibrary open() {
    if (lib != null) return lib;
    List<String> candidates = new ArrayList<>();
    String dir = System.getenv("TERN_LIB_DIR");
    if (dir != null && !dir.isEmpty()) {
      candidates.add(new File(dir, "libtern.so.1").getAbsolutePath());
      candidates.add(new File(dir, "libtern.so").getAbsolutePath());
    } else {
      candidates.add("tern");
      String pcDir = pkgConfigLibdir();
      if (pcDir != null) candidates.add(new File(pcDir, "libtern.so.1").getAbsolutePath());
    }
    Map<String, Object> options =
        Collections.singletonMap(Library.OPTION_STRING_ENCODING, StandardCharsets.UTF_8.name());
    StringBuilder why = new StringBuilder();
    for (String c : candidates) {
      try {
        TernLibrary l = Native.load(c, TernLibrary.class, options);
        int abi = l.tern_abi_version();
        if (abi != TernLibrary.ABI_VERSION) {
          throw new TernException(Status.UNSUPPORTED, c + " has ABI version " + abi
              + ", this binding was written for " + TernLibrary.ABI_VERSION);
        }
        libPath = c;
        lib = l;
        return lib;
      } catch (UnsatisfiedLinkError e) {
        why.append(why.length() > 0 ? "; " : "").append(e.getMessage());
      }
    }
    throw new TernException(Status.IO, "cannot open libtern (set TERN_LIB_DIR to the folder "
        + "holding libtern.so, or install Tern): " + why);
  }

  private static String pkgConfigLibdir() {
    try {
      Process p = new ProcessBuilder("pkg-config", "--variable=libdir", "tern").start();
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
      return p.waitFor() == 0 && !out.isEmpty() ? out : null;
    } catch (Exception e) {
      return null;
    }
  }

  /** Throws the TernException for a status other than TERN_OK (message read on this thread). */
  static void check(int status) {
    if (status != 0) throw new TernException(Status.of(status), lib().tern_last_error());
  }

  /** The file the library was loaded from. */
  public static synchronized String libraryPath() {
    open();
    return libPath;
  }

  public static String version() {
    return lib().tern_version();
  }

  public static int abiVersion() {
    return lib().tern_abi_version();
  }

  /** The build configuration as text (like torch.__config__.show()). */
  public static String configShow() {
    return lib().tern_config_show();
  }

  public static void setNumThreads(int n) {
    check(lib().tern_set_num_threads(n));
  }

  public static int getNumThreads() {
    return lib().tern_get_num_threads();
  }

  public static void setNumInteropThreads(int n) {
    check(lib().tern_set_num_interop_threads(n));
  }

  public static int getNumInteropThreads() {
    return lib().tern_get_num_interop_threads();
  }

  /** The highest .tern format version the library reads. */
  public static int formatVersion() {
    return lib().tern_format_version();
  }

  /** Thread counts and where they came from, pinning, the OpenMP runtime (like
   * torch.__config__.parallel_info()). */
  public static String parallelInfo() {
    return lib().tern_parallel_info();
  }

  /** "DEFAULT" | "NO AVX" | "AVX2" | "AVX512" | "VSX" | "Z VECTOR" | "SVE256". */
  public static String cpuCapability() {
    return lib().tern_cpu_get_capability();
  }

  public static boolean onednnIsAvailable() {
    return lib().tern_onednn_is_available() != 0;
  }

  public static boolean openblasIsAvailable() {
    return lib().tern_openblas_is_available() != 0;
  }

  public static boolean openmpIsAvailable() {
    return lib().tern_openmp_is_available() != 0;
  }

  public static boolean cudaIsBuilt() {
    return lib().tern_cuda_is_built() != 0;
  }

  public static boolean cudaIsAvailable() {
    return lib().tern_cuda_is_available() != 0;
  }

  public static int cudaDeviceCount() {
    return lib().tern_cuda_device_count();
  }

  public static boolean vulkanIsBuilt() {
    return lib().tern_vulkan_is_built() != 0;
  }

  public static boolean vulkanIsAvailable() {
    return lib().tern_vulkan_is_available() != 0;
  }

  public static boolean mpsIsBuilt() {
    return lib().tern_mps_is_built() != 0;
  }

  public static boolean mpsIsAvailable() {
    return lib().tern_mps_is_available() != 0;
  }

  /** torch.backends.mkl.is_available(): false in every build (see {@link #unavailableReason}). */
  public static boolean mklIsAvailable() {
    return lib().tern_mkl_is_available() != 0;
  }

  /** torch.backends.nnpack.is_available(): false in every build. */
  public static boolean nnpackIsAvailable() {
    return lib().tern_nnpack_is_available() != 0;
  }

  /** torch.backends.cusparselt.is_available(): false in every build. */
  public static boolean cusparseltIsAvailable() {
    return lib().tern_cusparselt_is_available() != 0;
  }

  /** torch.backends.cuda.is_flash_attention_available(): the CPU's FLASH kernel is always
   * built. */
  public static boolean flashAttentionIsAvailable() {
    return lib().tern_is_flash_attention_available() != 0;
  }

  /** Why a library, backend or feature ("mkl", "nnpack", "cusparselt", "opt_einsum", "mkldnn",
   * "onednn", "openblas", "openmp", "cuda", "cudnn", "mps", "vulkan", "flash_attention") cannot
   * be used here; "" when it can. An unknown name throws {@link IllegalArgumentException}. */
  public static String unavailableReason(String name) {
    String why = lib().tern_backend_unavailable_reason(name);
    if (why == null) throw new IllegalArgumentException("unknown name '" + name + "'");
    return why;
  }

  /** torch.backends.cuda.matmul.allow_tf32 */
  public static boolean cudaMatmulAllowTf32() {
    return lib().tern_cuda_matmul_get_allow_tf32() != 0;
  }

  public static void setCudaMatmulAllowTf32(boolean on) {
    lib().tern_cuda_matmul_set_allow_tf32(on ? 1 : 0);
  }

  /** torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction */
  public static boolean cudaMatmulAllowFp16ReducedPrecisionReduction() {
    return lib().tern_cuda_matmul_get_allow_fp16_reduced_precision_reduction() != 0;
  }

  public static void setCudaMatmulAllowFp16ReducedPrecisionReduction(boolean on) {
    lib().tern_cuda_matmul_set_allow_fp16_reduced_precision_reduction(on ? 1 : 0);
  }

  /** torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction */
  public static boolean cudaMatmulAllowBf16ReducedPrecisionReduction() {
    return lib().tern_cuda_matmul_get_allow_bf16_reduced_precision_reduction() != 0;
  }

  public static void setCudaMatmulAllowBf16ReducedPrecisionReduction(boolean on) {
    lib().tern_cuda_matmul_set_allow_bf16_reduced_precision_reduction(on ? 1 : 0);
  }

  /** torch.backends.cuda.preferred_blas_library */
  public static BlasLibrary cudaPreferredBlasLibrary() {
    return BlasLibrary.of(lib().tern_cuda_get_preferred_blas_library());
  }

  public static void setCudaPreferredBlasLibrary(BlasLibrary l) {
    check(lib().tern_cuda_set_preferred_blas_library(l.ordinal()));
  }

  /** torch.backends.cuda.preferred_linalg_library (kept; no effect yet). */
  public static LinalgLibrary cudaPreferredLinalgLibrary() {
    return LinalgLibrary.of(lib().tern_cuda_get_preferred_linalg_library());
  }

  public static void setCudaPreferredLinalgLibrary(LinalgLibrary l) {
    check(lib().tern_cuda_set_preferred_linalg_library(l.ordinal()));
  }

  /** torch.backends.cuda.{math,flash,mem_efficient,cudnn}_sdp_enabled */
  public static boolean sdpEnabled(SdpBackend b) {
    return lib().tern_sdp_enabled(b.code) != 0;
  }

  public static void setSdpEnabled(SdpBackend b, boolean on) {
    check(lib().tern_sdp_enable(b.code, on ? 1 : 0));
  }

  /** An attention case for {@link #sdpCanUse}: sizes, dtype, causal, masked, dropout. */
  public static final class SdpCase {
    public long batch = 1, numHeads = 1, seqLenQ = 1, seqLenKv = 1, headDim = 64;
    public DType dtype = DType.FLOAT32;
    public boolean causal, mask;
    public float dropout;
  }

  /** Why backend b would not run case c here ("" when it would): enabled, built and able
   * (torch.backends.cuda.can_use_flash_attention and friends, with the reasons). */
  public static String sdpCanUse(SdpBackend b, SdpCase c) {
    TernLibrary.SdpParams p = new TernLibrary.SdpParams();
    p.batch = c.batch;
    p.num_heads = c.numHeads;
    p.seq_len_q = c.seqLenQ;
    p.seq_len_kv = c.seqLenKv;
    p.head_dim = c.headDim;
    p.dtype = c.dtype.code;
    p.is_causal = c.causal ? 1 : 0;
    p.has_mask = c.mask ? 1 : 0;
    p.dropout_p = c.dropout;
    byte[] why = new byte[1024];
    int ok = lib().tern_sdp_can_use(b.code, p, why, new TernLibrary.SizeT(why.length));
    if (ok != 0) return "";
    int n = 0;
    while (n < why.length && why[n] != 0) n++;
    return new String(why, 0, n, StandardCharsets.UTF_8);
  }

  /** torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp: float16/bfloat16 attention on the
   * MATH kernel rounds its scores and probabilities to the input's precision. */
  public static void setSdpAllowFp16Bf16ReductionMath(boolean on) {
    lib().tern_sdp_allow_fp16_bf16_reduction_math(on ? 1 : 0);
  }

  public static boolean sdpFp16Bf16ReductionMathAllowed() {
    return lib().tern_sdp_fp16_bf16_reduction_math_allowed() != 0;
  }

  /** torch.backends.mkldnn.verbose: oneDNN's verbose lines on stdout from the next run on. */
  public static void setOnednnVerbose(VerboseLevel level) {
    check(lib().tern_onednn_set_verbose(level.code));
  }

  /** torch.backends.mkl.verbose for Tern's GEMMs: one stdout line per matrix product (OFF or
   * ON). For one run, use {@link RunOptions#flag} with "blas.verbose". */
  public static void setBlasVerbose(VerboseLevel level) {
    check(lib().tern_blas_set_verbose(level.code));
  }

  /** torch.backends.opt_einsum */
  public static boolean optEinsumIsAvailable() {
    return lib().tern_opt_einsum_is_available() != 0;
  }

  public static boolean optEinsumEnabled() {
    return lib().tern_opt_einsum_get_enabled() != 0;
  }

  public static void setOptEinsumEnabled(boolean on) {
    lib().tern_opt_einsum_set_enabled(on ? 1 : 0);
  }

  /** "auto" | "greedy" | "optimal" */
  public static String optEinsumStrategy() {
    return lib().tern_opt_einsum_get_strategy();
  }

  public static void setOptEinsumStrategy(String strategy) {
    check(lib().tern_opt_einsum_set_strategy(strategy));
  }

  /** torch.backends.cudnn.is_available() and version() (-1 when the CUDA module is absent). */
  public static boolean cudnnIsAvailable() {
    return lib().tern_cudnn_is_available() != 0;
  }

  public static long cudnnVersion() {
    return lib().tern_cudnn_version();
  }

  /** torch.backends.cudnn.allow_tf32 */
  public static boolean cudnnAllowTf32() {
    return lib().tern_cudnn_get_allow_tf32() != 0;
  }

  public static void setCudnnAllowTf32(boolean on) {
    lib().tern_cudnn_set_allow_tf32(on ? 1 : 0);
  }

  /** torch.backends.cudnn.benchmark_limit (0: every algorithm). */
  public static int cudnnBenchmarkLimit() {
    return lib().tern_cudnn_get_benchmark_limit();
  }

  public static void setCudnnBenchmarkLimit(int limit) {
    check(lib().tern_cudnn_set_benchmark_limit(limit));
  }

  /** torch.backends.cudnn.enabled / benchmark / deterministic */
  public static boolean cudnnEnabled() {
    return lib().tern_cudnn_get_enabled() != 0;
  }

  public static void setCudnnEnabled(boolean on) {
    lib().tern_cudnn_set_enabled(on ? 1 : 0);
  }

  public static boolean cudnnBenchmark() {
    return lib().tern_cudnn_get_benchmark() != 0;
  }

  public static void setCudnnBenchmark(boolean on) {
    lib().tern_cudnn_set_benchmark(on ? 1 : 0);
  }

  public static boolean cudnnDeterministic() {
    return lib().tern_cudnn_get_deterministic() != 0;
  }

  public static void setCudnnDeterministic(boolean on) {
    lib().tern_cudnn_set_deterministic(on ? 1 : 0);
  }

  /** torch.backends.mha fastpath */
  public static boolean mhaFastpathEnabled() {
    return lib().tern_mha_get_fastpath_enabled() != 0;
  }

  public static void setMhaFastpathEnabled(boolean on) {
    lib().tern_mha_set_fastpath_enabled(on ? 1 : 0);
  }

  /** torch.use_deterministic_algorithms */
  public static void useDeterministicAlgorithms(boolean on) {
    check(lib().tern_use_deterministic_algorithms(on ? 1 : 0));
  }

  public static boolean areDeterministicAlgorithmsEnabled() {
    return lib().tern_are_deterministic_algorithms_enabled() != 0;
  }

  /** A C function that writes text into a caller buffer (buf, len) and returns a status. */
  interface TextCall {
    int call(byte[] buf, TernLibrary.SizeT len);
  }

  /** Calls f with a growing buffer until the text fits; the text. */
  static String text(TextCall f) {
    for (int size = 64; ; size *= 4) {
      byte[] buf = new byte[size];
      int st = f.call(buf, new TernLibrary.SizeT(size));
      if (st == 0) {
        int n = 0;
        while (n < buf.length && buf[n] != 0) n++;
        return new String(buf, 0, n, StandardCharsets.UTF_8);
      }
      String msg = lib().tern_last_error();
      if (st != Status.INVALID_ARGUMENT.code || !msg.contains("too small") || size >= 1 << 16) {
        throw new TernException(Status.of(st), msg);
      }
    }
  }

  /** A flag's global value as text ("true", "4", "auto", ...). */
  public static String getFlag(String name) {
    return text((buf, len) -> lib().tern_flag_get(name, buf, len));
  }

  /** Where a flag's value comes from and how it may be set (tern_flag_describe). */
  public static final class FlagDescription {
    /** "default" | "environment" | "api". */
    public final String source;
    /** The narrowest level that may override it: "global" | "session" | "run". */
    public final String scope;
    public final String defaultValue;
    /** Its environment variable(s), "" when none. */
    public final String envVar;

    FlagDescription(String source, String scope, String defaultValue, String envVar) {
      this.source = source;
      this.scope = scope;
      this.defaultValue = defaultValue;
      this.envVar = envVar;
    }
  }

  public static FlagDescription describeFlag(String name) {
    PointerByReference source = new PointerByReference(), scope = new PointerByReference();
    PointerByReference def = new PointerByReference(), env = new PointerByReference();
    check(lib().tern_flag_describe(name, source, scope, def, env));
    return new FlagDescription(str(source.getValue()), str(scope.getValue()),
        str(def.getValue()), str(env.getValue()));
  }

  /** Checks and sets a flag's global value. */
  public static void setFlag(String name, String value) {
    check(lib().tern_flag_set(name, value));
  }

  /** One flag of the registry: name, kind ("bool" | "int" | "enum" | "cpulist") and doc line. */
  public static final class FlagInfo {
    public final String name, kind, doc;

    FlagInfo(String name, String kind, String doc) {
      this.name = name;
      this.kind = kind;
      this.doc = doc;
    }
  }

  public static List<FlagInfo> flags() {
    long n = lib().tern_flag_count().longValue();
    List<FlagInfo> out = new ArrayList<>();
    for (long i = 0; i < n; i++) {
      PointerByReference name = new PointerByReference();
      PointerByReference kind = new PointerByReference();
      PointerByReference doc = new PointerByReference();
      check(lib().tern_flag_info(new TernLibrary.SizeT(i), name, kind, doc));
      out.add(new FlagInfo(str(name.getValue()), str(kind.getValue()), str(doc.getValue())));
    }
    return out;
  }

  static String str(Pointer p) {
    return p == null ? "" : p.getString(0, StandardCharsets.UTF_8.name());
  }
}
