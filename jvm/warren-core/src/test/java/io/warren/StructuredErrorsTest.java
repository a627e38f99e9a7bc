package io.warren;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The exceptions of real failures carry their fields (built by the native library, not parsed
 * from the message): the lost peer's rank and task id, both declarations of a mismatch, the
 * lost task ids of an impossible recovery, the rank that aborted.
 */
class StructuredErrorsTest {

  /** Runs {@code body} as rank 0 of {@code tracker} in another thread; returns what it threw. */
  private static CompletableFuture<Throwable> rankZero(Tracker tracker, Map<String, String> extra, TestSupport.Body<Void> body) {
    Map<String, String> mine = new HashMap<>(tracker.workerSettings("0"));
    mine.putAll(extra);
    return CompletableFuture.supplyAsync(
        () -> {
          Communicator comm = Communicator.create(mine);
          try {
            body.run(comm);
            comm.close();
            return null;
          } catch (Throwable t) {
            comm.abort();
            return t;
          }
        });
  }

  @Test
  @Timeout(30)
  void aMistypedSettingIsRefusedNamingTheClosestKey() {
    WarrenConfigException e =
        assertThrows(
            WarrenConfigException.class,
            () -> Communicator.create(Map.of("WARREN_TIMEOUT", "5")).close());
    assertTrue(
        e.getMessage().contains("WARREN_TIMEOUT is not a Warren setting (did you mean WARREN_TIMEOUT_S?)"),
        e.getMessage());
  }

  @Test
  @Timeout(90)
  void aKilledPeerIsNamedByRankAndTaskId() throws Exception {
    try (Tracker tracker = Tracker.start(2, TestSupport.SECRET)) {
      Map<String, String> plain = Map.of("WARREN_TIMEOUT_S", "60", "WARREN_ROBUST", "0");
      Map<String, String> childEnv = new HashMap<>(tracker.workerSettings("1"));
      childEnv.putAll(plain);
      try (TestSupport.Worker child = new TestSupport.Worker(List.of(), childEnv, "hang")) {
        CompletableFuture<Throwable> result =
            rankZero(tracker, plain, comm -> {
              comm.allreduce(new float[1024], Op.SUM);
              return null;
            });
        child.awaitLine("WORKER_READY", Duration.ofSeconds(60));
        Thread.sleep(300); // rank 0 is now blocked in allreduce
        child.process.destroyForcibly();
        Throwable t = result.get(30, TimeUnit.SECONDS);
        PeerLostException e = assertInstanceOf(PeerLostException.class, t, String.valueOf(t));
        assertEquals(1, e.rank(), e.getMessage());
        assertEquals("1", e.taskId(), e.getMessage());
        assertNotNull(e.reason());
        assertTrue(e.getMessage().contains(e.reason()), e.getMessage());
      }
    }
  }

  @Test
  @Timeout(60)
  void aMismatchCarriesBothDeclarationsOnEveryRank() throws Exception {
    // Three ranks, each with an array of a different length (100, 101, 102 doubles): every rank
    // fails, and each names two different ranks' declarations, each with that rank's own size.
    List<TestSupport.Outcome<Void>> out =
        TestSupport.threads(
            3,
            Map.of("WARREN_TIMEOUT_S", "20"),
            Duration.ofSeconds(50),
            comm -> {
              comm.allreduce(new double[100 + comm.rank()], Op.SUM);
              return null;
            });
    for (TestSupport.Outcome<Void> o : out) {
      CollectiveMismatchException e =
          assertInstanceOf(CollectiveMismatchException.class, o.error, String.valueOf(o.error));
      CallDeclaration a = e.first();
      CallDeclaration b = e.second();
      assertNotNull(a, e.getMessage());
      assertNotNull(b, e.getMessage());
      assertNotEquals(a.rank(), b.rank(), e.getMessage());
      assertTrue(e.getMessage().contains(a.call()) && e.getMessage().contains(b.call()), e.getMessage());
      for (CallDeclaration d : List.of(a, b)) {
        long bytes = 8L * (100 + d.rank());
        assertTrue(d.call().contains(bytes + " bytes f64 sum"), d.call());
        // The same field by field, set by the native library.
        assertEquals(bytes, d.bytes(), d.toString());
        assertTrue(d.collective().startsWith("allreduce"), d.collective());
        assertEquals("f64", d.dataType());
        assertEquals("sum", d.op());
        assertEquals(0, d.seq());
        assertEquals(-1, d.root());
        assertEquals(-1, d.tag());
        assertEquals(null, d.key());
      }
    }
  }

  @Test
  @Timeout(60)
  void aCallAfterAFailureIsAbortedByThisRank() throws Exception {
    List<TestSupport.Outcome<CollectiveAbortedException>> out =
        TestSupport.threads(
            2,
            Map.of("WARREN_TIMEOUT_S", "20"),
            Duration.ofSeconds(50),
            comm -> {
              assertThrows(
                  CollectiveMismatchException.class,
                  () -> comm.allreduce(new int[1 + comm.rank()], Op.SUM));
              CollectiveAbortedException e = assertThrows(CollectiveAbortedException.class, comm::barrier);
              assertEquals(comm.rank(), e.rank(), e.getMessage());
              return e;
            });
    for (TestSupport.Outcome<CollectiveAbortedException> o : out) {
      CollectiveAbortedException e = o.get();
      assertTrue(e.reason().contains("mismatch"), e.reason());
    }
    assertNotEquals(out.get(0).get().rank(), out.get(1).get().rank());
  }

  @Test
  @Timeout(120)
  void anImpossibleRecoveryNamesTheLostTaskIdsOnEveryWorker() throws Exception {
    try (Tracker tracker = Tracker.start(2, TestSupport.SECRET)) {
      Map<String, String> robust = Map.of("WARREN_TIMEOUT_S", "60", "WARREN_ROBUST", "1");
      Map<String, String> childEnv = new HashMap<>(tracker.workerSettings("1"));
      childEnv.putAll(robust);
      try (TestSupport.Worker child = new TestSupport.Worker(List.of(), childEnv, "call-before-load", "hang")) {
        CompletableFuture<Throwable> result =
            rankZero(tracker, robust, comm -> {
              comm.allreduce(new float[] {1f}, Op.SUM);
              comm.checkpoint(new byte[] {1}, null);
              comm.allreduce(new float[] {1f}, Op.SUM); // waits for task 1's replacement
              return null;
            });
        child.awaitLine("WORKER_READY", Duration.ofSeconds(60));
        child.process.destroyForcibly().waitFor();
        Map<String, String> again = new HashMap<>(childEnv);
        again.put("WARREN_ATTEMPT", "1");
        // The replacement makes the plain call of version 0 again instead of loading the
        // checkpoint: its result is gone on every worker.
        try (TestSupport.Worker replacement = new TestSupport.Worker(List.of(), again, "call-before-load")) {
          Throwable t = result.get(60, TimeUnit.SECONDS);
          RecoveryImpossibleException e =
              assertInstanceOf(RecoveryImpossibleException.class, t, String.valueOf(t));
          assertEquals(List.of("1"), e.lostTaskIds(), e.getMessage());
          assertTrue(e.reason().contains("a restarted worker must call load_checkpoint()"), e.reason());
          assertNotEquals(0, replacement.await(Duration.ofSeconds(60)), replacement.output());
          assertEquals("LOST_TASK_IDS [1]", replacement.awaitLine("LOST_TASK_IDS", Duration.ofSeconds(1)));
        }
      }
    }
  }
}
