package io.warren.examples.flink;

import io.warren.examples.data.ModelHash;
import java.io.Serializable;

/**
 * One worker's result of the {@link LogisticRegression} job (every worker ends with the same
 * weights).
 */
public final class WorkerResult implements Serializable {
  private static final long serialVersionUID = 1L;
  /** Task id (subtask index), Flink's attempt number of the subtask, and the Warren rank. */
  public int task, attempt, rank;
  /** Final weights (the last is the intercept), and the mean log loss before each step. */
  public double[] weights, losses;
  /** Training accuracy of the final weights, and milliseconds per iteration of this attempt. */
  public double accuracy, iterMs;
  /** Recoveries this worker took part in. */
  public long recoveries;
  /** The checkpoint version the worker started from. */
  public int startVersion;

  /**
   * SHA-256 of the weights as little-endian doubles ({@link ModelHash}).
   *
   * @return 64 hex digits
   */
  public String modelHash() {
    return ModelHash.of(weights);
  }
}
