package io.warren.runner;

import io.warren.TlsSettings;
import io.warren.ps.PsClient;
import java.io.Serializable;
import java.time.Duration;
import java.util.List;

/**
 * The trainers' side of a {@code trainPS} run ({@link PsServers#trainers()}), shipped to the
 * tasks: the servers' addresses, the secret, the timeouts and the encryption in transit, and the
 * life of one trainer ({@link #run}).
 *
 * @param uris the servers' addresses, server {@code i} at index {@code i}
 * @param secret the run's job secret
 * @param connectTimeout {@code ps.connectTimeout}
 * @param callTimeout {@code ps.callTimeout}
 * @param tls encryption in transit
 */
public record PsTrainers(
    List<String> uris, String secret, Duration connectTimeout, Duration callTimeout, TlsSettings tls)
    implements Serializable {
  private static final long serialVersionUID = 1L;

  /** Copies {@code uris} into a serializable list. */
  public PsTrainers {
    uris = List.copyOf(uris);
  }

  /** The body of one trainer. */
  @FunctionalInterface
  public interface Body<R> {
    /**
     * Trains.
     *
     * @param client the trainer's client (do not close it)
     * @return the trainer's result
     * @throws Exception anything: the trainer fails
     */
    R train(PsClient client) throws Exception;
  }

  /**
   * Connects as trainer {@code id}.
   *
   * @param id the trainer id (the task id)
   * @return the client; close it
   */
  public PsClient connect(int id) {
    return PsClient.connect(uris, secret, id, connectTimeout, callTimeout, tls);
  }

  /**
   * One trainer's life: connects as trainer {@code id}, runs {@code body}, and then leaves the
   * job (it holds nobody back any more) and closes; if {@code body} throws, aborts the client
   * without leaving, so that a re-run with the same id goes on as this trainer, at the step the
   * servers have.
   *
   * @param id the trainer id (the task id)
   * @param body the training
   * @param <R> the result
   * @return what {@code body} returned
   * @throws Exception what {@code body} threw
   */
  public <R> R run(int id, Body<R> body) throws Exception {
    PsClient ps = connect(id);
    R r;
    try {
      r = body.train(ps);
    } catch (Throwable e) {
      ps.abort();
      throw e;
    }
    try {
      ps.leave();
    } finally {
      ps.close();
    }
    return r;
  }

  @Override
  public String toString() {
    return "PsTrainers[" + uris + ", tls " + tls + "]";
  }
}
