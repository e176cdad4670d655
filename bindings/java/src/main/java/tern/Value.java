package tern;

import com.sun.jna.Pointer;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.PointerByReference;

/** A tensor, a sequence of tensors or an optional (tern_value), for models whose inputs or
 * outputs are ONNX sequences or optionals ({@link Session#runValues}). Immutable; it shares the
 * tensors it was made from. Not synchronised: close it from one thread. */
public final class Value implements AutoCloseable {
  /** What a value is. */
  public enum Kind { TENSOR, SEQUENCE, OPTIONAL }

  private Pointer handle;

  Value(Pointer handle) {
    this.handle = handle;
  }

  Pointer handle() {
    if (handle == null) throw new IllegalStateException("the value is closed");
    return handle;
  }

  /** A value holding t (sharing its data). */
  public static Value of(Tensor t) {
    PointerByReference out = new PointerByReference();
    Tern.check(Tern.lib().tern_value_from_tensor(t.handle(), out));
    return new Value(out.getValue());
  }

  /** A sequence of the tensors (sharing their data), all of dtype elem. */
  public static Value sequence(DType elem, Tensor... items) {
    Pointer[] ptrs = new Pointer[items.length];
    for (int i = 0; i < items.length; ++i) ptrs[i] = items[i].handle();
    PointerByReference out = new PointerByReference();
    Tern.check(Tern.lib().tern_value_create_sequence(elem.code, ptrs.length == 0 ? null : ptrs,
        new TernLibrary.SizeT(ptrs.length), out));
    return new Value(out.getValue());
  }

  /** An optional holding v (a tensor or a sequence), or nothing when v is null. */
  public static Value optional(Value v) {
    PointerByReference out = new PointerByReference();
    Tern.check(Tern.lib().tern_value_create_optional(v == null ? null : v.handle(), out));
    return new Value(out.getValue());
  }

  public Kind kind() {
    IntByReference k = new IntByReference();
    Tern.check(Tern.lib().tern_value_get_kind(handle(), k));
    return k.getValue() == 1 ? Kind.SEQUENCE : k.getValue() == 2 ? Kind.OPTIONAL : Kind.TENSOR;
  }

  /** A tensor value's tensor (sharing its data); the caller closes it. */
  public Tensor tensor() {
    PointerByReference out = new PointerByReference();
    Tern.check(Tern.lib().tern_value_get_tensor(handle(), out));
    return new Tensor(out.getValue());
  }

  /** A sequence's length (0 for the other kinds). */
  public long length() {
    return Tern.lib().tern_value_sequence_length(handle()).longValue();
  }

  /** A sequence's element i (sharing its data); the caller closes it. */
  public Tensor at(long i) {
    PointerByReference out = new PointerByReference();
    Tern.check(Tern.lib().tern_value_sequence_at(handle(), new TernLibrary.SizeT(i), out));
    return new Tensor(out.getValue());
  }

  /** Whether an optional holds something. */
  public boolean hasValue() {
    return Tern.lib().tern_value_optional_has_value(handle()) == 1;
  }

  /** What an optional holds; the caller closes it. */
  public Value get() {
    PointerByReference out = new PointerByReference();
    Tern.check(Tern.lib().tern_value_optional_get(handle(), out));
    return new Value(out.getValue());
  }

  @Override
  public void close() {
    if (handle != null) {
      Tern.lib().tern_value_destroy(handle);
      handle = null;
    }
  }
}
