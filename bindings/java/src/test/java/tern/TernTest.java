package tern;

import com.sun.jna.Pointer;
import java.io.File;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/** The Java binding's tests, run by run-tests.sh with javac/java (no test framework): prints one
 * line per test and "N passed, N failed", exits 1 when any failed. */
public final class TernTest {
  private static int passed, failed, skipped;

  interface Body {
    void run() throws Exception;
  }

  static final class Skip extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Skip(String why) {
      super(why);
    }
  }

  static void check(boolean ok, String what) {
    if (!ok) throw new AssertionError(what);
  }

  static void test(String name, Body body) {
    try {
      body.run();
      passed++;
      System.out.println("PASS " + name);
    } catch (Skip s) {
      passed++;
      skipped++;
      System.out.println("PASS " + name + " (skipped: " + s.getMessage() + ")");
    } catch (Throwable t) {
      failed++;
      System.out.println("FAIL " + name + ": " + t);
      t.printStackTrace(System.out);
    }
  }

  static String sharedModel(String name) {
    String root = System.getenv("TERN_SHARED_DIR");
    if (root == null || root.isEmpty()) root = "../../../shared";
    File f = new File(root, "models/" + name + "/model.onnx").getAbsoluteFile();
    if (!f.exists()) throw new Skip(f + " is absent");
    return f.getPath();
  }

  /** The tern CLI of the same build: TERN_CLI, beside libtern.so, in ../bin, or on PATH. */
  static String ternCli() {
    String cli = System.getenv("TERN_CLI");
    if (cli != null && !cli.isEmpty()) return cli;
    File dir = new File(Tern.libraryPath()).getAbsoluteFile().getParentFile();
    if (dir != null) {
      for (File c : new File[] {new File(dir, "tern"), new File(dir, "../bin/tern")}) {
        if (c.isFile()) return c.getPath();
      }
    }
    return "tern";
  }

  static float[] pattern(int n) {
    float[] out = new float[n];
    for (int i = 0; i < n; i++) out[i] = (float) (i * 7 % 23) / 23.0f - 0.5f;
    return out;
  }

  static void writeNpy(Path path, long[] shape, float[] data) throws Exception {
    StringBuilder dims = new StringBuilder();
    for (int i = 0; i < shape.length; i++) dims.append(i > 0 ? ", " : "").append(shape[i]);
    if (shape.length == 1) dims.append(",");
    StringBuilder header = new StringBuilder(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }");
    while ((10 + header.length() + 1) % 64 != 0) header.append(' ');
    header.append('\n');
    ByteBuffer b = ByteBuffer.allocate(10 + header.length() + 4 * data.length)
        .order(ByteOrder.LITTLE_ENDIAN);
    b.put(new byte[] {(byte) 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0});
    b.putShort((short) header.length());
    b.put(header.toString().getBytes(StandardCharsets.US_ASCII));
    for (float v : data) b.putFloat(v);
    Files.write(path, b.array());
  }

  static byte[] readNpyData(Path path) throws Exception {
    byte[] all = Files.readAllBytes(path);
    check(all.length >= 10 && all[1] == 'N' && all[2] == 'U', path + " is not .npy");
    int n = (all[8] & 0xff) | ((all[9] & 0xff) << 8);
    return Arrays.copyOfRange(all, 10 + n, all.length);
  }

  /** `tern run` (the C API through the CLI) on one float32 input: the output's bytes. */
  static byte[] cliOutput(String model, String input, long[] shape, float[] data, String output,
      int threads) throws Exception {
    Path dir = Files.createTempDirectory("tern-java");
    Path in = dir.resolve("input.npy");
    writeNpy(in, shape, data);
    Process p = new ProcessBuilder(ternCli(), "run", model, "--input", input + "=" + in,
        "--threads", Integer.toString(threads), "--runs", "1", "--output-dir",
        dir.resolve("out").toString())
        .redirectErrorStream(true).start();
    String log = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    check(p.waitFor() == 0, "tern run failed: " + log);
    byte[] bytes = readNpyData(dir.resolve("out").resolve(output + ".npy"));
    try (var files = Files.walk(dir)) {
      files.sorted((a, b) -> b.compareTo(a)).forEach(f -> f.toFile().delete());
    }
    return bytes;
  }

  static <T extends Throwable> T expect(Class<T> type, Body body) throws Exception {
    try {
      body.run();
    } catch (Throwable t) {
      if (type.isInstance(t)) return type.cast(t);
      throw new AssertionError("expected " + type.getSimpleName() + ", got " + t);
    }
    throw new AssertionError("expected " + type.getSimpleName() + ", nothing was thrown");
  }

  public static void main(String[] args) {
    test("version and ABI", () -> {
      check(Tern.abiVersion() == TernLibrary.ABI_VERSION, "ABI " + Tern.abiVersion());
      check(Tern.version().split("\\.").length == 3, "version " + Tern.version());
      check(Tern.configShow().contains("Tern"), "config");
      System.out.println("  libtern " + Tern.version() + " from " + Tern.libraryPath());
    });

    test("PP-OCR classifier: outputs bitwise equal to the C API at 1 and 2 threads", () -> {
      String path = sharedModel("ppocr_cls");
      long[] shape = {1, 3, 48, 192};
      float[] data = pattern(3 * 48 * 192);
      try (Model model = Model.load(path); Tensor x = Tensor.fromFloats(shape, data)) {
        List<Model.ValueInfo> ins = model.inputs(), outs = model.outputs();
        check(ins.size() == 1 && ins.get(0).dtype == DType.FLOAT32 && ins.get(0).shape.length == 4,
            "inputs");
        String in = ins.get(0).name, out = outs.get(0).name;
        for (int threads : new int[] {1, 2}) {
          try (SessionOptions o = new SessionOptions().numThreads(threads);
               Session s = new Session(model, o)) {
            List<Tensor> res = s.run(Map.of(in, x), List.of(out));
            try (Tensor y = res.get(0)) {
              float[] probs = y.floats();
              check(Arrays.equals(y.shape(), new long[] {1, 2}), "shape");
              check(Math.abs(probs[0] + probs[1] - 1) < 1e-5, "softmax " + Arrays.toString(probs));
              byte[] want = cliOutput(path, in, shape, data, out, threads);
              check(Arrays.equals(y.bytes(), want), "threads " + threads + ": differs from the C API");
              System.out.println("  ppocr_cls threads=" + threads + ": " + Arrays.toString(probs)
                  + ", bitwise equal to `tern run`");
            }
          }
        }
      }
    });

    test("DLPack: round trip shares memory; a transposed view is refused", () -> {
      float[] data = {-1f, 0.5f, 2f, 3.25f, 4f, 5f};
      // DLManagedTensorVersioned on 64-bit: version 0, manager_ctx 8, deleter 16, flags 24,
      // dl_tensor 32: data 32, device 40, ndim 48, dtype 52, shape 56, strides 64.
      Pointer p;
      try (Tensor x = Tensor.fromFloats(new long[] {2, 3}, data)) {
        p = x.toDLPack();
        check(p.getInt(0) == 1 && p.getLong(24) == 0 && p.getInt(40) == 1 && p.getInt(48) == 2,
            "version, flags, device, ndim");
        check(p.getByte(52) == 2 && p.getByte(53) == 32, "dtype");
        check(Arrays.equals(p.getPointer(56).getLongArray(0, 2), new long[] {2, 3}), "shape");
        check(Arrays.equals(p.getPointer(64).getLongArray(0, 2), new long[] {3, 1}), "strides");
      }  // closed: the export keeps the memory
      check(Arrays.equals(p.getPointer(32).getFloatArray(0, 6), data), "exported data");
      try (Tensor back = Tensor.fromDLPack(p)) {
        check(Arrays.equals(back.floats(), data), "round trip");
        check(!back.isReadOnly(), "read-only");
      }
      try (Tensor y = Tensor.fromFloats(new long[] {2, 3}, data)) {
        Pointer q = y.toDLPack();
        q.getPointer(64).write(0, new long[] {1, 2}, 0, 2);
        TernException e = expect(TernException.class, () -> Tensor.fromDLPack(q));
        check(e.status() == Status.UNSUPPORTED && e.getMessage().contains("contiguous"),
            e.getMessage());
        Tensor.deleteDLPack(q);
      }
      TernException e = expect(TernException.class, () -> Tensor.fromDLPack(null));
      check(e.status() == Status.INVALID_ARGUMENT, e.getMessage());
    });

    test("one session from many threads", () -> {
      String path = sharedModel("ppocr_cls");
      Session s;
      try (Model model = Model.load(path)) {
        s = new Session(model);
      }  // the session outlives the model
      try (Session session = s) {
        float[] data = pattern(3 * 48 * 192);
        byte[] want;
        try (Tensor x = Tensor.fromFloats(new long[] {1, 3, 48, 192}, data);
             Tensor y = session.run(Map.of("x", x), List.of("softmax_0.tmp_0")).get(0)) {
          want = y.bytes();
        }
        ExecutorService pool = Executors.newFixedThreadPool(4);
        List<Future<Boolean>> futures = new ArrayList<>();
        for (int t = 0; t < 4; t++) {
          futures.add(pool.submit(() -> {
            for (int i = 0; i < 10; i++) {
              try (Tensor x = Tensor.fromFloats(new long[] {1, 3, 48, 192}, data);
                   Tensor y = session.run(Map.of("x", x), List.of("softmax_0.tmp_0")).get(0)) {
                if (!Arrays.equals(y.bytes(), want)) return false;
              }
            }
            return true;
          }));
        }
        for (Future<Boolean> f : futures) check(f.get(), "a concurrent run differs");
        pool.shutdown();
      }
    });

    test("queries and flags", () -> {
      String cap = Tern.cpuCapability();
      check(List.of("DEFAULT", "NO AVX", "AVX2", "AVX512", "VSX", "Z VECTOR", "SVE256")
          .contains(cap), "capability " + cap);
      System.out.println("  cpu capability: " + cap);
      boolean before = Tern.cudnnBenchmark();
      Tern.setCudnnBenchmark(!before);
      check(Tern.cudnnBenchmark() == !before, "typed setter");
      check(Tern.getFlag("cudnn.benchmark").equals(Boolean.toString(!before)), "generic view");
      Tern.setFlag("cudnn.benchmark", Boolean.toString(before));
      check(Tern.cudnnBenchmark() == before, "generic setter");
      TernException e = expect(TernException.class,
          () -> Tern.setFlag("opt_einsum.strategy", "fastest"));
      check(e.status() == Status.INVALID_ARGUMENT && e.ternMessage().contains("fastest"), e.toString());
      e = expect(TernException.class, () -> Tern.getFlag("no.such.flag"));
      check(e.status() == Status.INVALID_ARGUMENT, e.toString());
      check(Tern.flags().stream().anyMatch(f -> f.name.equals("cuda.matmul.allow_tf32")
          && f.kind.equals("bool")), "flag list");
      check(Tern.getNumThreads() >= 1, "threads");
      expect(TernException.class, () -> Tern.setNumThreads(0));
    });

    test("errors carry Tern's status and message", () -> {
      TernException e = expect(TernException.class, () -> Model.load("/nonexistent/dir/model.onnx"));
      check(e.status() == Status.IO, e.toString());
      check(e.ternMessage().contains("/nonexistent/dir/model.onnx"), e.toString());
      check(e.getMessage().startsWith("TERN_ERR_IO: "), e.getMessage());
      e = expect(TernException.class,
          () -> Model.fromBytes("definitely not a model".getBytes(StandardCharsets.US_ASCII)));
      check(e.status() == Status.INVALID_MODEL || e.status() == Status.UNSUPPORTED, e.toString());
      e = expect(TernException.class, () -> Tensor.zeros(DType.FLOAT32, 2, -1));
      check(e.ternMessage().contains("negative"), e.toString());
      expect(TernException.class, () -> Tensor.fromFloats(new long[] {4}, new float[2]));
      String path = sharedModel("ppocr_cls");
      try (Model model = Model.load(path); Session s = new Session(model);
           Tensor x = Tensor.zeros(DType.INT64, 1, 3, 48, 192)) {
        e = expect(TernException.class, () -> s.run(Map.of("x", x), List.of("softmax_0.tmp_0")));
        check(e.status() == Status.INVALID_ARGUMENT && e.ternMessage().contains("float32"),
            e.toString());
        e = expect(TernException.class, () -> s.run(Map.of("nope", x), List.of("softmax_0.tmp_0")));
        check(e.ternMessage().contains("'nope'"), e.toString());
        // Saved as .tern and loaded from bytes: the same outputs.
        Path file = Files.createTempFile("tern-java", ".tern");
        model.save(file.toString());
        try (Model again = Model.fromBytes(Files.readAllBytes(file)); Session s2 = new Session(again);
             Tensor y = Tensor.fromFloats(new long[] {1, 3, 48, 192}, pattern(3 * 48 * 192));
             Tensor a = s.run(Map.of("x", y), List.of("softmax_0.tmp_0")).get(0);
             Tensor b = s2.run(Map.of("x", y), List.of("softmax_0.tmp_0")).get(0)) {
          check(Arrays.equals(a.bytes(), b.bytes()), "round trip");
        }
        Files.delete(file);
      }
      // Closed objects refuse use instead of crashing.
      Tensor t = Tensor.zeros(DType.FLOAT32, 2);
      t.close();
      t.close();
      expect(IllegalStateException.class, t::bytes);
    });

    test("sequences and optionals through runValues", () -> {
      // The repository's model with sequence and optional inputs and outputs
      // (tests/fuzz/make_seeds.py), relative to bindings/java.
      Path path = Path.of("..", "..", "tests", "fuzz", "corpus", "tern_loader", "sequences.tern");
      try (Model model = Model.load(path.toString()); Session s = new Session(model);
           Tensor a = Tensor.fromFloats(new long[] {2}, new float[] {1, 2});
           Tensor b = Tensor.fromFloats(new long[] {2}, new float[] {3, 4});
           Tensor x = Tensor.zeros(DType.FLOAT32, 3, 2);
           Tensor e = Tensor.fromFloats(new long[] {2}, new float[] {5, 6});
           Value seq = Value.sequence(DType.FLOAT32, a, b); Value xv = Value.of(x);
           Value ev = Value.of(e)) {
        List<Value> out = s.runValues(Map.of("seq", seq, "x", xv, "extra", ev),
            List.of("joined", "longer", "wrapped"));
        try (Tensor joined = out.get(0).tensor(); Tensor last = out.get(1).at(2);
             Value inner = out.get(2).get()) {
          check(Arrays.equals(joined.floats(), new float[] {1, 2, 3, 4}), "joined");
          check(out.get(1).kind() == Value.Kind.SEQUENCE && out.get(1).length() == 3, "longer");
          check(Arrays.equals(last.floats(), new float[] {5, 6}), "longer[2]");
          check(out.get(2).hasValue() && inner.length() == 2, "wrapped");
        }
        TernException err = expect(TernException.class, () -> out.get(0).at(0));
        check(err.status() == Status.INVALID_ARGUMENT, err.toString());
        try (Value empty = Value.optional(null)) {
          check(!empty.hasValue(), "empty optional");
          err = expect(TernException.class, empty::get);
          check(err.ternMessage().contains("holds nothing"), err.toString());
        }
        for (Value v : out) v.close();
      }
    });

    test("cancel and deadline: stopped runs throw their status, the session goes on", () -> {
      try (RunOptions bad = new RunOptions()) {
        try {
          bad.deadline(Duration.ofMillis(-5));
          check(false, "a negative deadline was accepted");
        } catch (TernException e) {
          check(e.status() == Status.INVALID_ARGUMENT, e.toString());
        }
      }
      String path = sharedModel("ppocr_det");
      long[] shape = {1, 3, 640, 640};
      List<String> out = List.of("sigmoid_0.tmp_0");
      try (Model model = Model.load(path);
           SessionOptions o = new SessionOptions().numThreads(1);
           Session session = new Session(model, o);
           Tensor x = Tensor.fromFloats(shape, pattern(3 * 640 * 640));
           RunOptions r = new RunOptions()) {
        Map<String, Tensor> in = Map.of("x", x);
        List<Tensor> first = session.run(in, out);
        // Cancelled before the run: at once, sticky until clearCancel.
        r.cancel();
        try {
          session.run(r, in, out);
          check(false, "a cancelled run succeeded");
        } catch (TernException e) {
          check(e.status() == Status.CANCELLED, e.toString());
        }
        r.clearCancel();
        // A warm run's time, the fastest of three (the first run also planned).
        long whole = Long.MAX_VALUE;
        for (int i = 0; i < 3; ++i) {
          long t0 = System.nanoTime();
          for (Tensor t : session.run(r, in, out)) t.close();
          whole = Math.min(whole, System.nanoTime() - t0);
        }
        // Cancelled from another thread during the run. On a loaded machine the canceller can
        // wake after the run has ended; the run then succeeds and the test tries again,
        // cancelling earlier.
        long waitNs = whole / 4;
        int tries = 0;
        double latencyMs;
        while (true) {
          long[] cancelledAt = new long[1];
          long sleepNs = waitNs;
          Thread canceller = new Thread(() -> {
            try {
              Thread.sleep(sleepNs / 1_000_000, (int) (sleepNs % 1_000_000));
            } catch (InterruptedException e) {
              return;
            }
            cancelledAt[0] = System.nanoTime();
            r.cancel();
          });
          canceller.start();
          long returned = 0;
          TernException stopped = null;
          try {
            for (Tensor t : session.run(r, in, out)) t.close();
          } catch (TernException e) {
            returned = System.nanoTime();
            stopped = e;
          }
          canceller.join();
          if (stopped == null) {
            r.clearCancel();
            ++tries;
            check(tries < 8, tries + " runs ended before a cancel sent " + sleepNs + " ns into them");
            waitNs /= 2;
            continue;
          }
          check(stopped.status() == Status.CANCELLED, stopped.toString());
          latencyMs = (returned - cancelledAt[0]) / 1e6;
          break;
        }
        check(latencyMs < 1000, "cancel to return " + latencyMs + " ms");
        // A deadline far shorter than the run.
        try (RunOptions shortRun = new RunOptions().deadline(Duration.ofNanos(whole / 10))) {
          long t1 = System.nanoTime();
          try {
            session.run(shortRun, in, out);
            check(false, "the deadline did not stop the run");
          } catch (TernException e) {
            check(e.status() == Status.DEADLINE_EXCEEDED, e.toString());
          }
          System.out.printf("  ppocr_det run %.1f ms; cancel to return %.2f ms (%d earlier runs"
              + " ended first); a %.1f ms deadline returned after %.1f ms%n", whole / 1e6, latencyMs,
              tries, whole / 1e7, (System.nanoTime() - t1) / 1e6);
        }
        List<Tensor> again = session.run(in, out);
        check(Arrays.equals(first.get(0).bytes(), again.get(0).bytes()), "outputs changed");
        for (Tensor t : first) t.close();
        for (Tensor t : again) t.close();
      }
    });

    test("torch.backends counterparts: availability with reasons, typed and generic views agree",
        () -> {
      check(Tern.formatVersion() >= 1, "format version");
      check(Tern.parallelInfo().contains("parallel info"), Tern.parallelInfo());
      check(!Tern.mklIsAvailable() && Tern.unavailableReason("mkl").contains("MKL"), "mkl");
      check(!Tern.nnpackIsAvailable() && Tern.unavailableReason("nnpack").contains("NNPACK"),
          "nnpack");
      check(!Tern.cusparseltIsAvailable()
          && Tern.unavailableReason("cusparselt").contains("cuSPARSELt"), "cusparselt");
      check(Tern.optEinsumIsAvailable() && Tern.unavailableReason("opt_einsum").isEmpty(), "einsum");
      check(Tern.flashAttentionIsAvailable(), "flash");
      check(Tern.onednnIsAvailable() == Tern.unavailableReason("mkldnn").isEmpty(), "mkldnn");
      check(Tern.cudaIsAvailable() == Tern.unavailableReason("cuda").isEmpty(), "cuda");
      check(Tern.mpsIsAvailable() == Tern.unavailableReason("mps").isEmpty(), "mps");
      check(!Tern.mpsIsAvailable() || Tern.mpsIsBuilt(), "mps available but not built");
      check(Tern.cudnnIsAvailable() == Tern.unavailableReason("cudnn").isEmpty(), "cudnn");
      check(!Tern.cudnnIsAvailable() || Tern.cudnnVersion() > 0, "cudnn version");
      expect(IllegalArgumentException.class, () -> Tern.unavailableReason("no_such_library"));
      check(Tern.configShow().contains("nnpack: unavailable"), Tern.configShow());

      // Each typed setter against the generic registry view, restored afterwards.
      boolean fp16 = Tern.cudaMatmulAllowFp16ReducedPrecisionReduction();
      Tern.setCudaMatmulAllowFp16ReducedPrecisionReduction(!fp16);
      check(Tern.getFlag("cuda.matmul.allow_fp16_reduced_precision_reduction")
          .equals(Boolean.toString(!fp16)), "fp16 reduction");
      Tern.setCudaMatmulAllowFp16ReducedPrecisionReduction(fp16);
      boolean bf16 = Tern.cudaMatmulAllowBf16ReducedPrecisionReduction();
      Tern.setCudaMatmulAllowBf16ReducedPrecisionReduction(!bf16);
      check(Tern.getFlag("cuda.matmul.allow_bf16_reduced_precision_reduction")
          .equals(Boolean.toString(!bf16)), "bf16 reduction");
      Tern.setCudaMatmulAllowBf16ReducedPrecisionReduction(bf16);
      BlasLibrary blas = Tern.cudaPreferredBlasLibrary();
      Tern.setCudaPreferredBlasLibrary(BlasLibrary.CUBLASLT);
      check(Tern.getFlag("cuda.preferred_blas_library").equals("CUBLASLT"), "blas library");
      Tern.setCudaPreferredBlasLibrary(blas);
      LinalgLibrary linalg = Tern.cudaPreferredLinalgLibrary();
      Tern.setCudaPreferredLinalgLibrary(LinalgLibrary.MAGMA);
      check(Tern.cudaPreferredLinalgLibrary() == LinalgLibrary.MAGMA
          && Tern.getFlag("cuda.preferred_linalg_library").equals("MAGMA"), "linalg");
      Tern.setCudaPreferredLinalgLibrary(linalg);
      boolean tf32 = Tern.cudnnAllowTf32();
      Tern.setCudnnAllowTf32(!tf32);
      check(Tern.getFlag("cudnn.allow_tf32").equals(Boolean.toString(!tf32)), "cudnn tf32");
      Tern.setCudnnAllowTf32(tf32);
      int limit = Tern.cudnnBenchmarkLimit();
      Tern.setCudnnBenchmarkLimit(3);
      check(Tern.getFlag("cudnn.benchmark_limit").equals("3"), "benchmark limit");
      Tern.setCudnnBenchmarkLimit(limit);
      TernException e = expect(TernException.class, () -> Tern.setCudnnBenchmarkLimit(-1));
      check(e.status() == Status.INVALID_ARGUMENT, e.toString());
      boolean einsum = Tern.optEinsumEnabled();
      Tern.setOptEinsumEnabled(!einsum);
      check(Tern.getFlag("opt_einsum.enabled").equals(Boolean.toString(!einsum)), "einsum on");
      Tern.setOptEinsumEnabled(einsum);
      String strategy = Tern.optEinsumStrategy();
      Tern.setOptEinsumStrategy("greedy");
      check(Tern.optEinsumStrategy().equals("greedy"), "strategy");
      Tern.setOptEinsumStrategy(strategy);
      boolean reduce = Tern.sdpFp16Bf16ReductionMathAllowed();
      Tern.setSdpAllowFp16Bf16ReductionMath(!reduce);
      check(Tern.getFlag("sdp.allow_fp16_bf16_reduction_math").equals(Boolean.toString(!reduce)),
          "fp16 math reduction");
      Tern.setSdpAllowFp16Bf16ReductionMath(reduce);
      Tern.FlagDescription d = Tern.describeFlag("blas.verbose");
      check(d.scope.equals("run") && d.envVar.equals("TERN_BLAS_VERBOSE")
          && d.defaultValue.equals("false"), d.scope + " " + d.envVar + " " + d.defaultValue);
      e = expect(TernException.class, () -> Tern.setBlasVerbose(VerboseLevel.ON_CREATION));
      check(e.status() == Status.INVALID_ARGUMENT, e.toString());
      Tern.setBlasVerbose(VerboseLevel.ON);
      check(Tern.getFlag("blas.verbose").equals("true"), "blas verbose");
      Tern.setBlasVerbose(VerboseLevel.OFF);
      if (Tern.onednnIsAvailable()) {
        Tern.setOnednnVerbose(VerboseLevel.OFF);
      } else {
        e = expect(TernException.class, () -> Tern.setOnednnVerbose(VerboseLevel.OFF));
        check(e.status() == Status.BACKEND_UNAVAILABLE, e.toString());
      }
    });

    test("sdp: enabled flags and the reasons a backend cannot run a case", () -> {
      boolean flash = Tern.sdpEnabled(SdpBackend.FLASH);
      try {
        Tern.setSdpEnabled(SdpBackend.FLASH, true);
        check(Tern.getFlag("sdp.flash_enabled").equals("true"), "generic view");
        Tern.SdpCase c = new Tern.SdpCase();
        c.batch = 1;
        c.numHeads = 4;
        c.seqLenQ = 128;
        c.seqLenKv = 128;
        c.headDim = 64;
        check(Tern.sdpCanUse(SdpBackend.FLASH, c).isEmpty(), Tern.sdpCanUse(SdpBackend.FLASH, c));
        c.headDim = 4096;
        check(Tern.sdpCanUse(SdpBackend.FLASH, c).contains("head_dim"), "head_dim refusal");
        c.headDim = 64;
        c.dropout = 0.5f;
        check(Tern.sdpCanUse(SdpBackend.FLASH, c).contains("dropout"), "dropout refusal");
        c.dropout = 0;
        Tern.setSdpEnabled(SdpBackend.FLASH, false);
        check(Tern.sdpCanUse(SdpBackend.FLASH, c).contains("disabled"), "disabled");
      } finally {
        Tern.setSdpEnabled(SdpBackend.FLASH, flash);
      }
    });

    test("model inspection: nodes, values, producer and opset of the PP-OCR classifier", () -> {
      String path = sharedModel("ppocr_cls");
      try (Model model = Model.load(path)) {
        List<Model.Node> nodes = model.nodes();
        List<Model.GraphValue> values = model.values();
        check(!nodes.isEmpty() && model.opset() >= 7, nodes.size() + " nodes, opset "
            + model.opset());
        check(model.producer() != null, "producer");
        java.util.Set<String> names = new java.util.HashSet<>();
        for (Model.GraphValue v : values) names.add(v.name);
        // Every value a node reads or writes is one of the graph's values; the graph input x feeds
        // the first node; weights are constants with a known shape.
        for (Model.Node n : nodes) {
          check(!n.opType.isEmpty(), "op type");
          for (String in : n.inputs) check(in.isEmpty() || names.contains(in), "input " + in);
          for (String out : n.outputs) check(out.isEmpty() || names.contains(out), "output " + out);
        }
        check(nodes.get(0).inputs.contains("x"), "first node reads x");
        check(values.stream().anyMatch(v -> v.constant && v.shape != null && v.shape.length == 4),
            "a 4-D constant (a Conv weight)");
        Model.GraphValue x = values.stream().filter(v -> v.name.equals("x")).findFirst().get();
        check(!x.constant && x.dtype == DType.FLOAT32 && x.shape.length == 4, "x");
        long convs = nodes.stream().filter(n -> n.opType.equals("Conv")).count();
        check(convs > 0, "Conv nodes");
        System.out.println("  ppocr_cls: " + nodes.size() + " nodes (" + convs + " Conv), "
            + values.size() + " values, opset " + model.opset() + ", producer '"
            + model.producer() + "'");
        check(model.optionalInputs().size() >= 0, "optional inputs");
      }
    });

    test("session: flags, memory, value shapes, profiling and the optimized model", () -> {
      String path = sharedModel("ppocr_cls");
      Path dir = Files.createTempDirectory("tern-java");
      Path trace = dir.resolve("trace.json"), optimized = dir.resolve("opt.tern");
      float[] data = pattern(3 * 48 * 192);
      try (Model model = Model.load(path);
           SessionOptions o = new SessionOptions().numThreads(1).planCacheBytes(1 << 20)
               .cpuFallback(true).enableProfiling(trace.toString());
           Session s = new Session(model, o);
           Tensor x = Tensor.fromFloats(new long[] {1, 3, 48, 192}, data)) {
        Session.FlagValue threads = s.flag("num_threads");
        check(threads.value.equals("1") && threads.source.equals("session"),
            threads.value + " " + threads.source);
        check(s.flag("graph.optimize").source.length() > 0, "source");
        // The model's input shape is dynamic: no plan, so no memory figures, before a run.
        TernException none = expect(TernException.class, s::memoryInfo);
        check(none.status() == Status.INVALID_ARGUMENT, none.toString());
        byte[] want;
        try (Tensor out = s.run(Map.of("x", x), List.of("softmax_0.tmp_0")).get(0)) {
          want = out.bytes();
        }
        Session.MemoryInfo mem = s.memoryInfo();
        check(mem.activationBytes > 0, "activation bytes " + mem.activationBytes);
        check(s.memoryStat("plans") >= 1, "plans");
        TernException e = expect(TernException.class, () -> s.memoryStat("no_such_stat"));
        check(e.status() == Status.INVALID_ARGUMENT, e.toString());
        Model.ValueInfo y = s.valueShape("softmax_0.tmp_0");
        check(y.dtype == DType.FLOAT32 && Arrays.equals(y.shape, new long[] {1, 2}), "value shape");
        s.endProfiling();
        String json = Files.readString(trace);
        check(json.contains("Conv") && json.contains("traceEvents"), "trace");
        long packed = s.saveOptimized(optimized.toString());
        check(packed >= 0, "packed");
        try (Model again = Model.load(optimized.toString()); Session s2 = new Session(again);
             Tensor out = s2.run(Map.of("x", x), List.of("softmax_0.tmp_0")).get(0)) {
          check(Arrays.equals(out.bytes(), want), "the optimized model's output differs");
        }
      } finally {
        try (var files = Files.walk(dir)) {
          files.sorted((a, b) -> b.compareTo(a)).forEach(f -> f.toFile().delete());
        }
      }
    });

    test("run options: run-scoped flags, sdp backends, output device", () -> {
      String path = sharedModel("ppocr_cls");
      try (Model model = Model.load(path); Session s = new Session(model);
           Tensor x = Tensor.fromFloats(new long[] {1, 3, 48, 192}, pattern(3 * 48 * 192));
           RunOptions r = new RunOptions().flag("blas.verbose", "false")
               .sdpBackends(SdpBackend.MATH, SdpBackend.FLASH).outputDevice("cpu")) {
        try (Tensor y = s.run(r, Map.of("x", x), List.of("softmax_0.tmp_0")).get(0)) {
          check(y.device().equals("cpu"), y.device());
        }
        TernException e = expect(TernException.class, () -> r.flag("num_threads", "2"));
        check(e.status() == Status.INVALID_ARGUMENT, e.toString());
        e = expect(TernException.class, () -> r.outputDevice("abacus"));
        check(e.status() == Status.INVALID_ARGUMENT, e.toString());
        r.sdpBackends();  // none allowed: this model has no attention, so it still runs
        for (Tensor t : s.run(r, Map.of("x", x), List.of("softmax_0.tmp_0"))) t.close();
      }
    });

    test("tensors: zero-copy wrap, devices, copies, ONNX TensorProto files", () -> {
      ByteBuffer buf = ByteBuffer.allocateDirect(4 * 4).order(ByteOrder.nativeOrder());
      for (int i = 0; i < 4; i++) buf.putFloat(4 * i, i + 0.5f);
      int lent = Tensor.lentBuffers();
      try (Tensor t = Tensor.wrap(DType.FLOAT32, buf, 2, 2);
           Tensor copy = Tensor.onDevice(DType.FLOAT32, "cpu", 2, 2)) {
        check(Arrays.equals(t.floats(), new float[] {0.5f, 1.5f, 2.5f, 3.5f}), "wrapped data");
        buf.putFloat(0, 9.0f);  // no copy: the tensor sees the change
        check(t.floats()[0] == 9.0f, "not zero-copy");
        check(t.device().equals("cpu"), t.device());
        t.copyTo(copy);
        check(Arrays.equals(copy.bytes(), t.bytes()), "copy");
        check(Tensor.lentBuffers() == lent + 1, "lent");
      }
      check(Tensor.lentBuffers() == lent, "the deleter did not run");
      TernException e = expect(TernException.class,
          () -> Tensor.wrap(DType.FLOAT32, ByteBuffer.allocateDirect(4), 2, 2));
      check(e.status() == Status.INVALID_ARGUMENT && Tensor.lentBuffers() == lent, e.toString());
      if (!Tern.cudaIsAvailable()) {
        e = expect(TernException.class, () -> Tensor.onDevice(DType.FLOAT32, "cuda", 2));
        check(e.status() == Status.BACKEND_UNAVAILABLE, e.toString());
      }
      // ONNX's own test data: the model run on input_*.pb matches output_0.pb.
      String root = System.getenv("TERN_SHARED_DIR");
      if (root == null || root.isEmpty()) root = "../../../shared";
      File dir = new File(root, "conformance/onnx-node/test_matmul_2d").getAbsoluteFile();
      if (!dir.exists()) throw new Skip(dir + " is absent");
      String data = new File(dir, "test_data_set_0").getPath();
      try (Model model = Model.load(new File(dir, "model.onnx").getPath());
           Session s = new Session(model);
           Tensor a = Tensor.readOnnxFile(data + "/input_0.pb");
           Tensor b = Tensor.readOnnxFile(data + "/input_1.pb");
           Tensor want = Tensor.readOnnxFile(data + "/output_0.pb")) {
        List<Model.ValueInfo> ins = model.inputs();
        try (Tensor got = s.run(Map.of(ins.get(0).name, a, ins.get(1).name, b),
                 List.of(model.outputs().get(0).name)).get(0)) {
          check(Arrays.equals(got.shape(), want.shape()), "shape");
          float[] g = got.floats(), w = want.floats();
          for (int i = 0; i < g.length; i++) {
            check(Math.abs(g[i] - w[i]) <= 1e-4 + 1e-3 * Math.abs(w[i]), "element " + i);
          }
        }
      }
      e = expect(TernException.class, () -> Tensor.readOnnxFile("/nonexistent/input_0.pb"));
      check(e.status() == Status.IO, e.toString());
    });

    System.out.println(passed + " passed, " + failed + " failed"
        + (skipped > 0 ? " (" + skipped + " skipped for missing files)" : ""));
    System.exit(failed == 0 ? 0 : 1);
  }
}
