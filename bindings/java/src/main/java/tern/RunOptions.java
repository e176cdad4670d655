package tern;

import com.sun.jna.Pointer;
import com.sun.jna.ptr.PointerByReference;
import java.time.Duration;

/** Per-run options (tern_run_options): a deadline, and cancellation from any thread. Setters
 * return this, so they chain. Cancel is sticky, as ONNX Runtime's RunOptions terminate flag: runs
 * started with cancelled options fail at once until {@link #clearCancel}. */
public final class RunOptions implements AutoCloseable {
  // Guarded by this: cancel() may come from another thread at any time, close() among them.
  private Pointer handle;

  public RunOptions() {
    PointerByReference out = new PointerByReference();
    Tern.check(Tern.lib().tern_run_options_create(out));
    handle = out.getValue();
  }

  static Pointer handleOf(RunOptions options) {
    return options == null ? null : options.handle();
  }

  private synchronized Pointer handle() {
    if (handle == null) throw new IllegalStateException("the run options are closed");
    return handle;
  }

  /** Each run given these options must finish within {@code limit} of its start (rounded up to
   * whole milliseconds), else it throws with {@link Status#DEADLINE_EXCEEDED}; zero removes the
   * deadline. A negative one is refused ({@link Status#INVALID_ARGUMENT}). */
  public RunOptions deadline(Duration limit) {
    long ms = limit.isNegative() ? -1 : limit.plusNanos(999_999).toMillis();
    Tern.check(Tern.lib().tern_run_options_set_deadline_ms(handle(), ms));
    return this;
  }

  /** Overrides a run-scoped flag (the sdp.* flags, "onednn.verbose", "blas.verbose") for the
   * runs given these options. */
  public RunOptions flag(String name, String value) {
    Tern.check(Tern.lib().tern_run_options_set_flag(handle(), name, value));
    return this;
  }

  /** torch.nn.attention.sdpa_kernel: only these attention backends may run in the runs given
   * these options (none listed: none may). */
  public RunOptions sdpBackends(SdpBackend... backends) {
    int[] codes = new int[backends.length];
    for (int i = 0; i < backends.length; i++) codes[i] = backends[i].code;
    Tern.check(Tern.lib().tern_run_options_set_sdp_backends(handle(),
        codes.length == 0 ? null : codes, new TernLibrary.SizeT(codes.length)));
    return this;
  }

  /** Runs given these options return their outputs on device ("cpu", the default, "cuda:1"). */
  public RunOptions outputDevice(String device) {
    Tern.check(Tern.lib().tern_run_options_set_output_device(handle(), device));
    return this;
  }

  /** Stops the runs using these options (they throw with {@link Status#CANCELLED} within about
   * one node's time) and every later run with them until {@link #clearCancel}. Safe from any
   * thread; does nothing once the options are closed. */
  public synchronized void cancel() {
    if (handle != null) Tern.check(Tern.lib().tern_run_options_cancel(handle));
  }

  /** Lets runs started afterwards with these options go on. */
  public synchronized void clearCancel() {
    if (handle != null) Tern.check(Tern.lib().tern_run_options_clear_cancel(handle));
  }

  /** Releases the options; no run may be using them. */
  @Override
  public synchronized void close() {
    if (handle != null) {
      Tern.lib().tern_run_options_destroy(handle);
      handle = null;
    }
  }
}
