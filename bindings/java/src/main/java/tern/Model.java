package tern;

import com.sun.jna.Pointer;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.PointerByReference;
import java.util.ArrayList;
import java.util.List;

/** A loaded, verified model (tern_model): immutable, shareable between threads and sessions.
 * Sessions keep what they need, so a model may be closed before its sessions. */
public final class Model implements AutoCloseable {
  private Pointer handle;

  private Model(Pointer handle) {
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

  /** A node of the main graph as loaded (before Tern's optimizations). */
  public static final class Node {
    /** "" when the file gave none. */
    public final String name;
    public final String opType;
    /** "" for ai.onnx. */
    public final String domain;
    /** Value names; "" for an omitted optional one. */
    public final List<String> inputs, outputs;

    Node(String name, String opType, String domain, List<String> inputs, List<String> outputs) {
      this.name = name;
      this.opType = opType;
      this.domain = domain;
      this.inputs = inputs;
      this.outputs = outputs;
    }
  }

  /** A value (tensor) of the main graph: its dtype (UNKNOWN for sequences and optionals), its
   * shape (null when not even the rank is known; -1 for a dim known only at run time) and
   * whether it is a constant (a weight or folded data). */
  public static final class GraphValue {
    public final String name;
    public final DType dtype;
    public final long[] shape;
    public final boolean constant;

    GraphValue(String name, DType dtype, long[] shape, boolean constant) {
      this.name = name;
      this.dtype = dtype;
      this.shape = shape;
      this.constant = constant;
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

  Pointer handle() {
    if (handle == null) throw new IllegalStateException("the model is closed");
    return handle;
  }

  /** Writes the model as .tern. */
  public void save(String path) {
    Tern.check(Tern.lib().tern_model_save(handle(), path));
  }

  public List<ValueInfo> inputs() {
    return infos(0);
  }

  public List<ValueInfo> outputs() {
    return infos(1);
  }

  /** Inputs that have an initializer: a run may give any of them to replace the weight. */
  public List<ValueInfo> optionalInputs() {
    return infos(2);
  }

  private List<ValueInfo> infos(int which) {
    TernLibrary l = Tern.lib();
    Pointer m = handle();
    long n = (which == 0   ? l.tern_model_input_count(m)
              : which == 1 ? l.tern_model_output_count(m)
                           : l.tern_model_optional_input_count(m))
        .longValue();
    List<ValueInfo> out = new ArrayList<>();
    for (long i = 0; i < n; i++) {
      TernLibrary.SizeT at = new TernLibrary.SizeT(i);
      IntByReference dtype = new IntByReference();
      TernLibrary.SizeTByReference rank = new TernLibrary.SizeTByReference();
      PointerByReference shape = new PointerByReference();
      String name;
      if (which == 0) {
        name = l.tern_model_input_name(m, at);
        Tern.check(l.tern_model_input_info(m, at, dtype, rank, shape));
      } else if (which == 1) {
        name = l.tern_model_output_name(m, at);
        Tern.check(l.tern_model_output_info(m, at, dtype, rank, shape));
      } else {
        name = l.tern_model_optional_input_name(m, at);
        Tern.check(l.tern_model_optional_input_info(m, at, dtype, rank, shape));
      }
      out.add(new ValueInfo(name, DType.of(dtype.getValue()), dims(rank, shape)));
    }
    return out;
  }

  static long[] dims(TernLibrary.SizeTByReference rank, PointerByReference shape) {
    int r = (int) rank.getValue();
    return r == 0 ? new long[0] : shape.getValue().getLongArray(0, r);
  }

  /** The producer the file names ("pytorch 2.1"; "" when none). */
  public String producer() {
    return Tern.lib().tern_model_producer(handle());
  }

  /** The ai.onnx opset the nodes follow. */
  public long opset() {
    return Tern.lib().tern_model_opset(handle());
  }

  /** The main graph's nodes in file order (subgraphs of If/Loop/Scan not included). */
  public List<Node> nodes() {
    TernLibrary l = Tern.lib();
    Pointer m = handle();
    long n = l.tern_model_node_count(m).longValue();
    List<Node> out = new ArrayList<>();
    for (long i = 0; i < n; i++) {
      TernLibrary.SizeT at = new TernLibrary.SizeT(i);
      PointerByReference name = new PointerByReference(), op = new PointerByReference();
      PointerByReference domain = new PointerByReference();
      TernLibrary.SizeTByReference nIn = new TernLibrary.SizeTByReference();
      TernLibrary.SizeTByReference nOut = new TernLibrary.SizeTByReference();
      Tern.check(l.tern_model_node_info(m, at, name, op, domain, nIn, nOut));
      List<String> ins = new ArrayList<>(), outs = new ArrayList<>();
      for (long j = 0; j < nIn.getValue(); j++) {
        ins.add(l.tern_model_node_input(m, at, new TernLibrary.SizeT(j)));
      }
      for (long j = 0; j < nOut.getValue(); j++) {
        outs.add(l.tern_model_node_output(m, at, new TernLibrary.SizeT(j)));
      }
      out.add(new Node(Tern.str(name.getValue()), Tern.str(op.getValue()),
          Tern.str(domain.getValue()), ins, outs));
    }
    return out;
  }

  /** The main graph's values: inputs, weights, intermediates, outputs. */
  public List<GraphValue> values() {
    TernLibrary l = Tern.lib();
    Pointer m = handle();
    long n = l.tern_model_value_count(m).longValue();
    List<GraphValue> out = new ArrayList<>();
    for (long i = 0; i < n; i++) {
      PointerByReference name = new PointerByReference(), shape = new PointerByReference();
      IntByReference dtype = new IntByReference(), hasShape = new IntByReference();
      IntByReference constant = new IntByReference();
      TernLibrary.SizeTByReference rank = new TernLibrary.SizeTByReference();
      Tern.check(l.tern_model_value_info(m, new TernLibrary.SizeT(i), name, dtype, hasShape, rank,
          shape, constant));
      out.add(new GraphValue(Tern.str(name.getValue()), DType.of(dtype.getValue()),
          hasShape.getValue() != 0 ? dims(rank, shape) : null, constant.getValue() != 0));
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
