package io.warren.runner;

import io.warren.Communicator;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Aborts a task's communicator when the engine kills the task without interrupting its thread.
 *
 * <p>An engine may merely mark a task killed (Spark's {@code TaskContext.isInterrupted} after a
 * {@code cancelJobGroup} without {@code interruptOnCancel}), which a thread blocked in a
 * collective call never looks at. A daemon thread polls the mark every {@link #POLL_MS} and
 * calls {@code Communicator.abort()} (safe from another thread: the blocked call fails with
 * {@code CollectiveAbortedException} within milliseconds, and the peers see the worker leave).
 * With an interrupt, {@code Communicator}'s own interrupt watcher is faster; both may fire, {@code
 * abort()} is idempotent.
 */
public final class KillWatch {
  private static final Logger LOG = LoggerFactory.getLogger(KillWatch.class);

  /** How often a watch looks at the task's kill mark, in milliseconds. */
  public static final long POLL_MS = 100L;

  private final BooleanSupplier killed;
  private final Communicator comm;
  private final String task;
  private volatile boolean stopped;
  private final Thread thread;

  private KillWatch(BooleanSupplier killed, Communicator comm, String task) {
    this.killed = killed;
    this.comm = comm;
    this.task = task;
    this.thread = new Thread(this::loop, "warren-kill-watch-" + task);
    thread.setDaemon(true);
  }

  /**
   * Watches {@code killed} until {@link #stop()}; stop it before closing {@code comm}.
   *
   * @param killed whether the engine has killed the task
   * @param comm the task's communicator
   * @param task the task, for the thread's name and the log
   * @return the running watch
   */
  public static KillWatch start(BooleanSupplier killed, Communicator comm, String task) {
    KillWatch w = new KillWatch(killed, comm, task);
    w.thread.start();
    return w;
  }

  private void loop() {
    try {
      while (!stopped && !killed.getAsBoolean()) {
        Thread.sleep(POLL_MS);
      }
      if (!stopped) {
        LOG.info("task {} was killed: aborting its Warren calls", task);
        comm.abort();
      }
    } catch (InterruptedException e) {
      // stopped
    }
  }

  /** Stops watching (waits up to 1 s for the thread to end). Idempotent. */
  public void stop() {
    stopped = true;
    thread.interrupt();
    try {
      thread.join(1000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
