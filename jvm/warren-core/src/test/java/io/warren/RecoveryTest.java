package io.warren;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Retry-one recovery through the Java API: checkpoints, bootstrap calls, abort. */
class RecoveryTest {
  private static final Map<String, String> CACHE = Map.of("WARREN_BOOTSTRAP_CACHE", "1");
  private static final int ITERS = 30;

  /** Runs 3 worker JVMs; if {@code killAt > 0}, destroys task 1 after that iteration and restarts it. */
  private static List<String> run(int killAt) throws Exception {
    try (Tracker tracker = Tracker.start(3, TestSupport.SECRET)) {
      List<TestSupport.Worker> workers = new ArrayList<>();
      for (int i = 0; i < 3; i++) {
        Map<String, String> env = new HashMap<>(tracker.workerSettings(Integer.toString(i)));
        env.putAll(CACHE);
        workers.add(new TestSupport.Worker(List.of(), env, "train", Integer.toString(ITERS), "40"));
      }
      List<TestSupport.Worker> all = new ArrayList<>(workers);
      try {
        return collect(tracker, workers, all, killAt);
      } finally {
        all.forEach(TestSupport.Worker::close);
      }
    }
  }

  private static List<String> collect(
      Tracker tracker, List<TestSupport.Worker> workers, List<TestSupport.Worker> all, int killAt)
      throws Exception {
    if (killAt > 0) {
      TestSupport.Worker victim = workers.get(1);
      victim.awaitLine("ITER " + killAt, Duration.ofSeconds(60));
      victim.process.destroyForcibly().waitFor();
      Map<String, String> env = new HashMap<>(tracker.workerSettings("1"));
      env.putAll(CACHE);
      env.put("WARREN_ATTEMPT", "1");
      TestSupport.Worker replacement =
          new TestSupport.Worker(List.of(), env, "train", Integer.toString(ITERS), "40");
      all.add(replacement);
      workers.set(1, replacement);
    }
    List<String> models = new ArrayList<>();
    for (TestSupport.Worker w : workers) {
      assertEquals(0, w.await(Duration.ofSeconds(120)), w.output());
      models.add(w.awaitLine("MODEL ", Duration.ofSeconds(1)));
    }
    if (killAt > 0) {
      assertTrue(workers.get(1).awaitLine("RESUMED version=", Duration.ofSeconds(1)).length() > 0);
      for (int i : new int[] {0, 2}) {
        String ok = workers.get(i).awaitLine("WORKER_OK", Duration.ofSeconds(1));
        assertTrue(!ok.endsWith("recoveries=0"), "survivor took no part in a recovery: " + ok);
      }
    }
    JobReport report = tracker.awaitCompletion(Duration.ofSeconds(30));
    assertTrue(report.toString().length() > 0);
    return models;
  }

  @Test
  void aKilledWorkerJvmRestartedWithItsTaskIdEndsWithTheFailureFreeModel() throws Exception {
    List<String> clean = run(0);
    assertEquals(1, clean.stream().distinct().count(), clean.toString());
    List<String> recovered = run(12);
    assertEquals(clean, recovered);
  }

  @Test
  void checkpointsInAWorldOfOne() {
    try (Communicator comm = Communicator.create(Map.of())) {
      Checkpoint c0 = comm.loadCheckpoint();
      assertEquals(0, c0.version());
      assertEquals(0, c0.global().length);
      assertNull(c0.local());
      comm.checkpoint(new byte[] {1, 2, 3}, null);
      comm.checkpoint(new byte[] {4}, new byte[] {5, 6});
      assertEquals(2, comm.version());
      Checkpoint c = comm.loadCheckpoint();
      assertEquals(2, c.version());
      assertEquals(1, c.global().length);
      assertEquals(2, c.local().length);
      assertEquals(0, comm.recoveries());
      int[] n = {7};
      comm.allreduce(n, Op.MAX, CallOptions.bootstrap());
      assertEquals(7, n[0]);
      assertEquals(3, comm.broadcast(new byte[] {1, 2, 3}, 0, CallOptions.bootstrap()).length);
      double[] d = {1.5};
      comm.allreduce(d, Op.SUM, CallOptions.defaults().withKey("explicit"));
      assertEquals(1.5, d[0]);
    }
  }

  @Test
  void abortIsIdempotentAndClosesTheCommunicator() {
    Communicator comm = Communicator.create(Map.of());
    comm.abort();
    comm.abort();
    comm.close();
    assertTrue(comm.isClosed());
  }
}
