package io.warren.examples.flink;

import io.warren.flink.WarrenContext;
import java.io.Serializable;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * Where a harness reaches into the worker loop of {@link LogisticRegression}: {@link Faults}
 * injects failures and paces the loop through it for the tests and demos. Every call does
 * nothing by default; a job without a harness never needs one.
 */
public interface Hooks extends Serializable {
  /** Hooks that do nothing. */
  Hooks NONE = new Hooks() {};

  /**
   * Before the job is submitted to {@code env}.
   *
   * @param env the environment
   * @throws IllegalArgumentException if the hooks cannot work there
   */
  default void beforeSubmit(StreamExecutionEnvironment env) {}

  /**
   * At the start of iteration {@code it}, before its pass over the rows.
   *
   * @param ctx the worker
   * @param it the iteration
   * @throws Exception to fail the worker
   */
  default void beforeIteration(WarrenContext ctx, int it) throws Exception {}

  /**
   * After iteration {@code it}'s checkpoint.
   *
   * @param ctx the worker
   * @param it the iteration
   * @throws InterruptedException if interrupted while pausing
   */
  default void afterCheckpoint(WarrenContext ctx, int it) throws InterruptedException {}
}
