package io.warren.flink;

import io.warren.runner.PsTrainers;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.api.common.TaskInfo;
import org.apache.flink.runtime.execution.SuppressRestartsException;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.BoundedOneInput;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;

/**
 * The operator of {@link WarrenFlink#trainPS}: keeps its subtask's rows and, at the end of its
 * (bounded) input, runs the trainer on them as trainer {@code subtask index} (warren-runner's
 * {@link PsTrainers#run}: connect, train, leave; abort without leaving if the worker throws, so
 * that Flink's restart of the subtask goes on as the same trainer), then emits its result.
 *
 * <p>Cancellation: Flink cancels a task by interrupting its thread; the client's call then fails
 * and the client is aborted.
 *
 * @param <T> the rows
 * @param <R> the result
 */
final class PsTrainerOperator<T, R> extends AbstractStreamOperator<R>
    implements OneInputStreamOperator<T, R>, BoundedOneInput {
  private static final long serialVersionUID = 1L;

  private final PsTrainers trainers;
  private final int numTrainers;
  private final PsWorker<T, R> worker;
  private transient List<T> rows;

  PsTrainerOperator(PsTrainers trainers, int numTrainers, PsWorker<T, R> worker) {
    this.trainers = trainers;
    this.numTrainers = numTrainers;
    this.worker = worker;
  }

  @Override
  public void open() throws Exception {
    super.open();
    try {
      ClassLoading.check(PsTrainerOperator.class);
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
    List<T> mine = rows;
    rows = null;
    R result = trainers.run(index, ps -> worker.run(new PsContext(ps, index, attempt, numTrainers), mine));
    output.collect(new StreamRecord<>(result));
  }
}
