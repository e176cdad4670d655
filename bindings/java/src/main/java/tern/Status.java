package tern;

/** tern_status codes other than TERN_OK. */
public enum Status {
  INVALID_ARGUMENT(1),
  INVALID_MODEL(2),
  UNSUPPORTED(3),
  BACKEND_UNAVAILABLE(4),
  OUT_OF_MEMORY(5),
  IO(6),
  INTERNAL(7),
  /** The run's {@link RunOptions} were cancelled. */
  CANCELLED(8),
  /** The run passed its {@link RunOptions#deadline}. */
  DEADLINE_EXCEEDED(9),
  /** A code this version of the binding does not know. */
  UNKNOWN(-1);

  public final int code;

  Status(int code) {
    this.code = code;
  }

  public static Status of(int code) {
    for (Status s : values()) {
      if (s.code == code) return s;
    }
    return UNKNOWN;
  }
}
