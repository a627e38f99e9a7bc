package io.warren.flink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.apache.flink.configuration.Configuration;
import org.junit.jupiter.api.Test;

/** What a run is told about Flink's heartbeat timeout against Warren's peer timeout. */
class HeartbeatsTest {
  @Test
  void flinksTimeoutIsReadAsADurationOrAsPlainMillisecondsAndDefaultsTo50s() {
    assertEquals(Duration.ofSeconds(50), Heartbeats.flinkTimeout(new Configuration()));
    Configuration c = new Configuration();
    c.setString("heartbeat.timeout", "8 s");
    assertEquals(Duration.ofSeconds(8), Heartbeats.flinkTimeout(c));
    c.setString("heartbeat.timeout", "12000");
    assertEquals(Duration.ofSeconds(12), Heartbeats.flinkTimeout(c));
  }

  @Test
  void theDefaultsSayAFrozenTaskManagerWaitsForFlinksTimeoutWithoutAWarning() {
    Heartbeats.Notes n = Heartbeats.check(Duration.ofSeconds(50), null, null);
    assertTrue(n.info().contains("warren.peerTimeout (30 s) is fenced"), n.info());
    assertTrue(n.info().contains("only after heartbeat.timeout (50 s)"), n.info());
    assertNull(n.warning());
  }

  @Test
  void aFlinkTimeoutWithinThePeerTimeoutNeedsNoAdvice() {
    Heartbeats.Notes n = Heartbeats.check(Duration.ofSeconds(10), Duration.ofSeconds(30), null);
    assertTrue(!n.info().contains("heartbeat.timeout"), n.info());
    assertNull(n.warning());
  }

  @Test
  void aFlinkTimeoutBeyondTheConnectTimeoutWarnsThatTheSurvivorsWouldGiveUp() {
    Heartbeats.Notes n = Heartbeats.check(Duration.ofSeconds(50), Duration.ofSeconds(10), Duration.ofSeconds(40));
    assertTrue(
        n.warning().startsWith("warren: Flink's heartbeat.timeout (50 s) is not below warren.connectTimeout (40 s)"),
        n.warning());
  }

  @Test
  void withoutHeartbeatsThereIsNothingToSay() {
    Heartbeats.Notes n = Heartbeats.check(Duration.ofSeconds(500), Duration.ZERO, Duration.ofSeconds(1));
    assertNull(n.info());
    assertNull(n.warning());
  }
}
