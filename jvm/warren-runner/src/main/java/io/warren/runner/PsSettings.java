package io.warren.runner;

import io.warren.ps.PsServer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeSet;

/**
 * The parameter-server settings of a {@code trainPS} run ({@code ps.*} under the engine's
 * prefix: {@code spark.warren.ps.checkpointDir}, {@code warren.ps.checkpointDir}), parsed: what
 * {@link PsServers} and the trainers need, the same on every engine.
 *
 * @param checkpointDir {@code ps.checkpointDir}: where the servers checkpoint their shards
 *     (local to the process that runs them), empty for no checkpoints
 * @param checkpointEvery {@code ps.checkpointEvery}: steps between checkpoints (0: every 60 s,
 *     and when a server's log holds four times its shard)
 * @param host {@code ps.host}: the address the servers bind and advertise, empty for the
 *     engine's default
 * @param pullTimeout {@code ps.pullTimeout}
 * @param connectTimeout {@code ps.connectTimeout}
 * @param callTimeout {@code ps.callTimeout}
 * @param threads {@code ps.threads}: threads of each server
 */
public record PsSettings(
    Optional<String> checkpointDir,
    int checkpointEvery,
    Optional<String> host,
    Duration pullTimeout,
    Duration connectTimeout,
    Duration callTimeout,
    int threads) {

  /** The key prefix (after the engine's prefix) of the parameter-server settings. */
  public static final String KEY_PREFIX = "ps.";

  private static final double DAY = 86400.0;

  /** The settings a run has when none is given (the servers' host: the engine's default). */
  public static final PsSettings DEFAULTS =
      new PsSettings(
          Optional.empty(),
          0,
          Optional.empty(),
          Duration.ofSeconds(300),
          Duration.ofSeconds(60),
          Duration.ofSeconds(600),
          PsServer.DEFAULT_THREADS);

  /**
   * The declarations of the parameter-server settings, with doc lines that name the process
   * the servers run in on one engine ("the driver", "the client").
   *
   * @param checkpointDir {@code ps.checkpointDir}
   * @param checkpointEvery {@code ps.checkpointEvery}
   * @param host {@code ps.host}
   * @param pullTimeout {@code ps.pullTimeout}
   * @param connectTimeout {@code ps.connectTimeout}
   * @param callTimeout {@code ps.callTimeout}
   * @param threads {@code ps.threads}
   */
  public record Declarations(
      Setting<String> checkpointDir,
      Setting<Integer> checkpointEvery,
      Setting<String> host,
      Setting<Double> pullTimeout,
      Setting<Double> connectTimeout,
      Setting<Double> callTimeout,
      Setting<Integer> threads) {

    /**
     * Every declaration, in the order of the docs.
     *
     * @return the settings
     */
    public List<Setting<?>> all() {
      return List.of(checkpointDir, checkpointEvery, host, pullTimeout, connectTimeout, callTimeout, threads);
    }
  }

  /**
   * The declarations for an engine whose servers run in {@code process}.
   *
   * @param process the process that runs the servers, as the doc lines name it ({@code driver},
   *     {@code client})
   * @param hostDefault the servers' address when {@code ps.host} is not set, as the docs show it
   * @return the declarations
   */
  public static Declarations declarations(String process, String hostDefault) {
    return new Declarations(
        new Setting<>(
            "ps.checkpointDir",
            SettingType.text(),
            null,
            "",
            null,
            "trainPS: local directory of the "
                + process
                + " where each parameter server checkpoints its shard; a server restarted from it"
                + " loses nothing in sync mode (none: no checkpoints)"),
        new Setting<>(
            "ps.checkpointEvery",
            SettingType.intIn(0, 1000000),
            DEFAULTS.checkpointEvery(),
            "0",
            null,
            "trainPS: steps between a server's checkpoints (0: every 60 s, and when its log holds"
                + " four times its shard)"),
        new Setting<>(
            "ps.host",
            SettingType.text(),
            null,
            hostDefault,
            null,
            "trainPS: address the parameter servers bind and advertise to the trainers"),
        new Setting<>(
            "ps.pullTimeout",
            SettingType.seconds(true, DAY),
            seconds(DEFAULTS.pullTimeout()),
            "300",
            null,
            "trainPS: seconds a trainer's pull may wait for slower trainers (sync, SSP) before it"
                + " fails naming them"),
        new Setting<>(
            "ps.connectTimeout",
            SettingType.seconds(true, DAY),
            seconds(DEFAULTS.connectTimeout()),
            "60",
            null,
            "trainPS: seconds a trainer may take to connect to all servers"),
        new Setting<>(
            "ps.callTimeout",
            SettingType.seconds(true, DAY),
            seconds(DEFAULTS.callTimeout()),
            "600",
            null,
            "trainPS: seconds one pull or push may take, waiting for a restarted server included"),
        new Setting<>(
            "ps.threads",
            SettingType.intIn(1, 1024),
            DEFAULTS.threads(),
            Integer.toString(DEFAULTS.threads()),
            null,
            "trainPS: threads of each parameter server; a shard's rows are worked on by one at a"
                + " time, more read and write several trainers' frames at once (a dense model's"
                + " large frames gain from two)"));
  }

  private static double seconds(Duration d) {
    return d.toMillis() / 1000.0;
  }

  /**
   * Whether {@code key} (without the engine's prefix) belongs to the parameter-server settings.
   *
   * @param key the key
   * @return true for a {@code ps.*} key
   */
  public static boolean owns(String key) {
    return key.startsWith(KEY_PREFIX);
  }

  /**
   * Parses the {@code ps.*} keys of {@code raw} (keys without the engine's prefix), ignoring the
   * others.
   *
   * @param raw the run's settings
   * @param prefix the engine's prefix, for messages
   * @param declarations the engine's declarations
   * @param engineOnly the engine's own {@code ps.*} settings, accepted here and parsed by the
   *     engine (Spark's {@code ps.servers})
   * @return the typed settings
   * @throws RunnerException for an invalid value, or an unknown {@code ps.*} key (naming the
   *     closest known one)
   */
  public static PsSettings parse(
      Map<String, String> raw, String prefix, Declarations declarations, List<Setting<?>> engineOnly) {
    List<Setting<?>> known = new ArrayList<>(engineOnly);
    known.addAll(declarations.all());
    for (String k : new TreeSet<>(raw.keySet())) {
      if (owns(k) && known.stream().noneMatch(s -> s.name().equals(k))) {
        String closest =
            known.stream()
                .map(Setting::name)
                .min(
                    Comparator.comparingInt(
                        n -> RunnerSettings.distance(n.toLowerCase(), k.toLowerCase())))
                .orElseThrow();
        List<String> names = new ArrayList<>();
        known.forEach(s -> names.add(s.name()));
        throw new RunnerException(
            prefix
                + k
                + " is not a Warren setting (did you mean "
                + prefix
                + closest
                + "? the parameter-server settings are "
                + String.join(", ", names)
                + ")",
            null);
      }
    }
    Declarations d = declarations;
    return new PsSettings(
        d.checkpointDir().from(raw, prefix),
        d.checkpointEvery().from(raw, prefix).orElseThrow(),
        d.host().from(raw, prefix),
        duration(d.pullTimeout(), raw, prefix),
        duration(d.connectTimeout(), raw, prefix),
        duration(d.callTimeout(), raw, prefix),
        d.threads().from(raw, prefix).orElseThrow());
  }

  private static Duration duration(Setting<Double> s, Map<String, String> raw, String prefix) {
    return Duration.ofMillis((long) (s.from(raw, prefix).orElseThrow() * 1000));
  }
}
