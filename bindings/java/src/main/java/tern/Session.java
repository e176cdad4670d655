package tern;

import com.sun.jna.Pointer;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.LongByReference;
import com.sun.jna.ptr.PointerByReference;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** A model compiled for its backends (tern_session). {@link #run} may be called from many
 * threads at once; {@link #close} must not overlap a run. */
public final class Session implements AutoCloseable {
  private volatile Pointer handle;

  /** Compiles the model with the options (null: defaults). */
  public Session(Model model, SessionOptions options) {
    PointerByReference out = new PointerByReference();
    Tern.check(Tern.lib().tern_session_create(
        model.handle(), options == null ? null : options.handle(), out));
    handle = out.getValue();
  }

  public Session(Model model) {
    this(model, null);
  }

  private Pointer handle() {
    Pointer h = handle;
    if (h == null) throw new IllegalStateException("the session is closed");
    return h;
  }

  /** Feeds the named inputs (borrowed for the call) and returns the named outputs, in the order
   * asked; the caller closes them. */
  public List<Tensor> run(Map<String, Tensor> inputs, List<String> outputs) {
    return run(null, inputs, outputs);
  }

  /** {@link #run} with run options (null: defaults): a deadline, and a {@link RunOptions#cancel}
   * another thread may call; a stopped run throws a {@link TernException} with
   * {@link Status#CANCELLED} or {@link Status#DEADLINE_EXCEEDED}, and the session stays usable.
   * The options must stay open until the run returns. */
  public List<Tensor> run(RunOptions options, Map<String, Tensor> inputs, List<String> outputs) {
    String[] names = new String[inputs.size()];
    Pointer[] tensors = new Pointer[inputs.size()];
    int i = 0;
    for (Map.Entry<String, Tensor> e : inputs.entrySet()) {
      names[i] = e.getKey();
      tensors[i] = e.getValue() == null ? null : e.getValue().handle();
      i++;
    }
    String[] outNames = outputs.toArray(new String[0]);
    Pointer[] results = new Pointer[outNames.length];
    Tern.check(Tern.lib().tern_session_run(handle(), RunOptions.handleOf(options), names, tensors,
        new TernLibrary.SizeT(names.length), outNames, new TernLibrary.SizeT(outNames.length),
        results));
    List<Tensor> out = new ArrayList<>();
    for (Pointer p : results) out.add(new Tensor(p));
    return out;
  }

  /** {@link #run} for models whose inputs or outputs are sequences or optionals: values in,
   * values out (a tensor output as a tensor value); the caller closes them. */
  public List<Value> runValues(Map<String, Value> inputs, List<String> outputs) {
    return runValues(null, inputs, outputs);
  }

  /** {@link #runValues} with run options (null: defaults), as {@link #run(RunOptions, Map, List)}. */
  public List<Value> runValues(RunOptions options, Map<String, Value> inputs, List<String> outputs) {
    String[] names = new String[inputs.size()];
    Pointer[] values = new Pointer[inputs.size()];
    int i = 0;
    for (Map.Entry<String, Value> e : inputs.entrySet()) {
      names[i] = e.getKey();
      values[i] = e.getValue() == null ? null : e.getValue().handle();
      i++;
    }
    String[] outNames = outputs.toArray(new String[0]);
    Pointer[] results = new Pointer[outNames.length];
    Tern.check(Tern.lib().tern_session_run_values(handle(), RunOptions.handleOf(options), names, values,
        new TernLibrary.SizeT(names.length), outNames, new TernLibrary.SizeT(outNames.length),
        results));
    List<Value> out = new ArrayList<>();
    for (Pointer p : results) out.add(new Value(p));
    return out;
  }

  /** Writes the model after the session's optimizations, with its packed weights, as .tern;
   * returns how many packed layouts were written. */
  public long saveOptimized(String path) {
    TernLibrary.SizeTByReference packed = new TernLibrary.SizeTByReference();
    Tern.check(Tern.lib().tern_session_save_optimized(handle(), path, packed));
    return packed.getValue();
  }

  /** Writes the profile recorded so far (sessions made with
   * {@link SessionOptions#enableProfiling}). */
  public void endProfiling() {
    Tern.check(Tern.lib().tern_session_end_profiling(handle()));
  }

  /** Memory of the session's latest plan. */
  public static final class MemoryInfo {
    /** The run arena holding every intermediate tensor. */
    public final long activationBytes;
    /** Weight copies kernels made in their own layouts. */
    public final long packedWeightBytes;

    MemoryInfo(long activationBytes, long packedWeightBytes) {
      this.activationBytes = activationBytes;
      this.packedWeightBytes = packedWeightBytes;
    }
  }

  public MemoryInfo memoryInfo() {
    TernLibrary.SizeTByReference act = new TernLibrary.SizeTByReference();
    TernLibrary.SizeTByReference packed = new TernLibrary.SizeTByReference();
    Tern.check(Tern.lib().tern_session_memory_info(handle(), act, packed));
    return new MemoryInfo(act.getValue(), packed.getValue());
  }

  /** One figure by name: "plans", "plan_bytes", "packed_weight_bytes", "arena_bytes",
   * "full_plans", "template_plans". */
  public long memoryStat(String name) {
    LongByReference v = new LongByReference();
    Tern.check(Tern.lib().tern_session_memory_stat(handle(), name, v));
    return v.getValue();
  }

  /** The dtype and shape the latest plan gives value `name` of the model (every dim known). */
  public Model.ValueInfo valueShape(String name) {
    IntByReference dtype = new IntByReference();
    TernLibrary.SizeTByReference rank = new TernLibrary.SizeTByReference();
    PointerByReference shape = new PointerByReference();
    Tern.check(Tern.lib().tern_session_value_shape(handle(), name, dtype, rank, shape));
    return new Model.ValueInfo(name, DType.of(dtype.getValue()), Model.dims(rank, shape));
  }

  /** A flag's value for this session's runs and where it came from. */
  public static final class FlagValue {
    public final String value;
    /** "default" | "environment" | "api" | "session". */
    public final String source;

    FlagValue(String value, String source) {
      this.value = value;
      this.source = source;
    }
  }

  public FlagValue flag(String name) {
    PointerByReference source = new PointerByReference();
    String value = Tern.text((buf, len) ->
        Tern.lib().tern_session_flag_get(handle(), name, buf, len, source));
    return new FlagValue(value, Tern.str(source.getValue()));
  }

  @Override
  public void close() {
    Pointer h = handle;
    if (h != null) {
      handle = null;
      Tern.lib().tern_session_destroy(h);
    }
  }
}
