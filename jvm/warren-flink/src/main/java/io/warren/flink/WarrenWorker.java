package io.warren.flink;

import java.io.Serializable;
import java.util.List;

/**
 * The work of one Warren worker: a Flink subtask's rows in, one result out. Shipped to the
 * TaskManagers, so it must be serializable (a lambda of a serializable interface is).
 *
 * @param <T> the rows
 * @param <R> the result
 */
@FunctionalInterface
public interface WarrenWorker<T, R> extends Serializable {
  /**
   * Runs the worker. For bit-identical recovery it must be deterministic given its rows in their
   * order; resume from {@code ctx.communicator().loadCheckpoint()}.
   *
   * @param ctx the worker's identity and communicator (do not close it)
   * @param rows every row of this subtask's input, in arrival order
   * @return the worker's result, emitted downstream
   * @throws Exception anything: the subtask fails, its communicator is aborted and Flink's
   *     restart strategy decides what happens next
   */
  R run(WarrenContext ctx, List<T> rows) throws Exception;
}
