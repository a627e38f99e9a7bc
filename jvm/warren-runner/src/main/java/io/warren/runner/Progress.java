package io.warren.runner;

import io.warren.Communicator;
import java.util.Locale;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reports a worker's progress to the job's log: every interval, a daemon thread sends (with
 * {@code Communicator.print}, through the tracker, which logs it at INFO under {@code
 * io.warren.native.warren.tracker.server}) a line
 *
 * <pre>
 * [rank 0] progress: job 3, checkpoint version 7, recoveries 1, 12.4 s; allreduce(tree): n=9 p50=2100us ...
 * </pre>
 *
 * with the checkpoint version, the recoveries this worker took part in and the latency
 * percentiles of its collective calls ({@code Communicator.stats}). The runner starts one for
 * rank 0.
 *
 * <p>The calls on a communicator are serialised, so a line is sent between two of the worker's
 * collective calls (never during one): a worker blocked in a long call delays the next line
 * until the call returns.
 */
public final class Progress {
  private static final Logger LOG = LoggerFactory.getLogger(Progress.class);

  private final Communicator comm;
  private final String label;
  private final long intervalMs;
  private final long started = System.nanoTime();
  private volatile boolean stopped;
  /** What the reporter waits on between lines; {@link #stop} wakes it. */
  private final Object wakeUp = new Object();
  private final Thread thread;

  private Progress(Communicator comm, String label, long intervalMs) {
    this.comm = comm;
    this.label = label;
    this.intervalMs = intervalMs;
    this.thread = new Thread(this::loop, "warren-progress-" + label);
    thread.setDaemon(true);
  }

  /**
   * Starts a reporter thread for {@code comm}.
   *
   * @param comm the worker's communicator
   * @param label the job's label in the lines
   * @param intervalS seconds between lines (more than 0)
   * @return the running reporter; stop it before closing {@code comm}
   */
  public static Progress start(Communicator comm, String label, double intervalS) {
    if (!(intervalS > 0)) {
      throw new IllegalArgumentException("the progress interval must be positive, got " + intervalS);
    }
    Progress p = new Progress(comm, label, Math.max(1L, (long) (intervalS * 1000)));
    p.thread.start();
    return p;
  }

  private void loop() {
    try {
      while (!stopped) {
        long until = System.nanoTime() + intervalMs * 1_000_000L;
        synchronized (wakeUp) {
          for (long left = intervalMs; !stopped && left > 0; left = (until - System.nanoTime()) / 1_000_000L) {
            wakeUp.wait(left);
          }
        }
        if (!stopped) {
          report(comm, label, "progress", started);
        }
      }
    } catch (InterruptedException e) {
      // interrupted from outside: no more lines
    } catch (RuntimeException e) {
      LOG.warn("warren job {}: progress reports stopped: {}", label, e.toString());
    }
  }

  /**
   * Stops the thread, waiting for a line being sent (up to 5 s). The thread is woken, never
   * interrupted: an interrupt while it sends a line through the communicator would cancel the
   * communicator (see {@link Communicator}), failing a worker whose work had succeeded.
   */
  public void stop() {
    stopped = true;
    synchronized (wakeUp) {
      wakeUp.notifyAll();
    }
    try {
      thread.join(5000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /**
   * Stops the thread and sends the last line ({@code finished}), logging rather than throwing
   * if it cannot be sent.
   */
  public void finish() {
    stop();
    try {
      report(comm, label, "finished", started);
    } catch (RuntimeException e) {
      LOG.warn("warren job {}: the last progress line was not sent: {}", label, e.toString());
    }
  }

  /**
   * The text of one line (without the {@code [rank r]} prefix the tracker adds).
   *
   * @param what {@code progress} or {@code finished}
   * @param label the job's label
   * @param version the checkpoint version
   * @param recoveries recoveries the worker took part in
   * @param seconds seconds since the worker started
   * @param stats {@code Communicator.stats()}
   * @return the line
   */
  public static String line(
      String what, String label, int version, long recoveries, double seconds, String stats) {
    return String.format(
            Locale.ROOT,
            "%s: job %s, checkpoint version %d, recoveries %d, %.1f s; ",
            what,
            label,
            version,
            recoveries,
            seconds)
        + (stats.isEmpty() ? "no collective calls yet" : stats);
  }

  /**
   * Sends one line about {@code comm} to the tracker (one atomic look at the communicator).
   *
   * @param comm the communicator
   * @param label the job's label
   * @param what {@code progress} or {@code finished}
   * @param started {@code System.nanoTime()} when the worker started
   */
  public static void report(Communicator comm, String label, String what, long started) {
    synchronized (comm) {
      if (!comm.isClosed()) {
        double s = (System.nanoTime() - started) / 1e9;
        comm.print(line(what, label, comm.version(), comm.recoveries(), s, comm.stats()));
      }
    }
  }
}
