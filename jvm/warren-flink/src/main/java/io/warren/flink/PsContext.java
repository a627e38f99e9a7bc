package io.warren.flink;

import io.warren.ps.PsClient;

/**
 * One parameter-server trainer inside a Flink subtask ({@link WarrenFlink#trainPS}): its identity
 * (trainer id = the subtask index, attempt = Flink's attempt number of the subtask) and its
 * {@link PsClient}, connected to every server.
 */
public final class PsContext {
  private final PsClient client;
  private final int trainerId;
  private final int attempt;
  private final int numTrainers;

  PsContext(PsClient client, int trainerId, int attempt, int numTrainers) {
    this.client = client;
    this.trainerId = trainerId;
    this.attempt = attempt;
    this.numTrainers = numTrainers;
  }

  /**
   * The trainer's client. Do not close it: the operator leaves the job and closes it when the
   * worker returns, or aborts it when the worker throws.
   *
   * @return the client
   */
  public PsClient client() {
    return client;
  }

  /**
   * The trainer id: the subtask index.
   *
   * @return the id, in {@code 0..numTrainers()-1}
   */
  public int trainerId() {
    return trainerId;
  }

  /**
   * Flink's attempt number of this subtask (0 on the first run).
   *
   * @return the attempt
   */
  public int attempt() {
    return attempt;
  }

  /**
   * The run's trainers.
   *
   * @return the count
   */
  public int numTrainers() {
    return numTrainers;
  }
}
