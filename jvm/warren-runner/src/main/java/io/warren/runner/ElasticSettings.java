package io.warren.runner;

import io.warren.Tracker;
import java.time.Duration;
import java.util.List;
import java.util.Map;

/**
 * The elastic-membership settings of a run ({@code elastic}, {@code minWorkers}, {@code
 * rejoinTimeout} under the engine's prefix), parsed, the same on every engine; each engine gives
 * the doc lines, which say what its scheduler does with a lost worker.
 *
 * @param enabled {@code elastic}: the run goes on without a lost worker
 * @param minWorkers {@code minWorkers}: never fewer workers
 * @param rejoinTimeout {@code rejoinTimeout}: how long the others wait for a lost worker's
 *     replacement before going on without it
 */
public record ElasticSettings(boolean enabled, int minWorkers, Duration rejoinTimeout) {

  /** A fixed world: not elastic. */
  public static final ElasticSettings OFF = new ElasticSettings(false, 1, Duration.ofSeconds(1));

  /**
   * The declarations of the elastic settings on one engine.
   *
   * @param elastic {@code elastic}
   * @param minWorkers {@code minWorkers}
   * @param rejoinTimeout {@code rejoinTimeout}
   */
  public record Declarations(Setting<Boolean> elastic, Setting<Integer> minWorkers, Setting<Double> rejoinTimeout) {
    /**
     * Every declaration, in the order of the docs.
     *
     * @return the settings
     */
    public List<Setting<?>> all() {
      return List.of(elastic, minWorkers, rejoinTimeout);
    }

    /**
     * Whether {@code key} (without the engine's prefix) is an elastic setting.
     *
     * @param key the key
     * @return true for {@code elastic}, {@code minWorkers}, {@code rejoinTimeout}
     */
    public boolean owns(String key) {
      return all().stream().anyMatch(s -> s.name().equals(key));
    }
  }

  /**
   * The declarations, with the engine's doc lines.
   *
   * @param elasticDoc the doc line of {@code elastic}
   * @param minWorkersDoc the doc line of {@code minWorkers}
   * @param rejoinTimeoutDoc the doc line of {@code rejoinTimeout}
   * @return the declarations
   */
  public static Declarations declarations(String elasticDoc, String minWorkersDoc, String rejoinTimeoutDoc) {
    return new Declarations(
        new Setting<>("elastic", SettingType.bool(), OFF.enabled(), "false", null, elasticDoc),
        new Setting<>("minWorkers", SettingType.intIn(1, 1000000), OFF.minWorkers(), "1", null, minWorkersDoc),
        new Setting<>(
            "rejoinTimeout",
            SettingType.seconds(false, 86400.0),
            OFF.rejoinTimeout().toMillis() / 1000.0,
            "1",
            null,
            rejoinTimeoutDoc));
  }

  /**
   * Parses the elastic keys of {@code raw} (keys without the engine's prefix), ignoring the
   * others.
   *
   * @param raw the run's settings
   * @param prefix the engine's prefix, for messages
   * @param d the engine's declarations
   * @return the typed settings
   * @throws RunnerException for an invalid value
   */
  public static ElasticSettings parse(Map<String, String> raw, String prefix, Declarations d) {
    return new ElasticSettings(
        d.elastic().from(raw, prefix).orElseThrow(),
        d.minWorkers().from(raw, prefix).orElseThrow(),
        Duration.ofMillis((long) (d.rejoinTimeout().from(raw, prefix).orElseThrow() * 1000)));
  }

  /**
   * The tracker's limits of an elastic run of {@code numWorkers} ({@link JobPlan#start}), with
   * arrivals admitted (a worker that was not in the first view joins at a checkpoint boundary
   * when it registers).
   *
   * @param numWorkers the run's workers, the most there are
   * @return the limits, or null for a fixed world
   */
  public Tracker.Elastic limits(int numWorkers) {
    return enabled ? new Tracker.Elastic(minWorkers, numWorkers, rejoinTimeout, true) : null;
  }
}
