package tern;

import com.sun.jna.Function;
import com.sun.jna.Native;
import com.sun.jna.Pointer;
import com.sun.jna.ptr.PointerByReference;
import java.nio.ByteBuffer;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/** A tensor that owns its storage (tern_tensor). Java arrays are copied in and out. Not
 * synchronised: use one thread at a time. */
public final class Tensor implements AutoCloseable {
  private Pointer handle;

  Tensor(Pointer handle) {
    this.handle = handle;
  }

  /** A zero-filled tensor. */
  public static Tensor zeros(DType dtype, long... shape) {
    PointerByReference out = new PointerByReference();
    Tern.check(Tern.lib().tern_tensor_create(
        dtype.code, shape, new TernLibrary.SizeT(shape.length), out));
    return new Tensor(out.getValue());
  }

  /** Owned, zero-filled storage on device ("cpu", "cuda", "cuda:1"). */
  public static Tensor onDevice(DType dtype, String device, long... shape) {
    PointerByReference out = new PointerByReference();
    Tern.check(Tern.lib().tern_tensor_create_on_device(
        dtype.code, shape, new TernLibrary.SizeT(shape.length), device, out));
    return new Tensor(out.getValue());
  }

  /** Reads an ONNX TensorProto file (input_0.pb of an ONNX test data set). */
  public static Tensor readOnnxFile(String path) {
    PointerByReference out = new PointerByReference();
    Tern.check(Tern.lib().tern_tensor_read_onnx_file(path, out));
    return new Tensor(out.getValue());
  }

  // Direct buffers lent to tensors, by id, until the library's deleter gives them back (a tensor's
  // data may outlive its Java object: values share it).
  private static final Map<Long, ByteBuffer> LENT = new ConcurrentHashMap<>();
  private static final AtomicLong NEXT_ID = new AtomicLong(1);
  private static final TernLibrary.Deleter RELEASE =
      (data, ctx) -> LENT.remove(Pointer.nativeValue(ctx));

  /** A tensor over a direct buffer, without a copy: the buffer is kept alive until the library
   * lets go of the data (the tensor and every value sharing it are closed). Its byte order must
   * be the platform's (ByteOrder.nativeOrder()); its capacity at least the tensor's size. */
  public static Tensor wrap(DType dtype, ByteBuffer direct, long... shape) {
    if (!direct.isDirect()) {
      throw new TernException(Status.INVALID_ARGUMENT, "wrap needs a direct ByteBuffer");
    }
    long id = NEXT_ID.getAndIncrement();
    LENT.put(id, direct);
    PointerByReference out = new PointerByReference();
    int st = Tern.lib().tern_tensor_create_from_data(dtype.code, shape,
        new TernLibrary.SizeT(shape.length), Native.getDirectBufferPointer(direct),
        new TernLibrary.SizeT(direct.capacity()), RELEASE, new Pointer(id), out);
    if (st != 0) LENT.remove(id);  // on failure the deleter is not called
    Tern.check(st);
    return new Tensor(out.getValue());
  }

  /** How many wrapped buffers the library still holds (for tests). */
  static int lentBuffers() {
    return LENT.size();
  }

  /** Where the data is: "cpu", "cuda:0", ... */
  public String device() {
    return Tern.lib().tern_tensor_device(handle());
  }

  /** Copies this tensor's elements into dst (same dtype and shape; any pair of devices). */
  public void copyTo(Tensor dst) {
    Tern.check(Tern.lib().tern_tensor_copy(handle(), dst.handle()));
  }

  /** A float32 tensor holding a copy of data (exactly the shape's element count). */
  public static Tensor fromFloats(long[] shape, float[] data) {
    Tensor t = sized(DType.FLOAT32, shape, data.length);
    if (data.length > 0) t.data().write(0, data, 0, data.length);
    return t;
  }

  /** An int64 tensor holding a copy of data. */
  public static Tensor fromLongs(long[] shape, long[] data) {
    Tensor t = sized(DType.INT64, shape, data.length);
    if (data.length > 0) t.data().write(0, data, 0, data.length);
    return t;
  }

  /** A zero-filled tensor whose shape must hold exactly `count` elements. */
  private static Tensor sized(DType dtype, long[] shape, int count) {
    Tensor t = zeros(dtype, shape);
    long need = t.byteSize() / dtype.bytes;
    if (need != count) {
      t.close();
      throw new TernException(Status.INVALID_ARGUMENT,
          "the shape holds " + need + " elements, the data has " + count);
    }
    return t;
  }

  Pointer handle() {
    if (handle == null) throw new IllegalStateException("the tensor is closed");
    return handle;
  }

  private Pointer data() {
    return Tern.lib().tern_tensor_data(handle());
  }

  public DType dtype() {
    return DType.of(Tern.lib().tern_tensor_dtype(handle()));
  }

  public long[] shape() {
    int rank = (int) Tern.lib().tern_tensor_rank(handle()).longValue();
    return rank == 0 ? new long[0] : Tern.lib().tern_tensor_shape(handle()).getLongArray(0, rank);
  }

  public long byteSize() {
    return Tern.lib().tern_tensor_byte_size(handle()).longValue();
  }

  /** A copy of the element bytes. */
  public byte[] bytes() {
    int n = (int) byteSize();
    return n == 0 ? new byte[0] : data().getByteArray(0, n);
  }

  /** A copy of the elements of a float32 tensor. */
  public float[] floats() {
    if (dtype() != DType.FLOAT32) {
      throw new TernException(Status.INVALID_ARGUMENT, "the tensor holds " + dtype() + ", not FLOAT32");
    }
    int n = (int) (byteSize() / 4);
    return n == 0 ? new float[0] : data().getFloatArray(0, n);
  }

  /** Exports the tensor as a DLPack 1.x managed tensor (a struct DLManagedTensorVersioned* for
   * C code and frameworks that read DLPack) sharing its memory, without a copy
   * (tern_tensor_to_dlpack). The memory stays alive, even after close(), until the receiver
   * calls the struct's deleter once (deleteDLPack does so). */
  public Pointer toDLPack() {
    PointerByReference out = new PointerByReference();
    Tern.check(Tern.lib().tern_tensor_to_dlpack(handle(), out));
    return out.getValue();
  }

  /** Takes a DLPack 1.x managed tensor without copying its memory (tern_tensor_from_dlpack): on
   * success the tensor owns it and calls its deleter once, when the tensor is closed and no run
   * uses it; on failure (a TernException) it stays the caller's. CPU memory in a dense
   * row-major layout only (else UNSUPPORTED saying why). */
  public static Tensor fromDLPack(Pointer managed) {
    PointerByReference out = new PointerByReference();
    Tern.check(Tern.lib().tern_tensor_from_dlpack(managed, out));
    return new Tensor(out.getValue());
  }

  /** Calls a DLPack managed tensor's deleter (at offset 16: after the version and manager_ctx):
   * for one that toDLPack gave and no consumer took. */
  public static void deleteDLPack(Pointer managed) {
    Pointer deleter = managed.getPointer(8 + Native.POINTER_SIZE);
    if (deleter != null) Function.getFunction(deleter).invokeVoid(new Object[] {managed});
  }

  /** Whether the tensor came from a DLPack tensor flagged read-only. */
  public boolean isReadOnly() {
    return Tern.lib().tern_tensor_is_read_only(handle()) != 0;
  }

  @Override
  public void close() {
    if (handle != null) {
      Tern.lib().tern_tensor_destroy(handle);
      handle = null;
    }
  }
}
