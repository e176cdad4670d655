package tern;

/** BLAS library for CUDA matmuls (tern_blas_library; torch.backends.cuda.preferred_blas_library). */
public enum BlasLibrary {
  DEFAULT,
  CUBLAS,
  CUBLASLT;

  static BlasLibrary of(int code) {
    return code >= 0 && code < values().length ? values()[code] : DEFAULT;
  }
}
