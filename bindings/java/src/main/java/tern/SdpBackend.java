package tern;

/** Scaled-dot-product attention backends (tern_sdp_backend; torch.nn.attention.SDPBackend). */
public enum SdpBackend {
  MATH(0),
  FLASH(1),
  MEM_EFFICIENT(2),
  CUDNN(3);

  public final int code;

  SdpBackend(int code) {
    this.code = code;
  }
}
