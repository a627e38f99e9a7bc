package io.warren.runner;

import io.warren.TlsSettings;
import io.warren.Tracker;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The trackers of one run, one per attempt of the whole set of workers, on the driver (or the
 * client): retry-one needs one (a re-run worker joins the same tracker with a higher {@code
 * WARREN_ATTEMPT}), fail-all one per attempt (a tracker keeps ranks and the finished and lost
 * state of the task ids, so a whole new set of workers cannot join the previous attempt's).
 * They all start now because a task can only learn an address from its closure; the later
 * ones' rendezvous is {@link #SPARE_RENDEZVOUS}, bounded in practice by the workers'
 * connect timeout. They share one secret.
 */
public final class Trackers implements AutoCloseable {
  /** The rendezvous deadline of the trackers of attempts after the first. */
  public static final Duration SPARE_RENDEZVOUS = Duration.ofDays(30);

  private final Tracker[] trackers;

  private Trackers(Tracker[] trackers) {
    this.trackers = trackers;
  }

  /**
   * Starts {@code attempts} trackers (closing those already started if one fails).
   *
   * @param numWorkers the workers of the run
   * @param host the address to bind and advertise
   * @param attempts how many attempts of the run to prepare (at least 1)
   * @param rendezvous the first attempt's rendezvous deadline
   * @return the running trackers; close them when the run is over
   */
  public static Trackers start(int numWorkers, String host, int attempts, Duration rendezvous) {
    return start(numWorkers, host, attempts, rendezvous, null);
  }

  /**
   * Starts {@code attempts} trackers (closing those already started if one fails) that fence
   * a worker silent for {@code peerTimeout} ({@link #takeFenced()} names it).
   *
   * @param numWorkers the workers of the run
   * @param host the address to bind and advertise
   * @param attempts how many attempts of the run to prepare (at least 1)
   * @param rendezvous the first attempt's rendezvous deadline
   * @param peerTimeout null for the default (30 s), zero for no heartbeats ({@link
   *     RunnerSettings#trackerPeerTimeout()})
   * @return the running trackers; close them when the run is over
   */
  public static Trackers start(
      int numWorkers, String host, int attempts, Duration rendezvous, Duration peerTimeout) {
    return start(numWorkers, host, attempts, rendezvous, peerTimeout, TlsSettings.OFF, null);
  }

  /**
   * Starts {@code attempts} trackers, as {@link #start(int, String, int, Duration, Duration)},
   * speaking TLS to the workers if {@code tls} says so ({@link RunnerSettings#tls()}); {@link
   * #workerSettings(Map)} then carries the same TLS settings.
   *
   * @param numWorkers the workers of the run
   * @param host the address to bind and advertise
   * @param attempts how many attempts of the run to prepare (at least 1)
   * @param rendezvous the first attempt's rendezvous deadline
   * @param peerTimeout null for the default (30 s), zero for no heartbeats
   * @param tls encryption in transit ({@link TlsSettings#OFF}: plain TCP)
   * @return the running trackers; close them when the run is over
   */
  public static Trackers start(
      int numWorkers,
      String host,
      int attempts,
      Duration rendezvous,
      Duration peerTimeout,
      TlsSettings tls) {
    return start(numWorkers, host, attempts, rendezvous, peerTimeout, tls, null);
  }

  /**
   * Starts {@code attempts} trackers (closing those already started if one fails), speaking
   * TLS if {@code tls} says so, elastic if {@code elastic} is not null ({@link
   * Tracker.Elastic}: the run starts with {@code numWorkers} workers and changes size within
   * its limits).
   *
   * @param numWorkers the workers the run starts with
   * @param host the address to bind and advertise
   * @param attempts how many attempts of the run to prepare (at least 1)
   * @param rendezvous the first attempt's rendezvous deadline
   * @param peerTimeout null for the default (30 s), zero for no heartbeats
   * @param tls encryption in transit ({@link TlsSettings#OFF}: plain TCP)
   * @param elastic the limits of an elastic run, null for a fixed world
   * @return the running trackers; close them when the run is over
   */
  public static Trackers start(
      int numWorkers,
      String host,
      int attempts,
      Duration rendezvous,
      Duration peerTimeout,
      TlsSettings tls,
      Tracker.Elastic elastic) {
    if (attempts < 1) {
      throw new IllegalArgumentException("attempts must be at least 1, got " + attempts);
    }
    String secret = newSecret();
    Tracker[] ts = new Tracker[attempts];
    try {
      for (int i = 0; i < attempts; i++) {
        Duration r = i == 0 ? rendezvous : SPARE_RENDEZVOUS;
        ts[i] =
            Tracker.builder(numWorkers, secret)
                .host(host)
                .rendezvousTimeout(r)
                .peerTimeout(peerTimeout)
                .tls(tls)
                .elastic(elastic)
                .start();
      }
    } catch (RuntimeException e) {
      new Trackers(ts).close();
      throw e;
    }
    return new Trackers(ts);
  }

  /**
   * How many attempts have a tracker.
   *
   * @return the number of trackers
   */
  public int attempts() {
    return trackers.length;
  }

  /**
   * The tracker of an attempt.
   *
   * @param attempt 0 for the first
   * @return its tracker
   */
  public Tracker tracker(int attempt) {
    return trackers[attempt];
  }

  /**
   * The workers any tracker fenced since the last call (see {@link Tracker#takeFenced()}):
   * kill the task attempts they name, which the engine then runs again.
   *
   * @return fenced workers, possibly none, oldest first per tracker
   */
  public List<Tracker.Fenced> takeFenced() {
    List<Tracker.Fenced> out = new ArrayList<>();
    for (Tracker t : trackers) {
      try {
        if (t != null) {
          out.addAll(t.takeFenced());
        }
      } catch (IllegalStateException closed) {
        // an attempt's tracker closed meanwhile (fail-all): nothing left to fence there
      }
    }
    return out;
  }

  /**
   * Each attempt's worker settings without {@code WARREN_TASK_ID} (the tasks add theirs), plus
   * {@code extra} (which wins): what the tasks' closure carries.
   *
   * @param extra settings for every worker of every attempt
   * @return one serializable map per attempt
   */
  public List<Map<String, String>> workerSettings(Map<String, String> extra) {
    List<Map<String, String>> out = new ArrayList<>();
    for (Tracker t : trackers) {
      LinkedHashMap<String, String> m = new LinkedHashMap<>(t.workerSettings());
      m.remove("WARREN_TASK_ID");
      m.putAll(extra);
      out.add(m);
    }
    return out;
  }

  /**
   * Closes an attempt's tracker (its workers blocked waiting for a replacement fail at once).
   *
   * @param attempt the attempt; ignored if it has no tracker
   */
  public void closeAttempt(int attempt) {
    if (attempt >= 0 && attempt < trackers.length && trackers[attempt] != null) {
      trackers[attempt].close();
    }
  }

  /** Closes every tracker. Idempotent. */
  @Override
  public void close() {
    for (Tracker t : trackers) {
      if (t != null) {
        t.close();
      }
    }
  }

  /**
   * A new random job secret.
   *
   * @return 48 hex digits
   */
  public static String newSecret() {
    byte[] b = new byte[24];
    new SecureRandom().nextBytes(b);
    return HexFormat.of().formatHex(b);
  }
}
