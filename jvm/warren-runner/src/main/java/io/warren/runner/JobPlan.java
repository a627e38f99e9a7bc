package io.warren.runner;

import io.warren.Tracker;
import java.io.File;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;

/**
 * The driver's (or client's) side of one run, the same on every engine: the checks of the
 * settings that need the run's shape, the fail-all run directory (local, or remote through
 * {@link HadoopCheckpoints}), the trackers of the run's attempts and the worker settings each
 * attempt's tasks carry. An adapter calls {@link #check} before it starts anything, {@link
 * #start} once it is ready to run, ships {@link #workerSettings()} (and {@link #remoteDir()})
 * to its tasks, and at the end calls {@link #close()} and {@link #closeDirectory()}. What
 * differs between engines is in an {@link Engine}.
 */
public final class JobPlan implements AutoCloseable {
  private final Trackers trackers;
  private final Map<String, String> extra;
  private final String localDir;
  private final String remoteDir;
  private final HadoopCheckpoints.RunDirectory remote;
  private final int durableEvery;
  private boolean directoryClosed;

  private JobPlan(
      Trackers trackers,
      Map<String, String> extra,
      String localDir,
      String remoteDir,
      HadoopCheckpoints.RunDirectory remote,
      int durableEvery) {
    this.trackers = trackers;
    this.extra = extra;
    this.localDir = localDir;
    this.remoteDir = remoteDir;
    this.remote = remote;
    this.durableEvery = durableEvery;
  }

  /** How an engine creates a fail-all run's local directory. */
  @FunctionalInterface
  public interface LocalDirectory {
    /**
     * Creates the run's directory, or leaves it to the workers (the native library creates it
     * when it first writes a checkpoint).
     *
     * @param setting the {@code checkpointDir} setting, for messages
     * @param dir the run's directory, absolute
     * @throws RunnerException if it cannot be created
     */
    void create(String setting, File dir);
  }

  /**
   * How an engine creates a fail-all run's remote directory. Its type names no Hadoop class, so
   * that an engine without Hadoop on its class path can build an {@link Engine}; only a run with
   * a remote directory calls it.
   */
  @FunctionalInterface
  public interface RemoteDirectory {
    /**
     * Creates the run's directory: {@link HadoopCheckpoints#create} with the engine's Hadoop
     * configuration, {@code engine.prefix()} and {@code engine.reachableFrom()}.
     *
     * @param engine the engine, for its prefix and {@code reachableFrom}
     * @param setting the {@code checkpointDir} setting
     * @param dir the run's directory, a subdirectory of {@code setting}
     * @param timeoutS {@code checkpointDirTimeout}
     * @return the handle that removes it
     * @throws RunnerException naming the directory and the cause if it cannot be created
     */
    HadoopCheckpoints.RunDirectory create(Engine engine, String setting, String dir, double timeoutS);
  }

  /**
   * What differs between engines.
   *
   * @param prefix the engine's settings prefix ({@code spark.warren.}), for messages
   * @param checkpointDirNeeds what fail-all's {@code checkpointDir} must be, ending the message
   *     that says it is missing ("a directory every executor can read and write ...")
   * @param reachableFrom who must reach a remote run directory ("the driver and every
   *     executor"), for the message that says it cannot be created
   * @param runName the run's name in its directory's name (the Spark application id), any
   *     characters (those a path may not hold become {@code _})
   * @param localDirectory creates a local run directory (or leaves it to the workers)
   * @param remoteDirectory creates a remote run directory
   * @param defaultHost the trackers' address when {@code trackerHost} is not set
   */
  public record Engine(
      String prefix,
      String checkpointDirNeeds,
      String reachableFrom,
      String runName,
      LocalDirectory localDirectory,
      RemoteDirectory remoteDirectory,
      String defaultHost) {}

  /**
   * Checks what needs the run's shape, before anything starts: elastic membership only with
   * retry-one and at most {@code numWorkers} as its minimum, and fail-all only with a valid
   * {@code checkpointDir}.
   *
   * @param settings the run's settings
   * @param numWorkers the run's workers
   * @param elastic whether the run is elastic
   * @param minWorkers an elastic run's minimum (ignored otherwise)
   * @param engine the engine
   * @throws RunnerException naming the settings in conflict and what to change
   * @throws NoClassDefFoundError if {@code checkpointDir} is remote and Hadoop's classes are
   *     not on the class path
   */
  public static void check(
      RunnerSettings settings, int numWorkers, boolean elastic, int minWorkers, Engine engine) {
    String p = engine.prefix();
    boolean failAll = settings.recovery() == Recovery.FAIL_ALL;
    if (elastic && failAll) {
      throw new RunnerException(
          p
              + "elastic=true needs "
              + p
              + "recovery=retry-one: fail-all re-runs every worker, so nobody goes on without a"
              + " lost one",
          null);
    }
    if (elastic && minWorkers > numWorkers) {
      throw new RunnerException(
          p + "minWorkers = " + minWorkers + " is more than the job's " + numWorkers + " workers", null);
    }
    if (failAll) {
      String raw = checkpointDir(settings, engine);
      if (!CheckpointDirs.isLocal(raw)) {
        remoteChild(raw, "warren-run", engine);
      }
    }
  }

  /**
   * Starts a run: creates its fail-all directory (a new subdirectory of {@code checkpointDir},
   * so that a run never resumes from another run's files), then its trackers, removing the
   * directory again if they cannot start. Call {@link #check} first.
   *
   * @param settings the run's settings
   * @param numWorkers the workers the run starts with
   * @param attempts how many attempts of the whole set of workers get a tracker (1 for
   *     retry-one)
   * @param elastic the limits of an elastic run, null for a fixed world
   * @param engine the engine
   * @return the running plan; {@link #close()} and {@link #closeDirectory()} it at the end
   * @throws RunnerException if {@code checkpointDir} is missing or invalid, or the run's
   *     directory cannot be created (naming it and the cause)
   * @throws NoClassDefFoundError if {@code checkpointDir} is remote and Hadoop's classes are
   *     not on the class path
   */
  public static JobPlan start(
      RunnerSettings settings, int numWorkers, int attempts, Tracker.Elastic elastic, Engine engine) {
    boolean failAll = settings.recovery() == Recovery.FAIL_ALL;
    String localDir = null;
    String remoteDir = null;
    HadoopCheckpoints.RunDirectory remote = null;
    if (failAll) {
      String raw = checkpointDir(settings, engine);
      String name = "warren-" + engine.runName().replaceAll("[^A-Za-z0-9._-]", "_") + "-" + UUID.randomUUID();
      Optional<File> local = CheckpointDirs.localDirectory(raw);
      if (local.isPresent()) {
        File dir = new File(local.get().getAbsoluteFile(), name);
        engine.localDirectory().create(raw, dir);
        localDir = dir.getPath();
      } else {
        remoteDir = remoteChild(raw, name, engine);
        remote = engine.remoteDirectory().create(engine, raw, remoteDir, settings.checkpointDirTimeout());
      }
    }
    int durableEvery = failAll ? settings.durableEvery() : 1;
    // A remote directory's tasks set WARREN_CHECKPOINT_DIR to their staging directory; the
    // native library and the staging uploads use the same durableEvery.
    Map<String, String> extra = new LinkedHashMap<>(settings.workerSettings());
    if (localDir != null) {
      extra.put("WARREN_CHECKPOINT_DIR", localDir);
    }
    if (failAll) {
      extra.put("WARREN_DURABLE_EVERY", Integer.toString(durableEvery));
    }
    Trackers trackers;
    try {
      trackers =
          Trackers.start(
              numWorkers,
              settings.trackerHost().orElse(engine.defaultHost()),
              attempts,
              Duration.ofMillis((long) (settings.rendezvousTimeout() * 1000)),
              settings.trackerPeerTimeout(),
              settings.tls(),
              elastic);
    } catch (RuntimeException | Error e) {
      removeDirectory(localDir, remote);
      throw e;
    }
    return new JobPlan(trackers, extra, localDir, remoteDir, remote, durableEvery);
  }

  /** Fail-all's {@code checkpointDir}, or the error that says it is missing. */
  private static String checkpointDir(RunnerSettings settings, Engine engine) {
    String p = engine.prefix();
    return settings
        .checkpointDir()
        .map(String::trim)
        .filter(d -> !d.isEmpty())
        .orElseThrow(
            () -> {
              String needs = engine.checkpointDirNeeds();
              return new RunnerException(p + "recovery=fail-all needs " + p + "checkpointDir: " + needs, null);
            });
  }

  /** A remote run directory's URI, or the error that says {@code raw} is no valid path. */
  private static String remoteChild(String raw, String name, Engine engine) {
    try {
      return HadoopCheckpoints.child(raw, name);
    } catch (IllegalArgumentException e) {
      throw new RunnerException(
          engine.prefix() + "checkpointDir=" + raw + " is not a valid path: " + e.getMessage(), e);
    }
  }

  /**
   * The run's trackers, one per attempt.
   *
   * @return the trackers
   */
  public Trackers trackers() {
    return trackers;
  }

  /**
   * Each attempt's worker settings without the task's identity: the trackers', the run's
   * {@code WARREN_*} settings and, in fail-all mode, {@code WARREN_DURABLE_EVERY} and (for a
   * local directory) {@code WARREN_CHECKPOINT_DIR}. What the tasks' closure carries.
   *
   * @return one serializable map per attempt
   */
  public List<Map<String, String>> workerSettings() {
    return trackers.workerSettings(extra);
  }

  /**
   * A fail-all run's local directory, which the native library writes itself.
   *
   * @return its absolute path, or empty for a remote one or retry-one
   */
  public Optional<String> localDir() {
    return Optional.ofNullable(localDir);
  }

  /**
   * A fail-all run's remote directory, which each task stages locally ({@link
   * HadoopCheckpoints.Staging}).
   *
   * @return its URI, or empty for a local one or retry-one
   */
  public Optional<String> remoteDir() {
    return Optional.ofNullable(remoteDir);
  }

  /**
   * Every how many checkpoints one is durable.
   *
   * @return {@code durableEvery} in fail-all mode, 1 otherwise
   */
  public int durableEvery() {
    return durableEvery;
  }

  /** Closes every tracker. Idempotent. */
  @Override
  public void close() {
    trackers.close();
  }

  /**
   * Removes the run's directory and the checkpoints in it (best effort; a local one only if
   * it exists). Idempotent; nothing for retry-one.
   */
  public synchronized void closeDirectory() {
    if (directoryClosed) {
      return;
    }
    directoryClosed = true;
    removeDirectory(localDir, remote);
  }

  private static void removeDirectory(String localDir, HadoopCheckpoints.RunDirectory remote) {
    if (localDir != null) {
      CheckpointDirs.removeLocal(new File(localDir));
    }
    if (remote != null) {
      remote.close();
    }
  }
}
