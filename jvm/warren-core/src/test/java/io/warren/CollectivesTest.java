package io.warren;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Every collective, element type and operator through the real native library. */
class CollectivesTest {

  @ParameterizedTest(name = "{0} workers as threads of one JVM")
  @ValueSource(ints = {1, 2, 3, 4})
  @Timeout(120)
  void threadsInOneJvm(int n) throws Exception {
    List<TestSupport.Outcome<Integer>> out =
        TestSupport.threads(
            n,
            Map.of(),
            Duration.ofSeconds(110),
            comm -> {
              assertEquals(n, comm.worldSize());
              Checks.all(comm);
              return comm.rank();
            });
    for (int i = 0; i < n; i++) {
      // Ranks are ordered by task id.
      assertEquals(i, out.get(i).get());
    }
  }

  @ParameterizedTest(name = "{0} workers as separate JVMs")
  @ValueSource(ints = {1, 2, 3, 4})
  @Timeout(180)
  void separateJvms(int n) throws Exception {
    try (Tracker tracker = Tracker.start(n, TestSupport.SECRET)) {
      List<TestSupport.Worker> workers = TestSupport.processes(tracker, n, Map.of(), "check");
      try {
        for (TestSupport.Worker w : workers) {
          assertEquals(0, w.await(Duration.ofSeconds(170)), w.output());
          assertTrue(w.output().contains("WORKER_OK"), w.output());
        }
      } finally {
        workers.forEach(TestSupport.Worker::close);
      }
      JobReport report = tracker.awaitCompletion(Duration.ofSeconds(10));
      assertEquals(n, report.workers());
      assertEquals(0, report.recoveries());
    }
  }

  @Test
  @Timeout(60)
  void worldOfOneNeedsNoTracker() {
    try (Communicator comm = Communicator.create(Map.of())) {
      assertEquals(0, comm.rank());
      assertEquals(1, comm.worldSize());
      Checks.all(comm);
      comm.print("world of one");
      assertTrue(comm.stats().contains("allreduce"), comm.stats());
    }
  }

  @Test
  @Timeout(120)
  void twoJobsAtOnceInOneJvm() throws Exception {
    // Communicators are not a singleton: two jobs of two workers each, four threads, one JVM.
    var jobA = new java.util.concurrent.CompletableFuture<List<TestSupport.Outcome<Float>>>();
    Thread a =
        new Thread(
            () -> {
              try {
                jobA.complete(
                    TestSupport.threads(
                        2,
                        Map.of(),
                        Duration.ofSeconds(100),
                        comm -> {
                          float[] x = {comm.rank() + 1f};
                          for (int i = 0; i < 200; i++) {
                            comm.allreduce(x, Op.MAX);
                          }
                          return x[0];
                        }));
              } catch (Throwable t) {
                jobA.completeExceptionally(t);
              }
            });
    a.start();
    List<TestSupport.Outcome<Float>> b =
        TestSupport.threads(
            2,
            Map.of(),
            Duration.ofSeconds(100),
            comm -> {
              float[] x = {10f * (comm.rank() + 1)};
              for (int i = 0; i < 200; i++) {
                comm.allreduce(x, Op.MIN);
              }
              return x[0];
            });
    List<TestSupport.Outcome<Float>> aOut = jobA.get();
    for (TestSupport.Outcome<Float> o : aOut) {
      assertEquals(2f, o.get());
    }
    for (TestSupport.Outcome<Float> o : b) {
      assertEquals(10f, o.get());
    }
  }

  @Test
  @Timeout(120)
  void criticalArrayAccessGivesTheSameResults() throws Exception {
    // One rank per JVM: the only configuration where critical access is safe (GcPressureTest).
    try (Tracker tracker = Tracker.start(2, TestSupport.SECRET)) {
      List<TestSupport.Worker> workers =
          TestSupport.processes(tracker, 2, Map.of("WARREN_JNI_ARRAY_ACCESS", "critical"), "check");
      try {
        for (TestSupport.Worker w : workers) {
          assertEquals(0, w.await(Duration.ofSeconds(110)), w.output());
        }
      } finally {
        workers.forEach(TestSupport.Worker::close);
      }
    }
  }

  @Test
  @Timeout(120)
  void arraysReducedInSmallPiecesGiveTheSerialResults() throws Exception {
    // 4 KiB pieces: every array of Checks longer than 512 elements goes piece by piece,
    // with a short last piece, for every element type and operator.
    List<TestSupport.Outcome<Void>> out =
        TestSupport.threads(
            3,
            Map.of("WARREN_JNI_ARRAY_SEGMENT_BYTES", "4096"),
            Duration.ofSeconds(110),
            comm -> {
              Checks.all(comm);
              return null;
            });
    out.forEach(TestSupport.Outcome::get);
  }

  @Test
  @Timeout(120)
  void aLargeArrayInDefaultPieces() throws Exception {
    int n = (3 << 20) / 4 + 7; // 3 MiB of floats and 7 more: three full 1 MiB pieces and one of 28 bytes
    List<TestSupport.Outcome<float[]>> out =
        TestSupport.threads(
            2,
            Map.of(),
            Duration.ofSeconds(110),
            comm -> {
              float[] x = new float[n];
              for (int i = 0; i < n; i++) {
                x[i] = (float) Checks.floatInput(comm.rank(), i);
              }
              return comm.allreduce(x, Op.SUM);
            });
    for (TestSupport.Outcome<float[]> o : out) {
      float[] got = o.get();
      for (int i = 0; i < n; i++) {
        assertEquals((float) Checks.expectedFloat(Op.SUM, 2, i), got[i], "element " + i);
      }
    }
  }
}
