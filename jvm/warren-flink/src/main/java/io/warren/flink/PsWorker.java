package io.warren.flink;

import java.io.Serializable;
import java.util.List;

/**
 * The work of one parameter-server trainer of {@link WarrenFlink#trainPS}: a Flink subtask's rows
 * in, one result out. Shipped to the TaskManagers, so it must be serializable (a lambda of a
 * serializable interface is).
 *
 * @param <T> the rows
 * @param <R> the result
 */
@FunctionalInterface
public interface PsWorker<T, R> extends Serializable {
  /**
   * Trains: defines the job ({@code ctx.client().define(job)}, the same on every trainer), then
   * pulls and pushes from {@code ctx.client().step()} on (a restarted subtask resumes there).
   *
   * @param ctx the trainer's identity and client (do not close it)
   * @param rows every row of this subtask's input, in arrival order
   * @return the trainer's result, emitted downstream
   * @throws Exception anything: the subtask fails, its client is aborted without leaving the
   *     job, and Flink's restart strategy decides what happens next
   */
  R run(PsContext ctx, List<T> rows) throws Exception;
}
