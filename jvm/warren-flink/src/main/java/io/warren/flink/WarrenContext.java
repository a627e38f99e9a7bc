package io.warren.flink;

import io.warren.Communicator;
import io.warren.runner.WorkerRun;
import java.util.Map;
import java.util.Objects;
import org.apache.flink.api.common.functions.RuntimeContext;

/**
 * One Warren worker inside a Flink subtask: its identity (task id = the subtask index, attempt
 * = Flink's attempt number of the subtask) and its {@link Communicator}.
 *
 * <p>{@link WarrenFlink#train} hands one to its {@link WarrenWorker}. A user's own {@code
 * RichFunction} gets one with {@link #of(RuntimeContext)} after {@link WarrenFlink#prepare}:
 *
 * <pre>{@code
 * public void open(OpenContext c) { warren = WarrenContext.of(getRuntimeContext()); }
 * // ... work with warren.communicator(); when the work is done: warren.finish();
 * public void close() { warren.close(); } // aborts unless finish() was called
 * }</pre>
 */
public final class WarrenContext implements AutoCloseable {
  private final Communicator comm;
  private final int taskId;
  private final int attempt;
  private final int numWorkers;
  private final boolean owned;
  private final AutoCloseable stage;

  /** A worker whose communicator the caller closes or aborts ({@link WarrenFlink#train}'s). */
  WarrenContext(Communicator comm, int taskId, int attempt, int numWorkers) {
    this(comm, taskId, attempt, numWorkers, false, null);
  }

  private WarrenContext(
      Communicator comm, int taskId, int attempt, int numWorkers, boolean owned, AutoCloseable stage) {
    this.comm = comm;
    this.taskId = taskId;
    this.attempt = attempt;
    this.numWorkers = numWorkers;
    this.owned = owned;
    this.stage = stage;
  }

  /**
   * Joins the Warren run that {@link WarrenFlink#prepare} set up for this job, as the worker of
   * this subtask. Call it in {@code open()} of a function whose parallelism is the run's number
   * of workers; call {@link #finish()} when the work is done and {@link #close()} in {@code
   * close()}.
   *
   * @param rc the function's runtime context
   * @return the joined worker
   * @throws WarrenFlinkException if the job has no prepared Warren run, or the subtask does not
   *     fit it (parallelism, attempts)
   */
  public static WarrenContext of(RuntimeContext rc) {
    Objects.requireNonNull(rc, "rc");
    RunConfig run = RunConfig.fromJobParameters(rc.getGlobalJobParameters());
    int task = rc.getTaskInfo().getIndexOfThisSubtask();
    int attempt = rc.getTaskInfo().getAttemptNumber();
    int parallelism = rc.getTaskInfo().getNumberOfParallelSubtasks();
    if (parallelism != run.numWorkers()) {
      throw new WarrenFlinkException(
          "WarrenContext.of: the function runs with parallelism "
              + parallelism
              + " but the Warren run has "
              + run.numWorkers()
              + " workers (WarrenFlink.prepare): set the function's parallelism to it",
          null);
    }
    ClassLoading.check(WarrenContext.class);
    Map<String, String> settings = WorkerRun.taskSettings(run.base(attempt), Integer.toString(task), attempt);
    RemoteCheckpoints.Stage stage = null;
    Communicator comm = null;
    try {
      if (run.remoteDir() != null) {
        stage = RemoteCheckpoints.stage(run);
        settings.put("WARREN_CHECKPOINT_DIR", stage.local());
      }
      comm = Communicator.create(settings);
      if (stage != null) {
        stage.setup().accept(comm);
      }
      return new WarrenContext(comm, task, attempt, run.numWorkers(), true, stage == null ? null : stage.cleanup());
    } catch (Exception e) {
      if (comm != null) {
        comm.abort();
      }
      if (stage != null) {
        closeQuietly(stage.cleanup());
      }
      if (e instanceof RuntimeException r) {
        throw r;
      }
      throw new WarrenFlinkException("WarrenContext.of: staging the remote checkpoints failed: " + e, e);
    }
  }

  private static void closeQuietly(AutoCloseable c) {
    try {
      c.close();
    } catch (Exception e) {
      // best effort
    }
  }

  /**
   * The worker's communicator.
   *
   * @return it (do not close it: {@link #finish()} or {@link #close()} does)
   */
  public Communicator communicator() {
    return comm;
  }

  /**
   * The worker's task id: its subtask index.
   *
   * @return a number in {@code [0, numWorkers())}
   */
  public int taskId() {
    return taskId;
  }

  /**
   * Flink's attempt number of this subtask: 0 at first, then one more at each restart.
   *
   * @return the attempt
   */
  public int attempt() {
    return attempt;
  }

  /**
   * The number of workers of the run.
   *
   * @return it
   */
  public int numWorkers() {
    return numWorkers;
  }

  /**
   * Leaves the run as finished (closes the communicator). Only for a context from {@link
   * #of(RuntimeContext)}.
   */
  public void finish() {
    if (owned) {
      comm.close();
      if (stage != null) {
        closeQuietly(stage);
      }
    }
  }

  /**
   * Leaves the run: aborts the communicator unless {@link #finish()} was called, so that the
   * subtask's next attempt can take over. Only for a context from {@link #of(RuntimeContext)}.
   */
  @Override
  public void close() {
    if (owned && !comm.isClosed()) {
      comm.abort();
    }
    if (owned && stage != null) {
      closeQuietly(stage);
    }
  }

  @Override
  public String toString() {
    return "WarrenContext[task " + taskId + ", attempt " + attempt + ", " + numWorkers + " workers]";
  }
}
