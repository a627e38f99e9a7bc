package io.warren.flink;

import java.time.Duration;
import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.function.ToDoubleFunction;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.DeploymentOptions;
import org.apache.flink.configuration.ReadableConfig;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.runtime.rest.RestClient;
import org.apache.flink.runtime.rest.handler.legacy.messages.ClusterOverviewWithVersion;
import org.apache.flink.runtime.rest.messages.ClusterOverviewHeaders;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The client's check that a cluster has a free task slot for every worker, before the job is
 * submitted: the JobManager's REST API ({@code /overview}) says how many slots it has and how
 * many are free. Without it, Flink would deploy the workers it has slots for, and they would
 * wait for the others until the first tracker's rendezvous deadline. An elastic run ({@code
 * warren.elastic=true}) starts with the free slots instead when there are at least {@code
 * warren.minWorkers} of them: the other subtasks wait for a slot, and their workers join at a
 * checkpoint boundary once Flink runs them.
 *
 * <p>Asked only where the client knows the JobManager's REST address ({@code rest.address}, as
 * {@code flink run} and {@code createRemoteEnvironment} set it); a local environment sizes its
 * own MiniCluster to the job, and a cluster that cannot be asked leaves the rendezvous deadline
 * as the only guard.
 */
final class Slots {
  private static final Logger LOG = LoggerFactory.getLogger(Slots.class);

  /**
   * Seconds the check waits, at least, when the cluster has enough slots but some are busy: a
   * job that has just ended frees its slots a moment after its result reached the client.
   */
  static final double BUSY_GRACE_S = 10.0;

  /** The most one question to the REST API may take. */
  private static final Duration ASK_TIMEOUT = Duration.ofSeconds(10);

  private static final long POLL_MS = 200;

  private Slots() {}

  /**
   * A cluster's task slots.
   *
   * @param free slots no job holds
   * @param total slots of the registered TaskManagers
   * @param taskManagers registered TaskManagers
   */
  record Count(int free, int total, int taskManagers) {}

  /**
   * Why a cluster cannot run {@code numWorkers} workers at once, or null if it can.
   *
   * @param numWorkers the workers
   * @param c the cluster's slots
   * @return the message, or null
   */
  static String shortage(int numWorkers, Count c) {
    if (c.free() >= numWorkers) {
      return null;
    }
    return String.format(
        Locale.ROOT,
        "Warren needs %d task slots running at once but the cluster has %d free (of %d, in %d"
            + " TaskManagers): its workers wait for each other, so they cannot run in turns. Use"
            + " fewer workers, more TaskManagers or taskmanager.numberOfTaskSlots, or"
            + " warren.slotWaitTimeout to wait for TaskManagers that are still registering",
        numWorkers,
        c.free(),
        c.total(),
        c.taskManagers());
  }

  /**
   * How long to keep asking while {@code c} is short of slots: busy slots get at least {@link
   * #BUSY_GRACE_S}, missing ones {@code slotWaitS}.
   *
   * @param numWorkers the workers
   * @param c the cluster's slots
   * @param slotWaitS {@code warren.slotWaitTimeout}
   * @return seconds, from the first question
   */
  static double patience(int numWorkers, Count c, double slotWaitS) {
    return c.total() >= numWorkers ? Math.max(slotWaitS, BUSY_GRACE_S) : slotWaitS;
  }

  /**
   * How many workers an elastic run starts with on a cluster with slots {@code c}: all of them
   * if there is a free slot for each, else the free slots if there are at least {@code
   * minWorkers}.
   *
   * @param numWorkers the workers
   * @param minWorkers {@code warren.minWorkers}
   * @param c the cluster's slots
   * @return the workers to start with, or -1 if fewer than {@code minWorkers} slots are free
   */
  static int starting(int numWorkers, int minWorkers, Count c) {
    if (c.free() >= numWorkers) {
      return numWorkers;
    }
    return c.free() >= minWorkers ? c.free() : -1;
  }

  /**
   * Why an elastic run cannot start on a cluster with slots {@code c}, or null if it can.
   *
   * @param numWorkers the workers
   * @param minWorkers {@code warren.minWorkers}
   * @param c the cluster's slots
   * @return the message, or null
   */
  static String elasticShortage(int numWorkers, int minWorkers, Count c) {
    if (starting(numWorkers, minWorkers, c) >= 0) {
      return null;
    }
    return String.format(
        Locale.ROOT,
        "Warren's elastic run of %d workers needs at least %d task slots running at once"
            + " (warren.minWorkers) but the cluster has %d free (of %d, in %d TaskManagers). Use a"
            + " lower warren.minWorkers, more TaskManagers or taskmanager.numberOfTaskSlots, or"
            + " warren.slotWaitTimeout to wait for TaskManagers that are still registering",
        numWorkers,
        minWorkers,
        c.free(),
        c.total(),
        c.taskManagers());
  }

  /**
   * How long an elastic run keeps asking while {@code c} has fewer free slots than workers: as
   * {@link #patience}, and at least {@link #BUSY_GRACE_S} too while the slots for {@code
   * minWorkers} exist but are busy.
   *
   * @param numWorkers the workers
   * @param minWorkers {@code warren.minWorkers}
   * @param c the cluster's slots
   * @param slotWaitS {@code warren.slotWaitTimeout}
   * @return seconds, from the first question
   */
  static double elasticPatience(int numWorkers, int minWorkers, Count c, double slotWaitS) {
    boolean busyBelowMin = c.free() < minWorkers && c.total() >= minWorkers;
    return busyBelowMin ? Math.max(slotWaitS, BUSY_GRACE_S) : patience(numWorkers, c, slotWaitS);
  }

  /**
   * Checks that the cluster of {@code conf} has a free slot for every worker, waiting as {@link
   * #patience} says; does nothing if the cluster cannot be asked (see the class comment).
   *
   * @param conf the environment's configuration
   * @param numWorkers the workers
   * @param slotWaitS {@code warren.slotWaitTimeout}
   * @throws WarrenFlinkException if there are not enough free slots in time
   */
  static void check(ReadableConfig conf, int numWorkers, double slotWaitS) {
    Optional<Count> c = await(conf, numWorkers, x -> patience(numWorkers, x, slotWaitS));
    String why = c.map(x -> shortage(numWorkers, x)).orElse(null);
    if (why != null) {
      throw new WarrenFlinkException(why, null);
    }
  }

  /**
   * How many workers an elastic run starts with ({@link #starting}), waiting for a slot per
   * worker as {@link #elasticPatience} says; all of them if the cluster cannot be asked (see the
   * class comment).
   *
   * @param conf the environment's configuration
   * @param numWorkers the workers
   * @param minWorkers {@code warren.minWorkers}
   * @param slotWaitS {@code warren.slotWaitTimeout}
   * @return the workers to start with, {@code minWorkers..numWorkers}
   * @throws WarrenFlinkException if fewer than {@code minWorkers} slots are free in time
   */
  static int startingWorkers(ReadableConfig conf, int numWorkers, int minWorkers, double slotWaitS) {
    Optional<Count> c = await(conf, numWorkers, x -> elasticPatience(numWorkers, minWorkers, x, slotWaitS));
    if (c.isEmpty()) {
      return numWorkers;
    }
    String why = elasticShortage(numWorkers, minWorkers, c.get());
    if (why != null) {
      throw new WarrenFlinkException(why, null);
    }
    int start = starting(numWorkers, minWorkers, c.get());
    if (start < numWorkers) {
      LOG.info(
          "warren: the elastic run starts with {} of {} workers ({} free task slots); the others"
              + " join at a checkpoint boundary when Flink runs them",
          start,
          numWorkers,
          c.get().free());
    }
    return start;
  }

  /**
   * Asks the cluster of {@code conf} for its slots until one is free per worker or {@code
   * patience} (of the last answer) has passed.
   *
   * @return the last answer, or empty if the cluster cannot be asked
   */
  private static Optional<Count> await(ReadableConfig conf, int numWorkers, ToDoubleFunction<Count> patience) {
    Optional<String> host = conf.getOptional(RestOptions.ADDRESS);
    String target = conf.getOptional(DeploymentOptions.TARGET).orElse("");
    if (host.isEmpty() || target.equalsIgnoreCase("local")) {
      return Optional.empty();
    }
    int port = conf.get(RestOptions.PORT);
    long start = System.nanoTime();
    try (Asker asker = new Asker(Configuration.fromMap(conf.toMap()), host.get(), port)) {
      Count c = asker.ask();
      while (c.free() < numWorkers && System.nanoTime() - start < (long) (patience.applyAsDouble(c) * 1e9)) {
        Thread.sleep(POLL_MS);
        c = asker.ask();
      }
      return Optional.of(c);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new WarrenFlinkException("interrupted while checking the cluster's task slots", e);
    } catch (Exception e) {
      LOG.warn(
          "warren: cannot ask the JobManager at {}:{} for its free task slots ({}); a job without"
              + " a slot per worker fails at the first tracker's rendezvous deadline instead",
          host.get(),
          port,
          e.toString());
      return Optional.empty();
    }
  }

  /** One REST client, asked as often as needed, closed at the end. */
  private static final class Asker implements AutoCloseable {
    private final RestClient client;
    private final String host;
    private final int port;

    Asker(Configuration conf, String host, int port) throws Exception {
      this.client = new RestClient(conf, Runnable::run);
      this.host = host;
      this.port = port;
    }

    Count ask() throws Exception {
      ClusterOverviewWithVersion o =
          client
              .sendRequest(host, port, ClusterOverviewHeaders.getInstance())
              .get(ASK_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
      return new Count(o.getNumSlotsAvailable(), o.getNumSlotsTotal(), o.getNumTaskManagersConnected());
    }

    @Override
    public void close() {
      client.closeAsync();
    }
  }
}
