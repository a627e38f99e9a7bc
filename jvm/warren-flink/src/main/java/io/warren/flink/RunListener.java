package io.warren.flink;

import io.warren.TrackerException;
import io.warren.WarrenTimeoutException;
import io.warren.runner.JobPlan;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.JobListener;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The client side of one Warren run: claims the first job submitted after {@link
 * WarrenFlink#train}, watches its first tracker's rendezvous (a job whose workers cannot all
 * start, for want of slots, is cancelled with a clear error instead of waiting forever: Flink
 * deploys the regions it has slots for, and those workers would wait for the others), and
 * closes the trackers and removes the run's checkpoint directory (local or remote) when the job
 * ends.
 */
final class RunListener implements JobListener {
  private static final Logger LOG = LoggerFactory.getLogger(RunListener.class);

  private final JobPlan plan;
  private final int numWorkers;
  private final AtomicBoolean claimed = new AtomicBoolean();
  private final AtomicBoolean done = new AtomicBoolean();
  private volatile String failure;
  private volatile Thread watchdog;

  RunListener(JobPlan plan, int numWorkers) {
    this.plan = plan;
    this.numWorkers = numWorkers;
  }

  /**
   * Why the run was cancelled by Warren, if it was.
   *
   * @return the message, or null
   */
  String failure() {
    return failure;
  }

  @Override
  public void onJobSubmitted(JobClient client, Throwable error) {
    if (!claimed.compareAndSet(false, true)) {
      return;
    }
    if (client == null || error != null) {
      cleanUp();
      return;
    }
    Thread t = new Thread(() -> watch(client), "warren-flink-watchdog");
    t.setDaemon(true);
    watchdog = t;
    t.start();
    client.getJobExecutionResult().whenComplete((r, e) -> cleanUp());
  }

  @Override
  public void onJobExecuted(JobExecutionResult result, Throwable error) {
    if (claimed.get()) {
      cleanUp();
    }
  }

  /** Waits, a second at a time, for the first tracker's outcome; cancels on a failed rendezvous. */
  private void watch(JobClient client) {
    while (!done.get()) {
      try {
        plan.trackers().tracker(0).awaitCompletion(Duration.ofSeconds(1));
        return;
      } catch (WarrenTimeoutException e) {
        // not over yet
      } catch (TrackerException e) {
        String m = String.valueOf(e.getMessage());
        if (m.contains("rendezvous timed out") && !done.get()) {
          failure =
              "Warren needs "
                  + numWorkers
                  + " task slots running at once, but its workers did not all start in time ("
                  + m
                  + "): the workers wait for each other, so the cluster most likely has fewer free"
                  + " task slots than workers (or TaskManagers are still starting)."
                  + " Use fewer workers, more TaskManagers or taskmanager.numberOfTaskSlots, or a"
                  + " longer warren.rendezvousTimeout";
          LOG.error("{}: cancelling job {}", failure, client.getJobID());
          client.cancel();
        }
        return;
      } catch (RuntimeException e) {
        if (!done.get()) {
          LOG.warn("warren: watching the tracker stopped: {}", e.toString());
        }
        return;
      }
    }
  }

  private void cleanUp() {
    if (!done.compareAndSet(false, true)) {
      return;
    }
    Thread w = watchdog;
    if (w != null && w != Thread.currentThread()) {
      try {
        w.join(3000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    plan.close();
    try {
      plan.closeDirectory();
    } catch (RuntimeException e) {
      LOG.warn("warren: could not remove the run's checkpoint directory: {}", e.toString());
    }
  }
}
