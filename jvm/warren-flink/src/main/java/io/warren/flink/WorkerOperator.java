package io.warren.flink;

import io.warren.TaskLeftException;
import io.warren.WorkerFencedException;
import io.warren.runner.WorkerRun;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.flink.api.common.TaskInfo;
import org.apache.flink.runtime.execution.SuppressRestartsException;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.BoundedOneInput;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;

/**
 * The operator of {@link WarrenFlink#train}: keeps its subtask's rows and, at the end of its
 * (bounded) input, runs the worker on them as Warren task {@code subtask index}, attempt {@code
 * Flink's attempt number}, then emits the worker's result.
 *
 * <p>Elastic runs ({@code warren.elastic=true}): a restarted subtask that the tracker tells is
 * not a member any more (the job ended without it, or it left) ends at once with no result.
 *
 * <p>Cancellation: Flink cancels a task by interrupting its thread, which aborts the worker's
 * collective call (the communicator's interrupt watcher); the worker then leaves as lost.
 *
 * <p>Fencing: when the tracker fences the worker (no heartbeat within {@code warren.peerTimeout})
 * while this TaskManager still runs (a network cut, a pause shorter than Flink's own heartbeat
 * timeout), the runner's watch fails the subtask at once through {@code
 * Environment.failExternally}, even if its thread is busy outside Warren's calls; Flink then
 * restarts only its failover region.
 *
 * @param <T> the rows
 * @param <R> the result
 */
final class WorkerOperator<T, R> extends AbstractStreamOperator<R>
    implements OneInputStreamOperator<T, R>, BoundedOneInput {
  private static final long serialVersionUID = 1L;
  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(WorkerOperator.class);

  private final RunConfig run;
  private final WarrenWorker<T, R> worker;
  private transient List<T> rows;

  WorkerOperator(RunConfig run, WarrenWorker<T, R> worker) {
    this.run = run;
    this.worker = worker;
  }

  @Override
  public void open() throws Exception {
    super.open();
    try {
      ClassLoading.check(WorkerOperator.class);
    } catch (WarrenFlinkException e) {
      // A set-up error: restarting would fail the same way.
      throw new SuppressRestartsException(e);
    }
    rows = new ArrayList<>();
  }

  @Override
  public void processElement(StreamRecord<T> element) {
    rows.add(element.getValue());
  }

  @Override
  public void endInput() throws Exception {
    TaskInfo task = getRuntimeContext().getTaskInfo();
    int index = task.getIndexOfThisSubtask();
    int attempt = task.getAttemptNumber();
    Map<String, String> settings = WorkerRun.taskSettings(run.base(attempt), Integer.toString(index), attempt);
    // A remote checkpoint directory: the native library writes a local staging directory, which
    // this task fills from the remote one and copies back after each durable checkpoint.
    RemoteCheckpoints.Stage stage = run.remoteDir() == null ? null : RemoteCheckpoints.stage(run);
    try {
      if (stage != null) {
        settings.put("WARREN_CHECKPOINT_DIR", stage.local());
      }
      WorkerRun.Options options =
          new WorkerRun.Options(
              null,
              run.label(),
              run.progressIntervalS(),
              stage == null ? null : stage.setup(),
              reason -> failFenced(index, attempt, reason));
      List<T> mine = rows;
      rows = null;
      R result;
      try {
        result =
            WorkerRun.run(
                settings,
                options,
                comm -> worker.run(new WarrenContext(comm, index, attempt, run.numWorkers()), mine));
      } catch (TaskLeftException e) {
        // Elastic: a restarted subtask of a worker that was dropped and that the job no longer
        // needs (it is over, or the worker left): no result, and no failure.
        LOG.info("Warren task {} (attempt {}) is not a member of the elastic job: {}", index, attempt, e.getMessage());
        return;
      }
      output.collect(new StreamRecord<>(result));
    } finally {
      if (stage != null) {
        stage.cleanup().close();
      }
    }
  }

  /**
   * Fails this subtask at once because the tracker fenced its worker (called from the runner's
   * watch thread, never blocks): Flink interrupts the task thread wherever it is, reports the
   * failure to the JobManager when the thread has ended, and its failover region is restarted.
   */
  private void failFenced(int index, int attempt, String reason) {
    getContainingTask()
        .getEnvironment()
        .failExternally(
            new WorkerFencedException(
                "Warren fenced the worker of subtask "
                    + index
                    + " (attempt "
                    + attempt
                    + "), which the job goes on without: "
                    + reason
                    + "; failing the subtask so that Flink restarts it"));
  }
}
