package tern;

/** Verbose levels (tern_verbose_level) of {@link Tern#setOnednnVerbose} and
 * {@link Tern#setBlasVerbose}. */
public enum VerboseLevel {
  OFF(0),
  /** Each primitive (GEMM) execution. */
  ON(1),
  /** Creation too (oneDNN only). */
  ON_CREATION(2);

  public final int code;

  VerboseLevel(int code) {
    this.code = code;
  }
}
