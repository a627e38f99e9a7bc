package io.warren.runner;

import io.warren.TlsSettings;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeSet;
import java.util.regex.Pattern;

/**
 * The settings of a Warren run, parsed and validated, and the one declaration of every setting
 * (name, type, default, accepted values, doc line) from which {@link #parse} validates a run's
 * settings before anything starts and {@link #markdownTable} renders the docs' tables.
 *
 * <p>Keys are engine-neutral ({@code timeout}); each engine shows them under its prefix ({@code
 * spark.warren.}, {@code warren.}), which only appears in messages. Unknown keys fail: the
 * prefix belongs to Warren, so an unknown key is a typo or a setting of another version, and
 * ignoring it would run the job with a default the user meant to change. The error names the
 * closest known key.
 *
 * @param recovery {@code recovery}
 * @param checkpointDir {@code checkpointDir}, if set
 * @param durableEvery {@code durableEvery} (0 taken as 1), or {@code setting.WARREN_DURABLE_EVERY}
 * @param checkpointDirTimeout {@code checkpointDirTimeout}, seconds
 * @param trackerHost {@code trackerHost}, if set
 * @param rendezvousTimeout {@code rendezvousTimeout}, seconds
 * @param slotWaitTimeout {@code slotWaitTimeout}, seconds
 * @param progressInterval {@code progressInterval}, seconds
 * @param workerSettings the {@code WARREN_*} settings for every worker: the mapped settings that
 *     are set, then the {@code setting.WARREN_*} ones as given (which win)
 */
public record RunnerSettings(
    Recovery recovery,
    Optional<String> checkpointDir,
    int durableEvery,
    double checkpointDirTimeout,
    Optional<String> trackerHost,
    double rendezvousTimeout,
    double slotWaitTimeout,
    double progressInterval,
    Map<String, String> workerSettings) {

  /** The key prefix (after the engine's) of the settings passed to every worker as is. */
  public static final String PASS_THROUGH = "setting.";

  private static final double DAY = 86400.0;

  /** Default of {@code checkpointDirTimeout}, seconds. */
  public static final double DEFAULT_CHECKPOINT_DIR_TIMEOUT_S = 60.0;

  /** Default of {@code progressInterval}, seconds. */
  public static final double DEFAULT_PROGRESS_INTERVAL_S = 10.0;

  /** {@code recovery}. */
  public static final Setting<String> RECOVERY =
      new Setting<>(
          "recovery",
          SettingType.oneOf("retry-one", "fail-all"),
          "retry-one",
          "`retry-one`",
          null,
          "`retry-one`: the engine re-runs only a failed worker, which catches up from its peers;"
              + " `fail-all`: every worker re-runs from the durable checkpoint");

  /** {@code checkpointDir}. */
  public static final Setting<String> CHECKPOINT_DIR =
      new Setting<>(
          "checkpointDir",
          SettingType.text(),
          null,
          "",
          "WARREN_CHECKPOINT_DIR",
          "fail-all (required): directory of the durable checkpoints, a local path of a shared file"
              + " system or a Hadoop URI (`hdfs://nn:8020/dir`); a new subdirectory per run");

  /** {@code durableEvery}. */
  public static final Setting<Integer> DURABLE_EVERY =
      new Setting<>(
          "durableEvery",
          SettingType.intIn(0, 1000000),
          1,
          "1",
          "WARREN_DURABLE_EVERY",
          "fail-all: make every k-th checkpoint durable (0 is taken as 1)");

  /** {@code checkpointDirTimeout}. */
  public static final Setting<Double> CHECKPOINT_DIR_TIMEOUT =
      new Setting<>(
          "checkpointDirTimeout",
          SettingType.seconds(true, DAY),
          DEFAULT_CHECKPOINT_DIR_TIMEOUT_S,
          "60",
          null,
          "fail-all, remote `checkpointDir`: seconds the driver may take to create (and remove) the"
              + " run's directory");

  /** {@code timeout}. */
  public static final Setting<Double> TIMEOUT =
      new Setting<>(
          "timeout",
          SettingType.seconds(true, DAY),
          null,
          "1800",
          "WARREN_TIMEOUT_S",
          "seconds one collective call may take");

  /** {@code connectTimeout}. */
  public static final Setting<Double> CONNECT_TIMEOUT =
      new Setting<>(
          "connectTimeout",
          SettingType.seconds(true, DAY),
          null,
          "300",
          "WARREN_CONNECT_TIMEOUT_S",
          "seconds to join the job and to re-link after a failure");

  /** {@code peerTimeout}. */
  public static final Setting<Double> PEER_TIMEOUT =
      new Setting<>(
          "peerTimeout",
          SettingType.seconds(false, DAY),
          null,
          "30",
          "WARREN_PEER_TIMEOUT_S",
          "seconds without a heartbeat after which the tracker fences a worker (paused, frozen or"
              + " cut off): the others go on without it and the engine kills and re-runs its task"
              + " (0: no heartbeats)");

  /** {@code bootstrapCache}. */
  public static final Setting<Boolean> BOOTSTRAP_CACHE =
      new Setting<>(
          "bootstrapCache",
          SettingType.bool(),
          null,
          "true",
          "WARREN_BOOTSTRAP_CACHE",
          "keep the results of bootstrap calls for the whole job, so that a worker restarted at any"
              + " time can replay them");

  /** {@code localReplicas}. */
  public static final Setting<Integer> LOCAL_REPLICAS =
      new Setting<>(
          "localReplicas",
          SettingType.intIn(0, 1000),
          null,
          "2",
          "WARREN_LOCAL_REPLICAS",
          "workers that keep a copy of each worker's local model, on other hosts first");

  /** {@code reductionOrder}. */
  public static final Setting<String> REDUCTION_ORDER =
      new Setting<>(
          "reductionOrder",
          SettingType.oneOf("ranks", "hosts"),
          null,
          "`ranks`",
          "WARREN_REDUCTION_ORDER",
          "the order in which a large allreduce adds the workers' values; `ranks`: fixed by the"
              + " ranks alone, so every run of the job gives the same model bits wherever its tasks"
              + " run; `hosts`: a hierarchy of hosts, which sends less between hosts but adds in an"
              + " order fixed by which tasks share a host: two runs may end with different models");

  /** {@code tls}. */
  public static final Setting<Boolean> TLS =
      new Setting<>(
          "tls",
          SettingType.bool(),
          null,
          "false",
          "WARREN_TLS",
          "encryption in transit (TLS 1.3) on every connection that can leave a host: the"
              + " trackers, the workers' links and (trainPS) the parameter servers and their"
              + " trainers; keyed from the job secret, or from `tls.ca`, `tls.cert` and `tls.key`"
              + " when given");

  /** {@code tls.ca}. */
  public static final Setting<String> TLS_CA =
      new Setting<>(
          "tls.ca",
          SettingType.text(),
          null,
          "",
          "WARREN_TLS_CA",
          "with `tls` and user certificates: PEM bundle of the authorities that sign every end's"
              + " certificate (at this path on the driver or client and on every worker host)");

  /** {@code tls.cert}. */
  public static final Setting<String> TLS_CERT =
      new Setting<>(
          "tls.cert",
          SettingType.text(),
          null,
          "",
          "WARREN_TLS_CERT",
          "with `tls.ca`: PEM certificate chain every process presents (mutual TLS)");

  /** {@code tls.key}. */
  public static final Setting<String> TLS_KEY =
      new Setting<>(
          "tls.key",
          SettingType.text(),
          null,
          "",
          "WARREN_TLS_KEY",
          "with `tls.ca`: PEM private key of `tls.cert`");

  /** {@code trackerHost}. */
  public static final Setting<String> TRACKER_HOST =
      new Setting<>(
          "trackerHost",
          SettingType.text(),
          null,
          "the driver's or client's host",
          null,
          "address the tracker binds and advertises to the workers");

  /** {@code rendezvousTimeout}. */
  public static final Setting<Double> RENDEZVOUS_TIMEOUT =
      new Setting<>(
          "rendezvousTimeout",
          SettingType.seconds(true, DAY),
          600.0,
          "600",
          null,
          "seconds all workers have to arrive at the tracker (fail-all re-runs: bounded by"
              + " `connectTimeout`)");

  /** {@code slotWaitTimeout}. */
  public static final Setting<Double> SLOT_WAIT_TIMEOUT =
      new Setting<>(
          "slotWaitTimeout",
          SettingType.seconds(false, DAY),
          0.0,
          "0",
          null,
          "seconds the driver (Flink: the client) waits for enough free task slots (executors or"
              + " TaskManagers registering) before failing");

  /** {@code progressInterval}. */
  public static final Setting<Double> PROGRESS_INTERVAL =
      new Setting<>(
          "progressInterval",
          SettingType.seconds(false, DAY),
          DEFAULT_PROGRESS_INTERVAL_S,
          "10",
          null,
          "seconds between rank 0's progress lines in the driver log (0: none)");

  /** Every setting, in the order of the docs. */
  public static final List<Setting<?>> ALL =
      List.of(
          RECOVERY,
          CHECKPOINT_DIR,
          DURABLE_EVERY,
          CHECKPOINT_DIR_TIMEOUT,
          TIMEOUT,
          CONNECT_TIMEOUT,
          PEER_TIMEOUT,
          BOOTSTRAP_CACHE,
          LOCAL_REPLICAS,
          REDUCTION_ORDER,
          TLS,
          TLS_CA,
          TLS_CERT,
          TLS_KEY,
          TRACKER_HOST,
          RENDEZVOUS_TIMEOUT,
          SLOT_WAIT_TIMEOUT,
          PROGRESS_INTERVAL);

  /** Worker settings a {@code setting.} key may name. */
  private static final Pattern WORKER_KEY = Pattern.compile("WARREN_[A-Z0-9_]+");

  /**
   * Parses and validates {@code raw} (keys without the engine's prefix): every value, every key.
   *
   * @param raw the run's settings, keys without the prefix
   * @param prefix the engine's prefix ({@code spark.warren.}), for messages
   * @return the typed settings
   * @throws RunnerException for the first invalid value (naming the setting, the value and the
   *     accepted values) or unknown key (naming the closest known one)
   */
  public static RunnerSettings parse(Map<String, String> raw, String prefix) {
    new TreeSet<>(raw.keySet()).forEach(k -> checkKey(k, prefix));
    Map<String, String> durableRaw = raw;
    if (!raw.containsKey(DURABLE_EVERY.name())) {
      String passed = raw.get(PASS_THROUGH + "WARREN_DURABLE_EVERY");
      durableRaw = passed == null ? Map.of() : Map.of(DURABLE_EVERY.name(), passed);
    }
    int durable = DURABLE_EVERY.from(durableRaw, prefix).orElseThrow();
    Map<String, String> workers = new LinkedHashMap<>();
    for (Setting<?> s : List.of(TIMEOUT, CONNECT_TIMEOUT, PEER_TIMEOUT, LOCAL_REPLICAS)) {
      s.from(raw, prefix).ifPresent(v -> workers.put(s.worker(), number(v)));
    }
    for (Setting<Boolean> s : List.of(BOOTSTRAP_CACHE, TLS)) {
      s.from(raw, prefix).ifPresent(b -> workers.put(s.worker(), b ? "1" : "0"));
    }
    for (Setting<String> s : List.of(REDUCTION_ORDER, TLS_CA, TLS_CERT, TLS_KEY)) {
      s.from(raw, prefix).ifPresent(v -> workers.put(s.worker(), v));
    }
    raw.forEach(
        (k, v) -> {
          if (k.startsWith(PASS_THROUGH)) {
            workers.put(k.substring(PASS_THROUGH.length()), v);
          }
        });
    // The trackers read it too (trackerPeerTimeout): a passed-through value is checked alike.
    String peer = workers.get(PEER_TIMEOUT.worker());
    if (peer != null && PEER_TIMEOUT.kind().parse(peer).isEmpty()) {
      throw new RunnerException(
          prefix
              + PASS_THROUGH
              + PEER_TIMEOUT.worker()
              + " = \""
              + peer
              + "\": expected "
              + PEER_TIMEOUT.kind().expected(),
          null);
    }
    return new RunnerSettings(
        Recovery.of(RECOVERY.from(raw, prefix).orElseThrow()),
        CHECKPOINT_DIR.from(raw, prefix),
        Math.max(1, durable),
        CHECKPOINT_DIR_TIMEOUT.from(raw, prefix).orElseThrow(),
        TRACKER_HOST.from(raw, prefix),
        RENDEZVOUS_TIMEOUT.from(raw, prefix).orElseThrow(),
        SLOT_WAIT_TIMEOUT.from(raw, prefix).orElseThrow(),
        PROGRESS_INTERVAL.from(raw, prefix).orElseThrow(),
        Map.copyOf(workers));
  }

  /**
   * The peer timeout the run's trackers fence silent workers after: {@code peerTimeout} (or
   * {@code setting.WARREN_PEER_TIMEOUT_S}), which the workers are given too.
   *
   * @return null when not set (the tracker's default, 30 s); zero for no heartbeats
   */
  public Duration trackerPeerTimeout() {
    String v = workerSettings.get(PEER_TIMEOUT.worker());
    if (v == null) {
      return null;
    }
    double s = PEER_TIMEOUT.kind().parse(v).orElseThrow();
    return Duration.ofNanos((long) (s * 1e9));
  }

  /**
   * The TLS settings of the run's trackers (and of any other endpoint the driver or client
   * starts, such as parameter servers): those the workers are given, {@code tls*} or {@code
   * setting.WARREN_TLS*} (which win), so that both ends agree. Checked by the native library
   * where they are used (the first tracker, before any task starts): certificates without
   * {@code tls}, or only some of the three paths, fail there naming them.
   *
   * @return {@link TlsSettings#OFF} unless TLS was asked for
   */
  public TlsSettings tls() {
    return TlsSettings.fromSettings(workerSettings);
  }

  /**
   * The keys of {@code conf} that start with {@code prefix}, without it.
   *
   * @param conf settings with and without the prefix
   * @param prefix the engine's prefix
   * @return the prefixed ones, stripped
   */
  public static Map<String, String> stripped(Map<String, String> conf, String prefix) {
    Map<String, String> out = new LinkedHashMap<>();
    conf.forEach(
        (k, v) -> out.put(k.startsWith(prefix) ? k.substring(prefix.length()) : k, v));
    return out;
  }

  private static String number(Object v) {
    if (v instanceof Double d && d == Math.floor(d) && !d.isInfinite()) {
      return Long.toString(d.longValue());
    }
    return v.toString();
  }

  private static void checkKey(String name, String prefix) {
    if (name.startsWith(PASS_THROUGH)) {
      if (!WORKER_KEY.matcher(name.substring(PASS_THROUGH.length())).matches()) {
        throw new RunnerException(
            prefix
                + name
                + ": a worker setting must be named WARREN_ and upper-case letters, digits or _"
                + " (such as "
                + prefix
                + "setting.WARREN_TIMEOUT_S)",
            null);
      }
      return;
    }
    if (ALL.stream().anyMatch(s -> s.name().equals(name))) {
      return;
    }
    String lower = name.toLowerCase(java.util.Locale.ROOT);
    String closest =
        ALL.stream()
            .map(Setting::name)
            .min(Comparator.comparingInt(k -> distance(k.toLowerCase(java.util.Locale.ROOT), lower)))
            .orElseThrow();
    List<String> names = new ArrayList<>();
    ALL.forEach(s -> names.add(s.name()));
    throw new RunnerException(
        prefix
            + name
            + " is not a Warren setting (did you mean "
            + prefix
            + closest
            + "? the settings are "
            + String.join(", ", names)
            + ", and "
            + prefix
            + "setting.WARREN_* for worker settings)",
        null);
  }

  /**
   * The Levenshtein distance of two strings.
   *
   * @param a one string
   * @param b the other
   * @return the number of edits from one to the other
   */
  public static int distance(String a, String b) {
    int[] prev = new int[b.length() + 1];
    for (int j = 0; j <= b.length(); j++) {
      prev[j] = j;
    }
    for (int i = 1; i <= a.length(); i++) {
      int[] cur = new int[b.length() + 1];
      cur[0] = i;
      for (int j = 1; j <= b.length(); j++) {
        int sub = prev[j - 1] + (a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1);
        cur[j] = Math.min(sub, Math.min(prev[j] + 1, cur[j - 1] + 1));
      }
      prev = cur;
    }
    return prev[b.length()];
  }

  /**
   * The rows of an engine's settings table for {@code settings} (the columns of {@link
   * #markdownTable}).
   *
   * @param prefix the engine's prefix
   * @param settings the settings
   * @return one Markdown row per setting
   */
  public static List<String> markdownRows(String prefix, List<Setting<?>> settings) {
    List<String> rows = new ArrayList<>();
    for (Setting<?> s : settings) {
      rows.add("| `" + prefix + s.name() + "` | " + s.kind().expected() + " | " + s.defaultDoc() + " | " + s.doc() + " |");
    }
    return rows;
  }

  /**
   * The settings table of an engine's docs, rendered from the declarations.
   *
   * @param prefix the engine's prefix ({@code spark.warren.})
   * @param header the first column's header ({@code Spark setting})
   * @return the Markdown table, lines joined by {@code \n}
   */
  public static String markdownTable(String prefix, String header) {
    List<String> lines = new ArrayList<>();
    lines.add("| " + header + " | accepted values | default | meaning (worker setting) |");
    lines.add("|---|---|---|---|");
    for (Setting<?> s : ALL) {
      String worker = s.worker() == null ? "" : " (`" + s.worker() + "`)";
      lines.add(
          "| `"
              + prefix
              + s.name()
              + "` | "
              + s.kind().expected()
              + " | "
              + s.defaultDoc()
              + " | "
              + s.doc()
              + worker
              + " |");
    }
    lines.add(
        "| `"
            + prefix
            + "setting.WARREN_X` | any | | passed to every worker as `WARREN_X` (wins over the"
            + " mapped settings above) |");
    return String.join("\n", lines);
  }
}
