package io.warren;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.LongFunction;
import java.util.function.LongSupplier;

/**
 * Turns a {@link Thread#interrupt()} of a thread blocked in a native collective into a
 * cancellation of that call.
 *
 * <p>A thread inside a JNI call does not notice an interrupt, and the JDK offers no public hook
 * for one. So one daemon thread per JVM ({@code warren-interrupt-watcher}) looks every {@value
 * #POLL_MS} ms at the threads that are inside a native call of a live {@link Target} and
 * cancels the call of any that is interrupted. The calling thread pays two volatile writes per
 * call (its target's caller field); the native wait loop stays free of JVM calls. The watcher
 * runs only while a target is registered (an open communicator, a join in progress) and ends
 * when the last one goes, so an executor with no open communicator keeps no Warren thread.
 *
 * <p>Public only for Warren's other packages ({@code io.warren.ps}: the parameter-server
 * client's calls are cancelled the same way); not an API.
 */
public final class InterruptWatcher {
  /** How often the watcher looks at the callers. */
  static final long POLL_MS = 20;

  /** Something whose native call can be cancelled. */
  public interface Target {
    /**
     * The thread now inside a native call.
     *
     * @return the thread, or null between calls
     */
    Thread caller();

    /**
     * Cancels the native call of {@code caller}, which was interrupted. Must not block.
     *
     * @param caller the interrupted thread
     */
    void interrupted(Thread caller);
  }

  private static final Set<Target> TARGETS = ConcurrentHashMap.newKeySet();
  private static Thread watcher; // guarded by InterruptWatcher.class

  private InterruptWatcher() {}

  /**
   * Watches {@code t} until {@link #remove(Target)}.
   *
   * @param t the target
   */
  public static void add(Target t) {
    TARGETS.add(t);
    synchronized (InterruptWatcher.class) {
      if (watcher == null) {
        watcher = new Thread(InterruptWatcher::loop, "warren-interrupt-watcher");
        watcher.setDaemon(true);
        watcher.start();
      }
    }
  }

  /**
   * Stops watching {@code t}.
   *
   * @param t the target
   */
  public static void remove(Target t) {
    TARGETS.remove(t);
  }

  /** How many targets are watched (for tests). */
  static int targets() {
    return TARGETS.size();
  }

  /** Whether the watcher thread is running (for tests). */
  static synchronized boolean running() {
    return watcher != null;
  }

  private static void loop() {
    while (true) {
      synchronized (InterruptWatcher.class) {
        if (TARGETS.isEmpty()) {
          watcher = null;
          return;
        }
      }
      for (Target t : TARGETS) {
        Thread c = t.caller();
        if (c != null && c.isInterrupted()) {
          try {
            t.interrupted(c);
          } catch (RuntimeException e) {
            // A target closed meanwhile; nothing to cancel.
          }
        }
      }
      try {
        Thread.sleep(POLL_MS);
      } catch (InterruptedException e) {
        // Only the watcher's own interrupt: keep watching while there are targets.
      }
    }
  }

  /**
   * Runs {@code call}, a native call that makes something (joins a job, connects a client) and
   * can be cancelled by {@code cancel}, watching the current thread: an interrupt before or
   * during the call cancels it, and one that lands after it returned (before the watch closed,
   * which leaves its result's cancel handle cancelled, so every later call would fail) has
   * {@code release} undo the result. Either way the thrown exception is {@code interrupted}'s,
   * and the thread's interrupt status is for {@code interrupted} to restore.
   *
   * @param cancel cancels the call (must not block)
   * @param call the native call; returns a handle, throws {@link CollectiveAbortedException}
   *     when cancelled
   * @param release undoes a handle the call returned before a late interrupt, and says why
   * @param interrupted the exception to throw for an interrupt, from its cause
   * @param afterCall tests only: runs right after the call returned, the watch still open;
   *     null for none
   * @return the handle
   */
  public static long openInterruptibly(
      Runnable cancel,
      LongSupplier call,
      LongFunction<CollectiveAbortedException> release,
      Function<CollectiveAbortedException, ? extends RuntimeException> interrupted,
      Consumer<Call> afterCall) {
    Thread me = Thread.currentThread();
    long h;
    Call watch = new Call(me, cancel);
    try (watch) {
      if (me.isInterrupted()) {
        watch.interrupted(me);
      }
      try {
        h = call.getAsLong();
      } catch (CollectiveAbortedException e) {
        if (watch.fired()) {
          throw interrupted.apply(e);
        }
        throw e;
      }
      if (afterCall != null) {
        afterCall.accept(watch);
      }
    } // the watch never fires after its close
    if (watch.fired()) {
      throw interrupted.apply(release.apply(h));
    }
    return h;
  }

  /**
   * A watch on one thread for the length of one native call that has no communicator yet
   * (joining): cancels through {@code cancel} until {@link #close()}, after which it never calls
   * it again.
   */
  public static final class Call implements Target, AutoCloseable {
    private final Thread thread;
    private final Runnable cancel;
    private boolean active = true; // guarded by this
    private volatile boolean fired;

    /**
     * Watches {@code thread} until {@link #close()}.
     *
     * @param thread the thread about to make the native call
     * @param cancel cancels that call (must not block)
     */
    public Call(Thread thread, Runnable cancel) {
      this.thread = thread;
      this.cancel = cancel;
      add(this);
    }

    @Override
    public Thread caller() {
      return thread;
    }

    @Override
    public synchronized void interrupted(Thread caller) {
      if (active && !fired) {
        fired = true;
        cancel.run();
      }
    }

    /**
     * Whether the call was cancelled because its thread was interrupted.
     *
     * @return true once cancelled
     */
    public boolean fired() {
      return fired;
    }

    @Override
    public void close() {
      synchronized (this) {
        active = false;
      }
      remove(this);
    }
  }
}
