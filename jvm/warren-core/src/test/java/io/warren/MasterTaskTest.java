package io.warren;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Tasks taken and reported explicitly ({@link MasterClient#getTask}, {@link
 * MasterClient#finish}, {@link MasterClient#fail}) through the real native library and a
 * {@link Master} over a file store: a task stays pending until it is reported, so a worker
 * can report it only once its contribution is safe.
 */
class MasterTaskTest {
  static List<String> strings(MasterTask t) {
    List<String> out = new ArrayList<>();
    t.records().forEach(r -> out.add(new String(r, StandardCharsets.UTF_8)));
    return out;
  }

  /** Takes tasks of pass 0 until none is left now; returns them unreported. */
  static List<MasterTask> takeAll(MasterClient c) {
    List<MasterTask> out = new ArrayList<>();
    for (MasterTask t = c.getTask(0); t.isTask(); t = c.getTask(0)) {
      out.add(t);
    }
    return out;
  }

  @Test
  void aTaskStaysPendingUntilFinishedAndThePassEndsWhenAllAre(@TempDir Path dir) {
    String glob = MasterTest.dataset(dir);
    try (Master m = MasterTest.master(dir, glob).start();
        MasterClient c = MasterClient.connect(m.workerSettings())) {
      long tasks = m.status().tasks();
      List<MasterTask> taken = takeAll(c);
      assertEquals(tasks, taken.size());
      List<String> all = new ArrayList<>();
      taken.forEach(t -> all.addAll(strings(t)));
      assertEquals(MasterTest.everyRecordOnce(), MasterTest.count(all), "every record exactly once");

      MasterStatus s = m.status();
      assertEquals(tasks, s.pending(), "read but not reported: still pending");
      assertEquals(0, s.done());
      MasterTask none = c.getTask(0);
      assertEquals(MasterTask.Kind.NONE_NOW, none.kind());
      assertTrue(none.records().isEmpty());
      assertThrows(IllegalArgumentException.class, () -> c.finish(none));

      for (MasterTask t : taken) {
        assertTrue(c.finish(t), "finish " + t);
      }
      assertFalse(c.finish(taken.get(0)), "a second report is stale");
      MasterTask over = c.getTask(0);
      assertEquals(MasterTask.Kind.PASS_FINISHED, over.kind());
      assertEquals(1, over.pass());
      assertEquals(1, m.status().pass());
      assertEquals(tasks, takeAll2(c, 1), "pass 1 hands out every task again");
      assertThrows(WarrenArgumentException.class, () -> c.getTask(5));
      assertThrows(IllegalArgumentException.class, () -> c.getTask(-1));
    }
  }

  static long takeAll2(MasterClient c, long pass) {
    long n = 0;
    for (MasterTask t = c.getTask(pass); t.isTask(); t = c.getTask(pass)) {
      n++;
    }
    return n;
  }

  @Test
  void anUnreportedTaskComesBackAfterItsTimeoutAndTheOldHandOutIsStale(@TempDir Path dir) {
    String glob = MasterTest.dataset(dir);
    try (Master m = MasterTest.master(dir, glob).timeouts(1000, 1000).start();
        MasterClient dying = MasterClient.connect(m.workerSettings());
        MasterClient c = MasterClient.connect(m.workerSettings())) {
      MasterTask lost = dying.getTask(0);
      assertTrue(lost.isTask());
      List<MasterTask> rest = takeAll(c);
      rest.forEach(c::finish);
      Instant deadline = Instant.now().plus(Duration.ofSeconds(60));
      MasterTask again = c.getTask(0);
      while (again.kind() == MasterTask.Kind.NONE_NOW && Instant.now().isBefore(deadline)) {
        sleep(50);
        again = c.getTask(0);
      }
      assertTrue(again.isTask(), "the abandoned task came back: " + again);
      assertEquals(lost.id(), again.id());
      assertNotEquals(lost.epoch(), again.epoch());
      assertEquals(strings(lost), strings(again), "the same records");
      assertFalse(dying.finish(lost), "the timed-out hand-out is stale");
      assertTrue(c.finish(again));
      assertEquals(1, m.status().pass());
    }
  }

  @Test
  void aFailedTaskIsHandedOutAgainAtOnce(@TempDir Path dir) {
    String glob = MasterTest.dataset(dir);
    try (Master m = MasterTest.master(dir, glob).maxFailures(5).start();
        MasterClient c = MasterClient.connect(m.workerSettings())) {
      List<MasterTask> taken = takeAll(c);
      assertTrue(c.fail(taken.get(0), "its contribution was not in the allreduce"));
      MasterTask again = c.getTask(0);
      assertTrue(again.isTask());
      assertEquals(taken.get(0).id(), again.id());
      assertThrows(NullPointerException.class, () -> c.fail(again, null));
      c.close();
      assertThrows(IllegalStateException.class, () -> c.getTask(0));
    }
  }

  static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }
}
