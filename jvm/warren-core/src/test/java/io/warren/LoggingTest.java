package io.warren;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Native log records reach SLF4J, under io.warren.native.*, filtered by the enabled level. */
class LoggingTest {

  @Test
  void theTrackersInformationLinesAreEchoedToTheConsoleWhileAsked() throws Exception {
    java.io.PrintStream err = System.err;
    java.io.ByteArrayOutputStream captured = new java.io.ByteArrayOutputStream();
    System.setErr(new java.io.PrintStream(captured, true, "UTF-8"));
    try {
      NativeLog.log(3, "warren::tracker::server", "tracker: before the echo");
      try (AutoCloseable echo = NativeLog.echoTrackerToConsole()) {
        NativeLog.log(3, "warren::tracker::server", "tracker: all 2 workers arrived");
        NativeLog.log(3, "warren::engine", "[rank 0] an engine line");
        NativeLog.log(2, "warren::tracker::server", "tracker: a warning");
      }
      NativeLog.log(3, "warren::tracker::server", "tracker: after the echo");
    } finally {
      System.setErr(err);
    }
    String out = captured.toString("UTF-8");
    assertTrue(out.contains("[warren] tracker: all 2 workers arrived"), out);
    assertFalse(out.contains("[warren] tracker: before"), out);
    assertFalse(out.contains("[warren] tracker: after"), out);
    assertFalse(out.contains("[warren] [rank 0] an engine line"), out); // only the tracker's
    assertFalse(out.contains("[warren] tracker: a warning"), out); // warnings show anyway
  }

  @Test
  void theTrackersInformationLinesAreCollectedWhileAsked() {
    NativeLog.log(3, "warren::tracker::server", "tracker: before the collection");
    List<String> drained;
    List<String> after;
    try (NativeLog.TrackerLines lines = NativeLog.collectTrackerLines()) {
      NativeLog.log(3, "warren::tracker::server", "tracker: all 2 workers arrived");
      NativeLog.log(3, "warren::engine", "[rank 0] an engine line");
      NativeLog.log(2, "warren::tracker::server", "tracker: a warning");
      NativeLog.log(3, "warren::tracker::server", "[rank 0] progress: job 1");
      drained = lines.drain();
      NativeLog.log(3, "warren::tracker::server", "tracker: job finished");
      lines.close();
      NativeLog.log(3, "warren::tracker::server", "tracker: after the collection");
      after = lines.drain();
    }
    assertEquals(List.of("tracker: all 2 workers arrived", "[rank 0] progress: job 1"), drained);
    assertEquals(List.of("tracker: job finished"), after, "what came before close stays readable");
  }

  @Test
  void aCollectionNobodyReadsKeepsAtMostItsLimit() {
    try (NativeLog.TrackerLines lines = NativeLog.collectTrackerLines()) {
      for (int i = 0; i < NativeLog.TrackerLines.LIMIT + 5; i++) {
        NativeLog.log(3, "warren::tracker::server", "line " + i);
      }
      List<String> kept = lines.drain();
      assertEquals(NativeLog.TrackerLines.LIMIT, kept.size());
      assertEquals("line 0", kept.get(0));
    }
  }

  @Test
  @Timeout(60)
  void nativeRecordsGoToSlf4j() throws Exception {
    try (TestSupport.Worker w =
        new TestSupport.Worker(
            List.of("-Dorg.slf4j.simpleLogger.defaultLogLevel=info"), Map.of(), "print")) {
      assertEquals(0, w.await(Duration.ofSeconds(50)), w.output());
      // slf4j-simple: "[thread] INFO logger - message"
      assertTrue(
          w.output().contains("INFO io.warren.native.warren.engine - [rank 0] hello from the JVM"),
          w.output());
    }
  }

  @Test
  @Timeout(60)
  void disabledLevelsAreFilteredNatively() throws Exception {
    try (TestSupport.Worker w =
        new TestSupport.Worker(
            List.of("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"), Map.of(), "print")) {
      assertEquals(0, w.await(Duration.ofSeconds(50)), w.output());
      assertFalse(w.output().contains("hello from the JVM"), w.output());
    }
    NativeLoader.ensureLoaded();
    assertTrue(NativeLog.enabledLevel() >= 1);
  }

  @Test
  @Timeout(60)
  void trackerThreadsLogThroughTheCachedClass() throws Exception {
    // The tracker logs from its own (native) threads, which the bridge attaches to the JVM.
    TestSupport.threads(2, Map.of(), Duration.ofSeconds(50), comm -> {
      comm.print("from a tracker thread's point of view");
      return null;
    }).forEach(TestSupport.Outcome::get);
  }
}
