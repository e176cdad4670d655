package tern;

/** Element types; the codes are ONNX's TensorProto.DataType numbers. */
public enum DType {
  FLOAT32(1, 4),
  UINT8(2, 1),
  INT8(3, 1),
  UINT16(4, 2),
  INT16(5, 2),
  INT32(6, 4),
  INT64(7, 8),
  STRING(8, 0),
  BOOL(9, 1),
  FLOAT16(10, 2),
  FLOAT64(11, 8),
  UINT32(12, 4),
  UINT64(13, 8),
  BFLOAT16(16, 2),
  /** A code this version of the binding does not know. */
  UNKNOWN(-1, 0);

  public final int code;
  public final int bytes;

  DType(int code, int bytes) {
    this.code = code;
    this.bytes = bytes;
  }

  public static DType of(int code) {
    for (DType d : values()) {
      if (d.code == code) return d;
    }
    return UNKNOWN;
  }
}
