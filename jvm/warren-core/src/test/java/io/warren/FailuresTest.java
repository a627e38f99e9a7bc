package io.warren;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Each failure surfaces as the documented exception class, on the right ranks, in time. */
class FailuresTest {

  @Test
  @Timeout(60)
  void wrongSecretIsAnAuthException() {
    try (Tracker tracker = Tracker.start(2, TestSupport.SECRET)) {
      Map<String, String> s = tracker.workerSettings("0");
      s.put("WARREN_JOB_SECRET", "not-the-secret");
      s.put("WARREN_CONNECT_TIMEOUT_S", "10");
      WarrenAuthException e =
          assertThrows(WarrenAuthException.class, () -> Communicator.create(s));
      assertTrue(e.getMessage().contains("secret"), e.getMessage());
    }
  }

  @Test
  @Timeout(60)
  void aRankThatNeverCallsIsATimeout() throws Exception {
    long started = System.nanoTime();
    List<TestSupport.Outcome<String>> out =
        TestSupport.threads(
            2,
            Map.of("WARREN_TIMEOUT_S", "1"),
            Duration.ofSeconds(50),
            comm -> {
              if (comm.rank() == 0) {
                comm.allreduce(new float[16], Op.SUM);
                return "returned";
              }
              Thread.sleep(3000); // rank 1 never calls
              return "slept";
            });
    assertInstanceOf(WarrenTimeoutException.class, out.get(0).error, String.valueOf(out.get(0).error));
    assertTrue(out.get(0).error.getMessage().contains("1"), out.get(0).error.getMessage());
    assertTrue(System.nanoTime() - started < TimeUnit.SECONDS.toNanos(30));
  }

  @Test
  @Timeout(60)
  void arraysOfDifferentLengthsInPiecesFailOnEveryRank() throws Exception {
    // Rank 1's array has one more 4 KiB piece than rank 0's: the pieces carry the array's
    // length, so the first piece already differs instead of rank 0's next call pairing with
    // rank 1's last piece.
    List<TestSupport.Outcome<Void>> out =
        TestSupport.threads(
            2,
            Map.of("WARREN_TIMEOUT_S", "20", "WARREN_JNI_ARRAY_SEGMENT_BYTES", "4096"),
            Duration.ofSeconds(50),
            comm -> {
              comm.allreduce(new float[1024 * (2 + comm.rank())], Op.SUM);
              comm.allreduce(new float[1024], Op.SUM);
              return null;
            });
    for (TestSupport.Outcome<Void> o : out) {
      assertInstanceOf(CollectiveMismatchException.class, o.error, String.valueOf(o.error));
    }
  }

  @Test
  @Timeout(60)
  void afterAFailureTheCommunicatorIsAborted() throws Exception {
    List<TestSupport.Outcome<Throwable>> out =
        TestSupport.threads(
            2,
            Map.of("WARREN_TIMEOUT_S", "20"),
            Duration.ofSeconds(50),
            comm -> {
              assertThrows(
                  CollectiveMismatchException.class,
                  () -> comm.allreduce(new int[1 + comm.rank()], Op.SUM));
              return assertThrows(WarrenException.class, comm::barrier);
            });
    for (TestSupport.Outcome<Throwable> o : out) {
      assertInstanceOf(CollectiveAbortedException.class, o.get());
    }
  }

  @Test
  @Timeout(90)
  void aKilledPeerIsPeerLostOnTheOthers() throws Exception {
    try (Tracker tracker = Tracker.start(2, TestSupport.SECRET)) {
      Map<String, String> childEnv = new HashMap<>(tracker.workerSettings("1"));
      childEnv.put("WARREN_TIMEOUT_S", "60");
      childEnv.put("WARREN_ROBUST", "0");
      try (TestSupport.Worker child = new TestSupport.Worker(List.of(), childEnv, "hang")) {
        Map<String, String> mine = tracker.workerSettings("0");
        mine.put("WARREN_TIMEOUT_S", "60");
        // Plain mode: a lost peer fails the call (robust mode would wait for a replacement).
        mine.put("WARREN_ROBUST", "0");
        CompletableFuture<Throwable> result =
            CompletableFuture.supplyAsync(
                () -> {
                  try (Communicator comm = Communicator.create(mine)) {
                    comm.allreduce(new float[1024], Op.SUM);
                    return null;
                  } catch (Throwable t) {
                    return t;
                  }
                });
        child.awaitLine("WORKER_READY", Duration.ofSeconds(60));
        Thread.sleep(300); // rank 0 is now blocked in allreduce
        long killed = System.nanoTime();
        child.process.destroyForcibly();
        Throwable t = result.get(30, TimeUnit.SECONDS);
        long tookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killed);
        assertInstanceOf(PeerLostException.class, t, String.valueOf(t));
        assertTrue(t.getMessage().contains("rank 1"), t.getMessage());
        assertTrue(tookMs < 10_000, "PeerLost took " + tookMs + " ms, deadline was 60 s");
      }
    }
  }

  @Test
  void closedCommunicatorGivesAClearException() {
    Communicator comm = Communicator.create(Map.of());
    comm.close();
    comm.close(); // idempotent
    assertTrue(comm.isClosed());
    IllegalStateException e =
        assertThrows(IllegalStateException.class, () -> comm.allreduce(new float[1], Op.SUM));
    assertTrue(e.getMessage().contains("closed"), e.getMessage());
    assertThrows(IllegalStateException.class, comm::rank);
    assertThrows(IllegalStateException.class, comm::barrier);
    assertThrows(IllegalStateException.class, () -> comm.broadcast(new byte[1], 0));
  }

  @Test
  void zeroHandlesAreRefusedByTheNativeSide() {
    NativeLoader.ensureLoaded();
    IllegalStateException e =
        assertThrows(IllegalStateException.class, () -> Native.commRank(0));
    assertTrue(e.getMessage().contains("Communicator is closed"), e.getMessage());
    assertThrows(
        IllegalStateException.class, () -> Native.commAllreduceF32(0, new float[1], 1, null, 0));
    assertThrows(IllegalStateException.class, () -> Native.trackerUri(0));
    Native.commClose(0); // a no-op, not a crash
    Native.trackerClose(0);
  }

  @Test
  void closedTrackerGivesAClearException() {
    Tracker t = Tracker.start(1, TestSupport.SECRET);
    t.close();
    t.close();
    assertThrows(IllegalStateException.class, t::uri);
    assertThrows(IllegalStateException.class, () -> t.awaitCompletion(Duration.ofSeconds(1)));
  }

  @Test
  void badArgumentsAreRefused() {
    try (Communicator comm = Communicator.create(Map.of())) {
      assertThrows(
          WarrenArgumentException.class, () -> comm.allreduce(new float[4], Op.BIT_XOR));
      assertThrows(
          IllegalArgumentException.class,
          () -> comm.allreduce(ByteBuffer.allocate(16), DataType.F32, Op.SUM));
      assertThrows(
          IllegalArgumentException.class,
          () ->
              comm.allreduce(
                  ByteBuffer.allocateDirect(16).order(ByteOrder.BIG_ENDIAN == ByteOrder.nativeOrder() ? ByteOrder.LITTLE_ENDIAN : ByteOrder.BIG_ENDIAN),
                  DataType.F32,
                  Op.SUM));
      ByteBuffer odd = ByteBuffer.allocateDirect(16).order(ByteOrder.nativeOrder());
      odd.limit(6);
      assertThrows(WarrenArgumentException.class, () -> comm.allreduce(odd, DataType.F32, Op.SUM));
      assertThrows(WarrenArgumentException.class, () -> comm.broadcast(new byte[1], 3));
      assertThrows(NullPointerException.class, () -> comm.allreduce((float[]) null, Op.SUM));
      // The communicator is still usable after refused arguments.
      float[] x = {2f};
      comm.allreduce(x, Op.SUM);
      assertEquals(2f, x[0]);
    }
  }

  @Test
  void badSettingsAreAConfigException() {
    WarrenConfigException e =
        assertThrows(
            WarrenConfigException.class,
            () -> Communicator.create(Map.of("WARREN_NUM_WORKERS", "four")));
    assertTrue(e.getMessage().contains("WARREN_NUM_WORKERS"), e.getMessage());
    assertThrows(
        WarrenConfigException.class,
        () -> Communicator.create(Map.of("WARREN_JNI_ARRAY_ACCESS", "sometimes")));
    assertThrows(WarrenConfigException.class, () -> Tracker.start(2, ""));
  }

  @Test
  @Timeout(30)
  void trackerWaitTimesOutWhenWorkersNeverCome() {
    try (Tracker tracker = Tracker.start(2, TestSupport.SECRET)) {
      WarrenTimeoutException e =
          assertThrows(
              WarrenTimeoutException.class,
              () -> tracker.awaitCompletion(Duration.ofMillis(200)));
      assertNotNull(e.getMessage());
    }
  }

  /**
   * A worker that finds an error no re-run can mend outside Warren's calls fails the whole job:
   * the tracker's outcome names it, and the communicator refuses every later call.
   */
  @Test
  @Timeout(30)
  void failJobFailsTheJobAtTheTracker() throws Exception {
    try (Tracker tracker = Tracker.start(2, TestSupport.SECRET)) {
      List<TestSupport.Outcome<Void>> out =
          TestSupport.threads(tracker, 2, Map.of(), Duration.ofSeconds(20), comm -> {
            comm.barrier();
            if (comm.rank() == 1) {
              comm.failJob("the model cannot be decoded");
              assertThrows(WarrenException.class, comm::barrier);
            }
            return null;
          });
      // (closing the failed communicator may throw; the body's own assertion must hold)
      assertFalse(out.get(1).error instanceof AssertionError, String.valueOf(out.get(1).error));
      TrackerException e =
          assertThrows(TrackerException.class, () -> tracker.awaitCompletion(Duration.ofSeconds(10)));
      assertTrue(e.getMessage().contains("cannot succeed on retry: the model cannot be decoded"), e.getMessage());
    }
  }

  @Test
  @Timeout(30)
  void trackerReportsTheJob() throws Exception {
    try (Tracker tracker = Tracker.start(2, TestSupport.SECRET)) {
      Map<String, String> s = tracker.workerSettings();
      assertEquals(tracker.uri(), s.get("WARREN_TRACKER_URI"));
      assertEquals("2", s.get("WARREN_NUM_WORKERS"));
      assertEquals(TestSupport.SECRET, s.get("WARREN_JOB_SECRET"));
      TestSupport.threads(tracker, 2, Map.of(), Duration.ofSeconds(20), comm -> {
        comm.barrier();
        comm.print("hello from rank " + comm.rank());
        return null;
      }).forEach(TestSupport.Outcome::get);
      JobReport r = tracker.awaitCompletion(Duration.ofSeconds(10));
      assertEquals(2, r.workers());
      assertTrue(!r.elapsed().isNegative());
    }
  }

  @Test
  @Timeout(30)
  void settingsAreServedWhileAnotherThreadAwaitsCompletion() throws Exception {
    try (Tracker tracker = Tracker.start(1, TestSupport.SECRET)) {
      CompletableFuture<Object> waiting =
          CompletableFuture.supplyAsync(
              () -> {
                try {
                  return tracker.awaitCompletion(Duration.ofSeconds(20));
                } catch (Throwable t) {
                  return t;
                }
              });
      Thread.sleep(200); // the waiter is inside awaitCompletion now
      Map<String, String> s = tracker.workerSettings("0"); // must not wait for it
      try (Communicator c = Communicator.create(s)) {
        c.barrier();
      }
      assertInstanceOf(JobReport.class, waiting.get(20, TimeUnit.SECONDS));
    }
  }

  @Test
  @Timeout(90)
  void aKilledPeerInAWorldOfThreeFailsBothOthersPromptly() throws Exception {
    try (Tracker tracker = Tracker.start(3, TestSupport.SECRET)) {
      Map<String, String> childEnv = new HashMap<>(tracker.workerSettings("2"));
      childEnv.put("WARREN_TIMEOUT_S", "60");
      childEnv.put("WARREN_ROBUST", "0");
      try (TestSupport.Worker child = new TestSupport.Worker(List.of(), childEnv, "hang")) {
        CompletableFuture<List<TestSupport.Outcome<Void>>> others =
            CompletableFuture.supplyAsync(
                () -> {
                  try {
                    return TestSupport.threads(
                        tracker, 2, Map.of("WARREN_TIMEOUT_S", "60", "WARREN_ROBUST", "0"), Duration.ofSeconds(80),
                        comm -> {
                          comm.allreduce(new double[100_000], Op.SUM);
                          return null;
                        });
                  } catch (Exception e) {
                    throw new RuntimeException(e);
                  }
                });
        child.awaitLine("WORKER_READY", Duration.ofSeconds(60));
        Thread.sleep(300);
        long killed = System.nanoTime();
        child.process.destroyForcibly();
        List<TestSupport.Outcome<Void>> out = others.get(60, TimeUnit.SECONDS);
        long tookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killed);
        for (TestSupport.Outcome<Void> o : out) {
          assertInstanceOf(PeerLostException.class, o.error, String.valueOf(o.error));
        }
        assertTrue(tookMs < 10_000, "took " + tookMs + " ms, deadline was 60 s");
      }
    }
  }
}
