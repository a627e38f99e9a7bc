package io.warren.runner;

import io.warren.Communicator;
import java.util.Optional;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Watches a task from beside its thread: aborts its communicator when the engine kills the task
 * without interrupting its thread, and tells the engine when the tracker fenced the worker.
 *
 * <p>An engine may merely mark a task killed (Spark's {@code TaskContext.isInterrupted} after a
 * {@code cancelJobGroup} without {@code interruptOnCancel}), which a thread blocked in a
 * collective call never looks at. A daemon thread polls the mark every {@link #POLL_MS} and
 * calls {@code Communicator.abort()} (safe from another thread: the blocked call fails with
 * {@code CollectiveAbortedException} within milliseconds, and the peers see the worker leave).
 * With an interrupt, {@code Communicator}'s own interrupt watcher is faster; both may fire, {@code
 * abort()} is idempotent.
 *
 * <p>While a task joins, there is no communicator to abort yet: {@link #whileJoining} watches the
 * kill mark for the join and interrupts the joining thread, which cancels the join ({@code
 * Communicator.create} is interruptible). A re-run that the tracker holds, or one retrying a
 * tracker that has stopped, would otherwise keep its slot until {@code WARREN_CONNECT_TIMEOUT_S}.
 *
 * <p>A fenced worker (see {@link Communicator#fenced()}) has been replaced in the job: its calls
 * fail with {@code WorkerFencedException}, but a thread busy outside Warren's calls (its own
 * computation, a hung read) would only find out at its next call. The same thread polls {@code
 * fenced()} and hands the reason to the engine's {@code onFenced}, which fails the task at once
 * (Flink: {@code Environment.failExternally}), so that the engine runs it again.
 */
public final class KillWatch {
  private static final Logger LOG = LoggerFactory.getLogger(KillWatch.class);

  /** How often a watch looks at the task's kill mark and fence, in milliseconds. */
  public static final long POLL_MS = 100L;

  private final BooleanSupplier killed;
  private final Consumer<String> onFenced;
  private final Communicator comm;
  private final Thread joiner;
  private final String task;
  private volatile boolean stopped;
  private final Thread thread;

  private KillWatch(
      BooleanSupplier killed, Consumer<String> onFenced, Communicator comm, Thread joiner, String task) {
    this.killed = killed;
    this.onFenced = onFenced;
    this.comm = comm;
    this.joiner = joiner;
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
    return start(killed, null, comm, task);
  }

  /**
   * Watches {@code killed} and the worker's fence until {@link #stop()}; stop it before closing
   * {@code comm}.
   *
   * @param killed whether the engine has killed the task (null: not watched)
   * @param onFenced told the fence's reason once, when the tracker fenced the worker (null: not
   *     watched); it should fail the task without blocking
   * @param comm the task's communicator
   * @param task the task, for the thread's name and the log
   * @return the running watch
   */
  public static KillWatch start(
      BooleanSupplier killed, Consumer<String> onFenced, Communicator comm, String task) {
    KillWatch w = new KillWatch(killed, onFenced, comm, null, task);
    w.thread.start();
    return w;
  }

  /**
   * Watches {@code killed} while the calling thread joins the job: interrupts the thread when
   * the engine kills the task, so that {@code Communicator.create} throws {@code
   * CollectiveInterruptedException} within about a {@link #POLL_MS} instead of waiting for the
   * tracker. Stop it once the join returned.
   *
   * @param killed whether the engine has killed the task
   * @param task the task, for the thread's name and the log
   * @return the running watch
   */
  public static KillWatch whileJoining(BooleanSupplier killed, String task) {
    KillWatch w = new KillWatch(killed, null, null, Thread.currentThread(), task);
    w.thread.start();
    return w;
  }

  private void loop() {
    try {
      while (!stopped) {
        if (killed != null && killed.getAsBoolean()) {
          if (comm != null) {
            LOG.info("task {} was killed: aborting its Warren calls", task);
            comm.abort();
          } else if (!stopped) {
            LOG.info("task {} was killed while joining the job: interrupting the join", task);
            joiner.interrupt();
          }
          return;
        }
        Optional<String> fence = onFenced == null || comm == null ? Optional.empty() : comm.fenced();
        if (fence.isPresent()) {
          if (!stopped) {
            LOG.warn("task {} was fenced: failing it so that it runs again ({})", task, fence.get());
            onFenced.accept(fence.get());
          }
          return;
        }
        Thread.sleep(POLL_MS);
      }
    } catch (InterruptedException e) {
      // stopped
    } catch (RuntimeException e) {
      LOG.warn("task {}: the kill and fence watch stopped", task, e);
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
