package tern;

/** A failed call: Tern's status and its message (tern_last_error, read on the calling thread). */
public class TernException extends RuntimeException {
  private static final long serialVersionUID = 1L;
  private final Status status;
  private final String ternMessage;

  public TernException(Status status, String message) {
    super("TERN_ERR_" + status.name() + ": " + message);
    this.status = status;
    this.ternMessage = message;
  }

  public Status status() {
    return status;
  }

  /** Tern's message, without the status. */
  public String ternMessage() {
    return ternMessage;
  }
}
