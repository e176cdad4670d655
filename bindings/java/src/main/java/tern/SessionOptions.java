package tern;

import com.sun.jna.Pointer;
import com.sun.jna.ptr.PointerByReference;

/** Options for {@link Session} (tern_session_options). Setters return this, so they chain. */
public final class SessionOptions implements AutoCloseable {
  private Pointer handle;

  public SessionOptions() {
    PointerByReference out = new PointerByReference();
    Tern.check(Tern.lib().tern_session_options_create(out));
    handle = out.getValue();
  }

  Pointer handle() {
    if (handle == null) throw new IllegalStateException("the options are closed");
    return handle;
  }

  /** Ordered backend preference, "cuda,cpu". */
  public SessionOptions backends(String list) {
    Tern.check(Tern.lib().tern_session_options_set_backends(handle(), list));
    return this;
  }

  /** Intra-op threads for the session (0: the process value). */
  public SessionOptions numThreads(int n) {
    Tern.check(Tern.lib().tern_session_options_set_num_threads(handle(), n));
    return this;
  }

  /** Inter-op threads for the session (0: the process value). */
  public SessionOptions numInteropThreads(int n) {
    Tern.check(Tern.lib().tern_session_options_set_num_interop_threads(handle(), n));
    return this;
  }

  /** A limit on what the session allocates (0: none). */
  public SessionOptions maxMemoryBytes(long bytes) {
    Tern.check(Tern.lib().tern_session_options_set_max_memory_bytes(handle(), bytes));
    return this;
  }

  /** Overrides a session- or run-scoped flag for this session alone. */
  public SessionOptions flag(String name, String value) {
    Tern.check(Tern.lib().tern_session_options_set_flag(handle(), name, value));
    return this;
  }

  /** false: run only on the listed backends ("cpu" is not appended); a node none of them runs
   * fails the session instead of falling back to the CPU. Default true. */
  public SessionOptions cpuFallback(boolean enabled) {
    Tern.check(Tern.lib().tern_session_options_set_cpu_fallback(handle(), enabled ? 1 : 0));
    return this;
  }

  /** How many bytes of plans (one per set of input shapes) the session keeps (default 4 MiB). */
  public SessionOptions planCacheBytes(long bytes) {
    Tern.check(Tern.lib().tern_session_options_set_plan_cache_bytes(handle(), bytes));
    return this;
  }

  /** Records one event per node of every run; {@link Session#endProfiling} writes them to path as
   * a Chrome trace. null or "" turns profiling off. */
  public SessionOptions enableProfiling(String path) {
    Tern.check(Tern.lib().tern_session_options_enable_profiling(handle(), path));
    return this;
  }

  @Override
  public void close() {
    if (handle != null) {
      Tern.lib().tern_session_options_destroy(handle);
      handle = null;
    }
  }
}
