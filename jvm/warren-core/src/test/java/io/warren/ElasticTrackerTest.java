package io.warren;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The elastic tracker through the Java API: limits, {@code list()} and control requests. */
class ElasticTrackerTest {

  @Test
  void anElasticTrackerListsItsTasksAndAppliesOrRefusesChanges() throws Exception {
    try (Tracker tracker =
        Tracker.start(
            2, TestSupport.SECRET, "127.0.0.1", 0, Duration.ZERO, null, new Tracker.Elastic(2, 3, null))) {
      TrackerException early = assertThrows(TrackerException.class, tracker::list);
      assertTrue(early.getMessage().contains("has not started yet"), early.getMessage());
      // Both workers are in the first view while they run: each lists the job from inside.
      List<TestSupport.Outcome<List<Tracker.TaskInfo>>> seen =
          TestSupport.threads(
              tracker,
              2,
              Map.of(),
              Duration.ofSeconds(60),
              comm -> {
                comm.barrier();
                List<Tracker.TaskInfo> l = tracker.list();
                comm.barrier();
                return l;
              });
      List<Tracker.TaskInfo> want =
          List.of(new Tracker.TaskInfo("0", "running", 0), new Tracker.TaskInfo("1", "running", 1));
      assertEquals(want, seen.get(0).get());
      tracker.addWorker("2", -1);
      assertEquals(new Tracker.TaskInfo("2", "joining", -1), tracker.list().get(2));
      TrackerException full = assertThrows(TrackerException.class, () -> tracker.addWorker("3", -1));
      assertTrue(full.getMessage().contains("maximum of 3 workers"), full.getMessage());
      TrackerException member = assertThrows(TrackerException.class, () -> tracker.restart("0", -1));
      assertTrue(member.getMessage().contains("task 0 is already a member"), member.getMessage());
      tracker.removeWorker("0", -1);
      TrackerException below = assertThrows(TrackerException.class, () -> tracker.removeWorker("1", -1));
      assertTrue(below.getMessage().contains("below the minimum of 2"), below.getMessage());
    }
  }

  @Test
  void withAdmitArrivalsANewcomerIsAdmittedWithoutAddWorker() throws Exception {
    try (Tracker tracker =
        Tracker.start(
            2, TestSupport.SECRET, "127.0.0.1", 0, Duration.ZERO, null, new Tracker.Elastic(1, 3, null, true))) {
      Map<String, String> newcomer = tracker.workerSettings("2");
      CompletableFuture<Throwable> joining = new CompletableFuture<>();
      List<TestSupport.Outcome<Tracker.TaskInfo>> seen =
          TestSupport.threads(
              tracker,
              2,
              Map.of(),
              Duration.ofSeconds(60),
              comm -> {
                comm.barrier();
                Tracker.TaskInfo third = null;
                if (comm.rank() == 0) {
                  // Task 2 registers while the job runs; nobody calls addWorker.
                  Thread t =
                      new Thread(
                          () -> {
                            try (Communicator c = Communicator.create(newcomer)) {
                              joining.complete(null);
                            } catch (Throwable e) {
                              joining.complete(e);
                            }
                          });
                  t.setDaemon(true);
                  t.start();
                  long until = System.nanoTime() + Duration.ofSeconds(30).toNanos();
                  while (third == null && System.nanoTime() < until) {
                    List<Tracker.TaskInfo> l = tracker.list();
                    if (l.size() == 3) third = l.get(2);
                    else Thread.sleep(10);
                  }
                }
                comm.barrier();
                return third;
              });
      assertEquals(new Tracker.TaskInfo("2", "joining", -1), seen.get(0).get());
      assertEquals(2, tracker.list().stream().filter(t -> t.rank() >= 0).count(), "joins at a boundary, not before");
      tracker.close();
      // With the tracker gone the waiting newcomer gives up instead of waiting on.
      assertTrue(joining.get(30, TimeUnit.SECONDS) != null, "the newcomer never joined a boundary here");
    }
  }

  @Test
  void badLimitsAreRefusedNamingThem() {
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> new Tracker.Elastic(3, 2, null));
    assertTrue(e.getMessage().contains("1 <= minWorkers <= maxWorkers, got 3 and 2"), e.getMessage());
    WarrenConfigException outside =
        assertThrows(
            WarrenConfigException.class,
            () ->
                Tracker.start(
                    4, TestSupport.SECRET, "127.0.0.1", 0, Duration.ZERO, null, new Tracker.Elastic(1, 3, null)));
    assertTrue(outside.getMessage().contains("min-workers (1) <= workers (4) <= max-workers (3)"), outside.getMessage());
  }
}
