package io.warren.runner;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.warren.TlsSettings;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/** The engine-neutral settings under another engine's prefix (Spark's are in WarrenSettingsTest). */
class RunnerSettingsTest {
  private static final String PREFIX = "warren.";

  private static String refused(Map<String, String> raw) {
    return assertThrows(RunnerException.class, () -> RunnerSettings.parse(raw, PREFIX)).getMessage();
  }

  @Test
  void valuesAreTypedAndMessagesUseTheEnginesPrefix() {
    RunnerSettings s =
        RunnerSettings.parse(
            Map.of("recovery", "FAIL-ALL", "checkpointDir", "/tmp/c", "timeout", "2.5"), PREFIX);
    assertEquals(Recovery.FAIL_ALL, s.recovery());
    assertEquals(Optional.of("/tmp/c"), s.checkpointDir());
    assertEquals(Map.of("WARREN_TIMEOUT_S", "2.5"), s.workerSettings());
    assertEquals(
        "warren.timeout = \"soon\": expected a number of seconds > 0 and <= 86400",
        refused(Map.of("timeout", "soon")));
    String m = refused(Map.of("rendezvousTimout", "5"));
    assertTrue(m.startsWith("warren.rendezvousTimout is not a Warren setting (did you mean warren.rendezvousTimeout?"), m);
  }

  @Test
  void tlsReachesTheTrackersAndTheWorkersAlike() {
    assertEquals(TlsSettings.OFF, RunnerSettings.parse(Map.of(), PREFIX).tls());
    RunnerSettings s = RunnerSettings.parse(Map.of("tls", "on"), PREFIX);
    assertEquals(TlsSettings.jobSecret(), s.tls());
    assertEquals(Map.of("WARREN_TLS", "1"), s.workerSettings());
    // A pass-through wins for the trackers as for the workers: both ends stay alike.
    RunnerSettings off = RunnerSettings.parse(Map.of("tls", "true", "setting.WARREN_TLS", "0"), PREFIX);
    assertEquals(Map.of("WARREN_TLS", "0"), off.workerSettings());
    assertEquals(TlsSettings.fromSettings(Map.of("WARREN_TLS", "0")), off.tls());
  }

  @Test
  void theReductionOrderReachesTheWorkersAndABadOneIsRefused() {
    assertEquals(Map.of(), RunnerSettings.parse(Map.of(), PREFIX).workerSettings());
    assertEquals(
        Map.of("WARREN_REDUCTION_ORDER", "hosts"),
        RunnerSettings.parse(Map.of("reductionOrder", "Hosts"), PREFIX).workerSettings());
    assertEquals(
        "warren.reductionOrder = \"rank\": expected one of ranks, hosts",
        refused(Map.of("reductionOrder", "rank")));
    String m = refused(Map.of("reductionOrdr", "ranks"));
    assertTrue(m.startsWith("warren.reductionOrdr is not a Warren setting (did you mean warren.reductionOrder?"), m);
  }

  @Test
  void strippedKeepsKeysWithAndWithoutThePrefix() {
    assertEquals(
        Map.of("timeout", "1", "recovery", "fail-all"),
        RunnerSettings.stripped(Map.of("warren.timeout", "1", "recovery", "fail-all"), PREFIX));
  }

  @Test
  void theTableShowsTheEnginesKeys() {
    String t = RunnerSettings.markdownTable(PREFIX, "Flink setting");
    assertTrue(t.startsWith("| Flink setting |"), t);
    assertTrue(t.contains("| `warren.timeout` | a number of seconds > 0 and <= 86400 | 1800 |"), t);
    assertEquals(RunnerSettings.ALL.size() + 3, t.split("\n").length);
  }
}
