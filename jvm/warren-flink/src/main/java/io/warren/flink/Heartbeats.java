package io.warren.flink;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.ReadableConfig;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Flink's TaskManager heartbeat timeout against Warren's peer timeout: what a user is told about
 * a worker whose TaskManager freezes.
 *
 * <p>Warren's tracker fences a worker after {@code warren.peerTimeout} without a heartbeat, and
 * the other workers wait for its replacement. A fenced worker whose TaskManager still runs fails
 * its own subtask at once ({@link WorkerOperator}); one whose TaskManager is frozen (a stopped
 * JVM, a frozen VM) cannot, and nothing outside the JobManager can fail a single subtask, so Flink
 * replaces it only when it gives the TaskManager up: after {@code heartbeat.timeout} (50 s by
 * default) for a frozen one, after about {@code heartbeat.interval} × {@code
 * heartbeat.rpc-failure-threshold} for a dead one. The survivors wait meanwhile, for at most
 * {@code warren.connectTimeout}. Pure: reads the settings, returns the lines to log.
 */
final class Heartbeats {
  /** Flink's default {@code heartbeat.timeout}. */
  static final Duration FLINK_DEFAULT_TIMEOUT = Duration.ofSeconds(50);

  /** Warren's default peer timeout ({@code warren.peerTimeout}). */
  static final Duration DEFAULT_PEER_TIMEOUT = Duration.ofSeconds(30);

  /** Warren's default {@code warren.connectTimeout}. */
  static final Duration DEFAULT_CONNECT_TIMEOUT = Duration.ofSeconds(300);

  private static final Logger LOG = LoggerFactory.getLogger(Heartbeats.class);

  private Heartbeats() {}

  /**
   * Logs the notes for a run whose client configuration is {@code conf}.
   *
   * @param conf the client's configuration
   * @param peerTimeout {@code warren.peerTimeout} (null: the default; zero: no heartbeats)
   * @param connectTimeout {@code warren.connectTimeout} (null: the default)
   */
  static void log(ReadableConfig conf, Duration peerTimeout, Duration connectTimeout) {
    Notes n = check(flinkTimeout(conf), peerTimeout, connectTimeout);
    if (n.info() != null) {
      LOG.info(n.info());
    }
    if (n.warning() != null) {
      LOG.warn(n.warning());
    }
  }

  /**
   * What to log.
   *
   * @param info what a frozen TaskManager means for this run (null: nothing to say)
   * @param warning a setting that would fail the run when a TaskManager freezes (null: none)
   */
  record Notes(String info, String warning) {}

  /**
   * Flink's {@code heartbeat.timeout} as {@code conf} has it (Flink 1.x took plain milliseconds,
   * 2.x a duration: both read), or Flink's default.
   *
   * @param conf the client's configuration ({@code flink run} loads the cluster's)
   * @return the timeout
   */
  static Duration flinkTimeout(ReadableConfig conf) {
    return conf.get(
        ConfigOptions.key("heartbeat.timeout").durationType().defaultValue(FLINK_DEFAULT_TIMEOUT));
  }

  /**
   * The notes for a run.
   *
   * @param flinkTimeout Flink's {@code heartbeat.timeout}
   * @param peerTimeout {@code warren.peerTimeout} (null: the default; zero: no heartbeats)
   * @param connectTimeout {@code warren.connectTimeout} (null: the default)
   * @return what to log
   */
  static Notes check(Duration flinkTimeout, Duration peerTimeout, Duration connectTimeout) {
    Duration peer = peerTimeout == null ? DEFAULT_PEER_TIMEOUT : peerTimeout;
    Duration connect = connectTimeout == null ? DEFAULT_CONNECT_TIMEOUT : connectTimeout;
    if (peer.isZero()) {
      return new Notes(null, null);
    }
    List<String> info = new ArrayList<>();
    info.add(
        "warren: a worker silent for warren.peerTimeout ("
            + seconds(peer)
            + ") is fenced; if its TaskManager still runs, its subtask is failed at once and"
            + " Flink restarts it");
    if (flinkTimeout.compareTo(peer) > 0) {
      info.add(
          "if its TaskManager is frozen, Flink replaces it only after heartbeat.timeout ("
              + seconds(flinkTimeout)
              + "), which the other workers wait for: lower heartbeat.timeout on the cluster to"
              + " replace frozen TaskManagers sooner");
    }
    String warning = null;
    if (flinkTimeout.compareTo(connect) >= 0) {
      warning =
          "warren: Flink's heartbeat.timeout ("
              + seconds(flinkTimeout)
              + ") is not below warren.connectTimeout ("
              + seconds(connect)
              + "): when a TaskManager freezes, the other workers give up waiting for the"
              + " replacement of its worker before Flink starts one, and the job fails. Raise"
              + " warren.connectTimeout above heartbeat.timeout plus the restart delay";
    }
    return new Notes(String.join("; ", info), warning);
  }

  private static String seconds(Duration d) {
    double s = d.toMillis() / 1000.0;
    return (s == Math.rint(s) ? Long.toString((long) s) : Double.toString(s)) + " s";
  }
}
