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

  /** torch.backends.cuda.matmul.allow_tf32 */
  public static boolean cudaMatmulAllowTf32() {
    return lib().tern_cuda_matmul_get_allow_tf32() != 0;
  }

  public static void setCudaMatmulAllowTf32(boolean on) {
    lib().tern_cuda_matmul_set_allow_tf32(on ? 1 : 0);
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

  /** A flag's global value as text ("true", "4", "auto", ...). */
  public static String getFlag(String name) {
    for (int size = 64; ; size *= 4) {
      byte[] buf = new byte[size];
      int st = lib().tern_flag_get(name, buf, new TernLibrary.SizeT(size));
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
