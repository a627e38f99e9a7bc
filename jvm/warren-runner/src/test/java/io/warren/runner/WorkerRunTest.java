package io.warren.runner;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.warren.Checkpoint;
import io.warren.CollectiveInterruptedException;
import io.warren.JobFailedException;
import io.warren.Communicator;
import io.warren.Op;
import io.warren.WarrenException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;

/** The worker body on real trackers and sockets, workers as threads of this JVM. */
class WorkerRunTest {
  private static final int WORKERS = 3;
  private static final int ITERS = 20;

  /** Sums {@code taskId + it} over the workers each iteration; resumes from its checkpoint. */
  private static double train(Communicator comm, int taskId, int failAt) {
    Checkpoint ckpt = comm.loadCheckpoint();
    double acc = ckpt.version() == 0 ? 0 : ByteBuffer.wrap(ckpt.global()).getDouble();
    for (int it = ckpt.version(); it < ITERS; it++) {
      if (it == failAt) {
        throw new IllegalStateException("injected failure of task " + taskId + " at " + it);
      }
      double[] x = {taskId + it};
      comm.allreduce(x, Op.SUM);
      acc += x[0];
      comm.checkpoint(ByteBuffer.allocate(8).putDouble(acc).array(), null);
    }
    return acc;
  }

  @Test
  void aThrowingWorkerIsAbortedSoItsNextAttemptRecoversFromItsPeers() throws Exception {
    ExecutorService pool = Executors.newCachedThreadPool();
    try (Trackers trackers = Trackers.start(WORKERS, "127.0.0.1", 1, Duration.ofSeconds(60))) {
      Map<String, String> base = trackers.workerSettings(Map.of()).get(0);
      Future<?>[] results = new Future<?>[WORKERS];
      for (int t = 0; t < WORKERS; t++) {
        int task = t;
        Map<String, String> s = WorkerRun.taskSettings(base, Integer.toString(t), 0);
        results[t] =
            pool.submit(
                () -> WorkerRun.run(s, WorkerRun.Options.plain(), c -> train(c, task, task == 1 ? 8 : -1)));
      }
      Exception e = assertThrows(Exception.class, () -> results[1].get(60, TimeUnit.SECONDS));
      assertTrue(e.getCause().getMessage().contains("injected failure"), e.toString());
      // The engine runs the task again: attempt 1, same task id.
      Map<String, String> again = WorkerRun.taskSettings(base, "1", 1);
      results[1] = pool.submit(() -> WorkerRun.run(again, WorkerRun.Options.plain(), c -> train(c, 1, -1)));
      // sum over iterations of sum over tasks of (task + it), computed here in closed form
      double expected = ITERS * (0 + 1 + 2) + WORKERS * (ITERS * (ITERS - 1) / 2.0);
      for (Future<?> f : results) {
        assertEquals(expected, (Double) f.get(120, TimeUnit.SECONDS));
      }
      assertEquals(WORKERS, trackers.tracker(0).awaitCompletion(Duration.ofSeconds(30)).workers());
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void aKillMarkAbortsAWorkerBlockedInACollectiveWithinSeconds() throws Exception {
    ExecutorService pool = Executors.newCachedThreadPool();
    AtomicBoolean killed = new AtomicBoolean();
    CountDownLatch release = new CountDownLatch(1);
    try (Trackers trackers = Trackers.start(2, "127.0.0.1", 1, Duration.ofSeconds(60))) {
      Map<String, String> base = trackers.workerSettings(Map.of()).get(0);
      WorkerRun.Options watched = new WorkerRun.Options(killed::get, "t", 0, null);
      Future<Object> blocked =
          pool.submit(
              () ->
                  WorkerRun.run(
                      WorkerRun.taskSettings(base, "0", 0),
                      watched,
                      c -> c.allreduce(new double[] {1}, Op.SUM)));
      Future<Object> idle =
          pool.submit(
              () ->
                  WorkerRun.run(
                      WorkerRun.taskSettings(base, "1", 0),
                      WorkerRun.Options.plain(),
                      c -> {
                        release.await(60, TimeUnit.SECONDS);
                        throw new IllegalStateException("done idling");
                      }));
      Thread.sleep(1000);
      long start = System.nanoTime();
      killed.set(true);
      Exception e = assertThrows(Exception.class, () -> blocked.get(30, TimeUnit.SECONDS));
      double took = (System.nanoTime() - start) / 1e9;
      assertTrue(e.getCause() instanceof WarrenException, e.toString());
      assertTrue(took < 10, "the kill took " + took + " s to abort the call");
      release.countDown();
      assertThrows(Exception.class, () -> idle.get(30, TimeUnit.SECONDS));
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void aWorkerWhoseJobAnotherFailedFinallyEndsOnlyOnceTheEngineKillsIt() throws Exception {
    ExecutorService pool = Executors.newCachedThreadPool();
    AtomicBoolean killed = new AtomicBoolean();
    try (Trackers trackers = Trackers.start(2, "127.0.0.1", 1, Duration.ofSeconds(60))) {
      Map<String, String> base = trackers.workerSettings(Map.of()).get(0);
      WorkerRun.Options watched = new WorkerRun.Options(killed::get, "t", 0, null);
      Future<Object> waiting =
          pool.submit(
              () ->
                  WorkerRun.run(
                      WorkerRun.taskSettings(base, "0", 0),
                      watched,
                      c -> {
                        c.checkpoint(new byte[] {1}, null);
                        return c.allreduce(new double[] {1}, Op.SUM);
                      }));
      Future<Object> failing =
          pool.submit(
              () ->
                  WorkerRun.run(
                      WorkerRun.taskSettings(base, "1", 0),
                      WorkerRun.Options.plain(),
                      c -> {
                        c.checkpoint(new byte[] {1}, null);
                        c.failJob("the rows of task 1 cannot be parsed");
                        throw new IllegalArgumentException("the rows of task 1 cannot be parsed");
                      }));
      assertThrows(Exception.class, () -> failing.get(30, TimeUnit.SECONDS));
      // Task 0 learns of the failure at once, but ends only when the engine marks it killed:
      // one that failed at once would be re-run by an engine that retries failed tasks.
      Thread.sleep(1500);
      assertTrue(!waiting.isDone(), "task 0 ended before the engine killed it");
      long start = System.nanoTime();
      killed.set(true);
      Exception e = assertThrows(Exception.class, () -> waiting.get(10, TimeUnit.SECONDS));
      double took = (System.nanoTime() - start) / 1e9;
      assertTrue(e.getCause() instanceof JobFailedException, e.toString());
      assertTrue(e.getCause().getMessage().contains("cannot be parsed"), e.getCause().getMessage());
      assertTrue(took < 2, "task 0 took " + took + " s to end after the kill");
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void aKillMarkEndsAWorkerStillJoiningATrackerThatHasStopped() throws Exception {
    ExecutorService pool = Executors.newCachedThreadPool();
    try {
      Map<String, String> base;
      try (Trackers trackers = Trackers.start(2, "127.0.0.1", 1, Duration.ofSeconds(60))) {
        base = trackers.workerSettings(Map.of()).get(0);
      }
      // Nothing listens at the tracker's address any more: the join retries it until
      // WARREN_CONNECT_TIMEOUT_S (300 s by default) unless the kill mark ends it.
      long start = System.nanoTime();
      BooleanSupplier killed = () -> System.nanoTime() - start > TimeUnit.MILLISECONDS.toNanos(500);
      WorkerRun.Options watched = new WorkerRun.Options(killed, "t", 0, null);
      Future<Object> joining =
          pool.submit(() -> WorkerRun.run(WorkerRun.taskSettings(base, "0", 1), watched, c -> "joined"));
      Exception e = assertThrows(Exception.class, () -> joining.get(30, TimeUnit.SECONDS));
      double took = (System.nanoTime() - start) / 1e9;
      assertTrue(e.getCause() instanceof CollectiveInterruptedException, e.toString());
      assertTrue(took < 10, "the kill took " + took + " s to end the join");
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void theTrackersOfEveryAttemptShareASecretAndEachHasItsOwnAddress() {
    try (Trackers trackers = Trackers.start(2, "127.0.0.1", 3, Duration.ofSeconds(60))) {
      List<Map<String, String>> all = trackers.workerSettings(Map.of("WARREN_TIMEOUT_S", "5"));
      assertEquals(3, all.size());
      assertEquals(3, all.stream().map(m -> m.get("WARREN_TRACKER_URI")).distinct().count());
      assertEquals(1, all.stream().map(m -> m.get("WARREN_JOB_SECRET")).distinct().count());
      all.forEach(m -> assertEquals("5", m.get("WARREN_TIMEOUT_S")));
      all.forEach(m -> assertTrue(!m.containsKey("WARREN_TASK_ID"), m.toString()));
      trackers.closeAttempt(0);
      assertTrue(trackers.tracker(0).isClosed());
      assertTrue(!trackers.tracker(1).isClosed());
    }
  }

  @Test
  void theTrackersOfARunWithTlsSpeakTlsAndRefusePlainWorkersAtOnce() {
    RunnerSettings settings = RunnerSettings.parse(Map.of("tls", "true"), "warren.");
    try (Trackers trackers =
        Trackers.start(1, "127.0.0.1", 1, Duration.ofSeconds(60), null, settings.tls())) {
      Map<String, String> base = trackers.workerSettings(settings.workerSettings()).get(0);
      assertEquals("1", base.get("WARREN_TLS"));
      Map<String, String> plain = new java.util.HashMap<>(WorkerRun.taskSettings(base, "0", 0));
      plain.remove("WARREN_TLS");
      long started = System.nanoTime();
      WarrenException e = assertThrows(WarrenException.class, () -> Communicator.create(plain).abort());
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
      assertTrue(e.getMessage().contains("TLS mismatch"), e.getMessage());
      assertTrue(ms < 5000, "refused after " + ms + " ms");
      double[] x = {2};
      Communicator.run(WorkerRun.taskSettings(base, "0", 0), c -> {
        c.allreduce(x, Op.SUM);
        return null;
      });
      assertEquals(2, x[0]);
    }
  }
}
