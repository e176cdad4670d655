package tern;

import com.sun.jna.Pointer;
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
    Tern.check(Tern.lib().tern_session_run(handle(), null, names, tensors,
        new TernLibrary.SizeT(names.length), outNames, new TernLibrary.SizeT(outNames.length),
        results));
    List<Tensor> out = new ArrayList<>();
    for (Pointer p : results) out.add(new Tensor(p));
    return out;
  }

  /** {@link #run} for models whose inputs or outputs are sequences or optionals: values in,
   * values out (a tensor output as a tensor value); the caller closes them. */
  public List<Value> runValues(Map<String, Value> inputs, List<String> outputs) {
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
    Tern.check(Tern.lib().tern_session_run_values(handle(), null, names, values,
        new TernLibrary.SizeT(names.length), outNames, new TernLibrary.SizeT(outNames.length),
        results));
    List<Value> out = new ArrayList<>();
    for (Pointer p : results) out.add(new Value(p));
    return out;
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
