package io.warren;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

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
