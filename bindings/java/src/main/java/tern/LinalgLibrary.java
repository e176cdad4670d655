package tern;

/** Linear-algebra library for CUDA (tern_linalg_library; no effect yet, see c_api.h). */
public enum LinalgLibrary {
  DEFAULT,
  CUSOLVER,
  MAGMA;

  static LinalgLibrary of(int code) {
    return code >= 0 && code < values().length ? values()[code] : DEFAULT;
  }
}
