package io.warren;

import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.LongFunction;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * How one of Warren's blocking objects ({@link Communicator}, {@code io.warren.ps.PsClient})
 * cancels its native calls: a native cancel handle that another thread may fire without the
 * object's lock, and the {@link InterruptWatcher} watch that turns {@link Thread#interrupt()}
 * of the thread inside a call into a cancel. Public for Warren's other packages; applications
 * cancel through the objects' {@code abort()} and through interrupts.
 *
 * <p>Life cycle: {@link #create()}, then {@link #open} makes the object (its native handle is
 * tied to this cancel handle through {@link #handle()}) and starts the watch, {@link #call} runs
 * each call, {@link #close()} ends the watch and frees the handle once the object is released.
 */
public final class CallCanceller implements AutoCloseable {
  /** The reason a call cancelled because its thread was interrupted gives. */
  public static final String INTERRUPTED = "the calling thread was interrupted";

  /** The native cancel handle; 0 once closed. Guarded by {@code this}, not the object's lock. */
  private long handle;
  /** The thread inside a native call, for the {@link InterruptWatcher}; null between calls. */
  private volatile Thread caller;
  /** Set once a call was cancelled because its thread was interrupted. */
  private volatile boolean interruptCancelled;

  private final InterruptWatcher.Target watched =
      new InterruptWatcher.Target() {
        @Override
        public Thread caller() {
          return caller;
        }

        @Override
        public void interrupted(Thread thread) {
          cancelForInterrupt();
        }
      };

  private CallCanceller(long handle) {
    this.handle = handle;
  }

  /**
   * A new canceller with its native cancel handle (loads the native library first).
   *
   * @return the canceller, not watched until {@link #open}
   */
  public static CallCanceller create() {
    NativeLoader.ensureLoaded();
    return new CallCanceller(Native.cancelCreate());
  }

  /**
   * The native cancel handle, for the native call that ties it to its object.
   *
   * @return the handle (0 once closed)
   */
  public synchronized long handle() {
    return handle;
  }

  /**
   * Makes the object with {@code open}, cancellable by interrupting the calling thread (see
   * {@link InterruptWatcher#openInterruptibly}), then watches the object's calls. If it throws,
   * the canceller is closed.
   *
   * @param open the native call that makes the object (joins, connects) and returns its handle
   * @param release releases an object made just as the thread was interrupted, returning the
   *     cause to throw
   * @param interrupted the exception an interrupted open throws
   * @param afterCall tests only: run right after {@code open} returned (null: nothing)
   * @return the object's native handle
   */
  public long open(
      LongSupplier open,
      LongFunction<CollectiveAbortedException> release,
      Function<CollectiveAbortedException, ? extends RuntimeException> interrupted,
      Consumer<InterruptWatcher.Call> afterCall) {
    long h;
    try {
      h = InterruptWatcher.openInterruptibly(() -> cancel(INTERRUPTED), open, release, interrupted, afterCall);
    } catch (RuntimeException | Error e) {
      close();
      throw e;
    }
    InterruptWatcher.add(watched);
    return h;
  }

  /**
   * Runs one native call that may block (the caller holds its object's lock). The {@link
   * InterruptWatcher} sees the calling thread for the length of the call: an interrupt cancels
   * it, as does an interrupt already pending when it starts, and the abort is thrown as {@code
   * interrupted} makes it.
   *
   * @param body the call
   * @param interrupted the exception of a call aborted by an interrupt
   * @param <T> its result
   * @return what {@code body} returned
   */
  public <T> T call(
      Supplier<T> body, Function<CollectiveAbortedException, ? extends RuntimeException> interrupted) {
    Thread me = Thread.currentThread();
    caller = me;
    try {
      if (me.isInterrupted()) {
        cancelForInterrupt();
      }
      return body.get();
    } catch (CollectiveAbortedException e) {
      if (interruptCancelled) {
        throw interrupted.apply(e);
      }
      throw e;
    } finally {
      caller = null;
    }
  }

  /**
   * Cancels the running and every later call of the object; never blocks on the object's lock.
   *
   * @param reason what the calls' {@code CollectiveAbortedException} says
   */
  public synchronized void cancel(String reason) {
    if (handle != 0) {
      Native.cancel(handle, reason);
    }
  }

  /**
   * Why the tracker fenced the communicator of this handle, if it did (see {@link
   * Communicator#fenced()}); never blocks on the object's lock.
   *
   * @return the reason, or null while not fenced and once closed
   */
  public synchronized String fenced() {
    return handle == 0 ? null : Native.cancelFenced(handle);
  }

  private void cancelForInterrupt() {
    interruptCancelled = true;
    cancel(INTERRUPTED);
  }

  /** Ends the watch and frees the native handle (once the object is released). Idempotent. */
  @Override
  public void close() {
    InterruptWatcher.remove(watched);
    synchronized (this) {
      long ch = handle;
      handle = 0;
      if (ch != 0) {
        Native.cancelFree(ch);
      }
    }
  }
}
