package io.warren;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link Communicator#takeViewChange()} with a real elastic tracker and workers as threads of
 * this JVM (real sockets): a join and a removal at scheduled checkpoint versions, and a lost
 * worker given up on after the rejoin timeout. The expected views are written out by hand.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ViewChangeTest {

  /** What one worker saw: the checkpoint version after which a change came, and the change. */
  record Seen(int version, ViewChange change) {}

  /** What one worker did: where it started, the changes it saw, its world size at the end. */
  record Run(int startVersion, List<Seen> changes, int finalWorld, boolean left) {}

  /**
   * Checkpoints up to version {@code last}, allreducing a 1 per worker before each checkpoint (so
   * the sum must be the world size), and takes the view change after each.
   */
  private static Run train(Communicator comm, int last) {
    int start = comm.loadCheckpoint().version();
    assertNull(comm.takeViewChange(), "no change before the first checkpoint");
    List<Seen> seen = new ArrayList<>();
    while (comm.version() < last) {
      int[] one = {1};
      try {
        comm.allreduce(one, Op.SUM);
      } catch (RolledBackException e) {
        int v = comm.loadCheckpoint().version();
        seen.add(new Seen(v, comm.takeViewChange()));
        continue;
      }
      assertEquals(comm.worldSize(), one[0], "every member adds its 1");
      comm.checkpoint(new byte[] {(byte) comm.version()}, null);
      ViewChange c = comm.takeViewChange();
      if (c != null) {
        seen.add(new Seen(comm.version(), c));
        assertNull(comm.takeViewChange(), "a change is taken once");
        if (c.left()) {
          return new Run(start, seen, c.newWorldSize(), true);
        }
        assertEquals(c.newRank(), comm.rank(), "rank() follows the change");
        assertEquals(c.newWorldSize(), comm.worldSize(), "worldSize() follows the change");
      }
    }
    return new Run(start, seen, comm.worldSize(), false);
  }

  private static Future<Run> worker(ExecutorService pool, Tracker tracker, String task, int last) {
    Map<String, String> settings = tracker.workerSettings(task);
    return pool.submit(
        () -> {
          try (Communicator comm = Communicator.create(settings)) {
            return train(comm, last);
          }
        });
  }

  @Test
  void aJoinAndARemovalAreReportedOnceWithTheNewRanks() throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(3);
    try (Tracker tracker =
        Tracker.builder(2, TestSupport.SECRET).elastic(new Tracker.Elastic(1, 3, null)).start()) {
      CountDownLatch scheduled = new CountDownLatch(1);
      List<Future<Run>> first = new ArrayList<>();
      for (String task : List.of("0", "1")) {
        Map<String, String> settings = tracker.workerSettings(task);
        first.add(
            pool.submit(
                () -> {
                  try (Communicator comm = Communicator.create(settings)) {
                    // The first view is made: wait until the schedule is in place.
                    assertTrue(scheduled.await(60, TimeUnit.SECONDS), "the schedule was set");
                    return train(comm, 6);
                  }
                }));
      }
      long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (true) {
        try {
          tracker.list();
          break;
        } catch (TrackerException e) {
          assertTrue(System.nanoTime() < until, "the first view was not made");
          Thread.sleep(10);
        }
      }
      tracker.addWorker("2", 2); // joins at version 2, or the first boundary after it registers
      tracker.removeWorker("0", 4); // leaves after version 4
      Future<Run> joiner = worker(pool, tracker, "2", 6);
      // A head start for the joiner's registration (a join after 2 is still checked below).
      Thread.sleep(200);
      scheduled.countDown();

      Run r0 = first.get(0).get(90, TimeUnit.SECONDS);
      Run r1 = first.get(1).get(90, TimeUnit.SECONDS);
      Run r2 = joiner.get(90, TimeUnit.SECONDS);
      int joined = r2.startVersion();
      assertTrue(joined >= 2 && joined < 4, "task 2 joined at the scheduled version 2 or before the removal: " + r2);

      // Task 1: {0,1} -> {0,1,2} after version 2 (rank 1 stays 1), {0,1,2} -> {1,2} after 4 (1 -> 0).
      assertEquals(2, r1.changes().size(), "task 1 saw two changes: " + r1);
      ViewChange grow = r1.changes().get(0).change();
      assertEquals(joined, r1.changes().get(0).version());
      assertEquals(List.of("0", "1"), grow.oldMembers());
      assertEquals(List.of("0", "1", "2"), grow.newMembers());
      assertEquals(List.of("2"), grow.joined());
      assertEquals(List.of(), grow.leftTasks());
      assertEquals(2, grow.oldWorldSize());
      assertEquals(3, grow.newWorldSize());
      assertEquals(1, grow.oldRank());
      assertEquals(1, grow.newRank());
      assertEquals("1", grow.taskId());
      ViewChange shrink = r1.changes().get(1).change();
      assertEquals(4, r1.changes().get(1).version());
      assertEquals(List.of("1", "2"), shrink.newMembers());
      assertEquals(List.of("0"), shrink.leftTasks());
      assertEquals(List.of(), shrink.joined());
      assertEquals(1, shrink.oldRank());
      assertEquals(0, shrink.newRank());
      assertTrue(grow.newEpoch() > grow.oldEpoch(), "the epoch grows: " + grow);
      assertEquals(grow.newEpoch(), shrink.oldEpoch(), "the second change starts from the first's view");
      assertTrue(shrink.newEpoch() > shrink.oldEpoch(), "the epoch grows: " + shrink);
      assertEquals(2, r1.finalWorld());

      // Task 0: the same grow, then it left (rank 0 -> none).
      assertEquals(2, r0.changes().size(), "task 0 saw two changes: " + r0);
      assertEquals(grow.newMembers(), r0.changes().get(0).change().newMembers());
      assertEquals(0, r0.changes().get(0).change().newRank());
      ViewChange gone = r0.changes().get(1).change();
      assertTrue(r0.left());
      assertTrue(gone.left());
      assertEquals(-1, gone.newRank());
      assertEquals(0, gone.oldRank());
      assertEquals(List.of("0"), gone.leftTasks());

      // Task 2 joined at version 2 (its start is no change: it was never in the old view), then
      // saw task 0 leave: rank 2 -> 1.
      assertEquals(1, r2.changes().size(), "task 2 saw one change: " + r2);
      ViewChange seen2 = r2.changes().get(0).change();
      assertEquals(4, r2.changes().get(0).version());
      assertEquals(2, seen2.oldRank());
      assertEquals(1, seen2.newRank());
      assertEquals(shrink.newEpoch(), seen2.newEpoch(), "every member sees the same view");
      assertTrue(seen2.toString().contains("workers 3 -> 2"), seen2.toString());
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void aLostWorkerGivenUpOnIsAChangeAfterTheRollBack() throws Exception {
    try (Tracker tracker =
        Tracker.builder(3, TestSupport.SECRET).elastic(new Tracker.Elastic(2, 3, Duration.ofMillis(500))).start()) {
      List<TestSupport.Outcome<Run>> outs =
          TestSupport.threads(
              tracker,
              3,
              Map.of(),
              Duration.ofSeconds(90),
              comm -> {
                if (comm.rank() == 2) {
                  // Task 2 fails after checkpoint 2 and does not come back.
                  comm.loadCheckpoint();
                  while (comm.version() < 2) {
                    comm.allreduce(new int[] {1}, Op.SUM);
                    comm.checkpoint(new byte[] {(byte) comm.version()}, null);
                  }
                  comm.abort();
                  return null;
                }
                return train(comm, 5);
              });
      for (int task = 0; task < 2; task++) {
        Run r = outs.get(task).get();
        assertEquals(1, r.changes().size(), "task " + task + " saw one change: " + r);
        Seen s = r.changes().get(0);
        assertEquals(2, s.version(), "rolled back to the last checkpoint, 2");
        ViewChange c = s.change();
        assertEquals(List.of("0", "1", "2"), c.oldMembers());
        assertEquals(List.of("0", "1"), c.newMembers());
        assertEquals(List.of("2"), c.leftTasks());
        assertEquals(task, c.oldRank());
        assertEquals(task, c.newRank());
        assertEquals(2, r.finalWorld());
      }
    }
  }
}
