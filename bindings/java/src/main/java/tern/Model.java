package tern;

import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.PointerByReference;
import java.util.ArrayList;
import java.util.List;

/** A loaded, verified model (tern_model): immutable, shareable between threads and sessions.
 * Sessions keep what they need, so a model may be closed before its sessions. */
public final class Model implements AutoCloseable {
  private com.sun.jna.Pointer handle;

  private Model(com.sun.jna.Pointer handle) {
    this.handle = handle;
  }

  /** A graph input or output: name, dtype and shape (-1 marks a dynamic dim). */
  public static final class ValueInfo {
    public final String name;
    public final DType dtype;
    public final long[] shape;

    ValueInfo(String name, DType dtype, long[] shape) {
      this.name = name;
      this.dtype = dtype;
      this.shape = shape;
    }
  }

  /** Loads a .tern file (mapped, not copied) or an ONNX model; the content decides. */
  public static Model load(String path) {
    PointerByReference out = new PointerByReference();
    Tern.check(Tern.lib().tern_model_load_file(path, out));
    return new Model(out.getValue());
  }

  /** Loads a model from bytes (copied). */
  public static Model fromBytes(byte[] data) {
    PointerByReference out = new PointerByReference();
    Tern.check(Tern.lib().tern_model_load_memory(data, new TernLibrary.SizeT(data.length), out));
    return new Model(out.getValue());
  }

  com.sun.jna.Pointer handle() {
    if (handle == null) throw new IllegalStateException("the model is closed");
    return handle;
  }

  /** Writes the model as .tern. */
  public void save(String path) {
    Tern.check(Tern.lib().tern_model_save(handle(), path));
  }

  public List<ValueInfo> inputs() {
    return infos(true);
  }

  public List<ValueInfo> outputs() {
    return infos(false);
  }

  private List<ValueInfo> infos(boolean inputs) {
    TernLibrary l = Tern.lib();
    long n = (inputs ? l.tern_model_input_count(handle()) : l.tern_model_output_count(handle()))
        .longValue();
    List<ValueInfo> out = new ArrayList<>();
    for (long i = 0; i < n; i++) {
      TernLibrary.SizeT at = new TernLibrary.SizeT(i);
      IntByReference dtype = new IntByReference();
      TernLibrary.SizeTByReference rank = new TernLibrary.SizeTByReference();
      PointerByReference shape = new PointerByReference();
      String name;
      if (inputs) {
        name = l.tern_model_input_name(handle(), at);
        Tern.check(l.tern_model_input_info(handle(), at, dtype, rank, shape));
      } else {
        name = l.tern_model_output_name(handle(), at);
        Tern.check(l.tern_model_output_info(handle(), at, dtype, rank, shape));
      }
      int r = (int) rank.getValue();
      long[] dims = r == 0 ? new long[0] : shape.getValue().getLongArray(0, r);
      out.add(new ValueInfo(name, DType.of(dtype.getValue()), dims));
    }
    return out;
  }

  @Override
  public void close() {
    if (handle != null) {
      Tern.lib().tern_model_destroy(handle);
      handle = null;
    }
  }
}
