package io.warren.flink;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * What every worker subtask of a Warren run needs: the worker settings of each attempt's
 * tracker (and of the run), whether fail-all picks the tracker by attempt, and the progress
 * reports. Shipped with the operator, or in the job's global parameters for {@link
 * WarrenContext#of}.
 *
 * @param numWorkers the workers of the run
 * @param failAll whether attempt {@code a} joins tracker {@code a} (fail-all) or all join the
 *     first (retry-one)
 * @param bases each attempt's worker settings, without the task's identity
 * @param label the run's label in progress lines
 * @param progressIntervalS seconds between rank 0's progress lines, 0 for none
 * @param remoteDir fail-all: the run's checkpoint directory on a Hadoop file system, which each
 *     worker stages locally ({@link RemoteCheckpoints}); null for a local one (or retry-one)
 * @param durableEvery fail-all: every how many checkpoints one is durable
 * @param hadoop the Hadoop settings of {@code remoteDir} (the {@code flink.hadoop.*} entries of
 *     the client's configuration, without the prefix)
 */
record RunConfig(
    int numWorkers,
    boolean failAll,
    List<Map<String, String>> bases,
    String label,
    double progressIntervalS,
    String remoteDir,
    int durableEvery,
    Map<String, String> hadoop)
    implements Serializable {
  private static final String KEY = "warren.run.";
  private static final String HADOOP = KEY + "hadoop.";

  RunConfig {
    List<Map<String, String>> copy = new ArrayList<>();
    bases.forEach(b -> copy.add(new HashMap<>(b)));
    bases = copy;
    hadoop = new HashMap<>(hadoop);
  }

  /**
   * The worker settings of an attempt of a subtask.
   *
   * @param attempt Flink's attempt number
   * @return the settings without the task's identity
   * @throws WarrenFlinkException if fail-all has run out of trackers
   */
  Map<String, String> base(int attempt) {
    if (!failAll) {
      return bases.get(0);
    }
    if (attempt >= bases.size()) {
      throw new WarrenFlinkException(
          "fail-all: attempt "
              + attempt
              + " has no tracker: the run started "
              + bases.size()
              + " (warren.flink.attempts, or Flink's restart-strategy.fixed-delay.attempts + 1)",
          null);
    }
    return bases.get(attempt);
  }

  /**
   * This configuration as global job parameters (for {@link WarrenContext#of}).
   *
   * @return the entries to add
   */
  Map<String, String> toJobParameters() {
    Map<String, String> m = new HashMap<>();
    m.put(KEY + "workers", Integer.toString(numWorkers));
    m.put(KEY + "failAll", Boolean.toString(failAll));
    m.put(KEY + "attempts", Integer.toString(bases.size()));
    m.put(KEY + "label", label);
    m.put(KEY + "progressInterval", Double.toString(progressIntervalS));
    m.put(KEY + "durableEvery", Integer.toString(durableEvery));
    if (remoteDir != null) {
      m.put(KEY + "remoteDir", remoteDir);
    }
    hadoop.forEach((k, v) -> m.put(HADOOP + k, v));
    for (int a = 0; a < bases.size(); a++) {
      String p = KEY + a + ".";
      bases.get(a).forEach((k, v) -> m.put(p + k, v));
    }
    return m;
  }

  /**
   * The configuration {@link #toJobParameters} wrote.
   *
   * @param params the job's global parameters
   * @return the run's configuration
   * @throws WarrenFlinkException if there is none
   */
  static RunConfig fromJobParameters(Map<String, String> params) {
    String workers = params.get(KEY + "workers");
    if (workers == null) {
      throw new WarrenFlinkException(
          "WarrenContext.of: this job has no Warren run: call WarrenFlink.prepare(env, numWorkers,"
              + " settings) before building the job",
          null);
    }
    int attempts = Integer.parseInt(params.get(KEY + "attempts"));
    Map<String, String> hadoop = new HashMap<>();
    params.forEach(
        (k, v) -> {
          if (k.startsWith(HADOOP)) {
            hadoop.put(k.substring(HADOOP.length()), v);
          }
        });
    List<Map<String, String>> bases = new ArrayList<>();
    for (int a = 0; a < attempts; a++) {
      String p = KEY + a + ".";
      Map<String, String> b = new HashMap<>();
      params.forEach(
          (k, v) -> {
            if (k.startsWith(p)) {
              b.put(k.substring(p.length()), v);
            }
          });
      bases.add(b);
    }
    return new RunConfig(
        Integer.parseInt(workers),
        Boolean.parseBoolean(params.get(KEY + "failAll")),
        bases,
        params.get(KEY + "label"),
        Double.parseDouble(params.get(KEY + "progressInterval")),
        params.get(KEY + "remoteDir"),
        Integer.parseInt(params.getOrDefault(KEY + "durableEvery", "1")),
        hadoop);
  }
}
