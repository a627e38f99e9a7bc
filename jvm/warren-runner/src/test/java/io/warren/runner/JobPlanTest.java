package io.warren.runner;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.warren.Tracker;
import java.io.File;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A run's plan on real (loopback) trackers and a real local directory. */
class JobPlanTest {
  private static final String PREFIX = "test.warren.";

  /** An engine that creates local run directories itself, as the Flink adapter does. */
  private static JobPlan.Engine engine() {
    return new JobPlan.Engine(
        PREFIX,
        "a directory every worker can read and write",
        "the client and every worker",
        "app/1 x",
        (setting, dir) -> {
          if (!dir.mkdirs()) {
            throw new RunnerException(PREFIX + "checkpointDir=" + setting + ": cannot create " + dir, null);
          }
        },
        (e, setting, dir, timeoutS) ->
            HadoopCheckpoints.create(
                e.prefix(), setting, dir, new Configuration(), timeoutS, e.reachableFrom()),
        "127.0.0.1");
  }

  private static RunnerSettings settings(Map<String, String> raw) {
    Map<String, String> m = new HashMap<>(raw);
    m.putIfAbsent("rendezvousTimeout", "30");
    return RunnerSettings.parse(m, PREFIX);
  }

  private static RunnerSettings failAll(Path dir) {
    return settings(Map.of("recovery", "fail-all", "checkpointDir", dir.toString(), "durableEvery", "3"));
  }

  @Test
  void elasticNeedsRetryOne() {
    RunnerException e =
        assertThrows(
            RunnerException.class,
            () -> JobPlan.check(settings(Map.of("recovery", "fail-all")), 3, true, 1, engine()));
    assertEquals(
        "test.warren.elastic=true needs test.warren.recovery=retry-one: fail-all re-runs every worker,"
            + " so nobody goes on without a lost one",
        e.getMessage());
  }

  @Test
  void elasticMinimumIsAtMostTheWorkers() {
    RunnerException e =
        assertThrows(RunnerException.class, () -> JobPlan.check(settings(Map.of()), 3, true, 4, engine()));
    assertEquals("test.warren.minWorkers = 4 is more than the job's 3 workers", e.getMessage());
    JobPlan.check(settings(Map.of()), 3, true, 3, engine());
    JobPlan.check(settings(Map.of()), 3, false, 4, engine()); // not elastic: ignored
  }

  @Test
  void failAllNeedsACheckpointDirectory() {
    RunnerSettings s = settings(Map.of("recovery", "fail-all"));
    RunnerException e = assertThrows(RunnerException.class, () -> JobPlan.check(s, 2, false, 1, engine()));
    assertEquals(
        "test.warren.recovery=fail-all needs test.warren.checkpointDir: a directory every worker can read"
            + " and write",
        e.getMessage());
    assertNull(e.getCause());
    assertThrows(RunnerException.class, () -> JobPlan.start(s, 2, 1, null, engine()));
  }

  @Test
  void anInvalidRemoteDirectoryIsNamed() {
    RunnerSettings s = settings(Map.of("recovery", "fail-all", "checkpointDir", "s3a:relative"));
    RunnerException e = assertThrows(RunnerException.class, () -> JobPlan.check(s, 2, false, 1, engine()));
    assertTrue(
        e.getMessage().startsWith("test.warren.checkpointDir=s3a:relative is not a valid path: "),
        e.getMessage());
    assertTrue(e.getCause() instanceof IllegalArgumentException, String.valueOf(e.getCause()));
  }

  @Test
  void aRemoteDirectoryThatCannotBeCreatedNamesWhoMustReachIt() {
    String dir = "nosuchfs://nowhere/dir";
    RunnerSettings s =
        settings(Map.of("recovery", "fail-all", "checkpointDir", dir, "checkpointDirTimeout", "10"));
    JobPlan.check(s, 2, false, 1, engine());
    RunnerException e = assertThrows(RunnerException.class, () -> JobPlan.start(s, 2, 1, null, engine()));
    String m = e.getMessage();
    String start =
        "test.warren.checkpointDir=" + dir + ": cannot create the fail-all run directory " + dir + "/warren-app_1_x-";
    assertTrue(m.startsWith(start), m);
    assertTrue(m.contains("(it must be reachable from the client and every worker)"), m);
  }

  @Test
  void aLocalFailAllDirectoryIsCreatedCarriedToTheWorkersAndRemoved(@TempDir Path tmp) {
    RunnerSettings s = failAll(tmp);
    JobPlan.check(s, 2, false, 1, engine());
    JobPlan plan = JobPlan.start(s, 2, 3, null, engine());
    try {
      File dir = new File(plan.localDir().orElseThrow());
      assertTrue(dir.isDirectory(), dir.toString());
      assertEquals(tmp.toFile().getAbsoluteFile(), dir.getParentFile());
      assertTrue(dir.getName().startsWith("warren-app_1_x-"), dir.getName());
      assertTrue(plan.remoteDir().isEmpty());
      assertEquals(3, plan.durableEvery());
      List<Map<String, String>> bases = plan.workerSettings();
      assertEquals(3, bases.size());
      for (Map<String, String> b : bases) {
        assertEquals(dir.getPath(), b.get("WARREN_CHECKPOINT_DIR"));
        assertEquals("3", b.get("WARREN_DURABLE_EVERY"));
        assertFalse(b.containsKey("WARREN_TASK_ID"), b.toString());
      }
    } finally {
      plan.close();
      plan.closeDirectory();
    }
    assertFalse(new File(plan.localDir().orElseThrow()).exists());
  }

  @Test
  void aFileUriIsALocalDirectory(@TempDir Path tmp) {
    RunnerSettings s = settings(Map.of("recovery", "fail-all", "checkpointDir", tmp.toUri().toString()));
    try (JobPlan plan = JobPlan.start(s, 1, 1, null, engine())) {
      assertTrue(new File(plan.localDir().orElseThrow()).isDirectory());
      plan.closeDirectory();
    }
    assertEquals(0, tmp.toFile().list().length);
  }

  @Test
  void retryOneCarriesNoCheckpointSettings() {
    RunnerSettings s = settings(Map.of("durableEvery", "3", "timeout", "100"));
    try (JobPlan plan = JobPlan.start(s, 2, 1, null, engine())) {
      assertTrue(plan.localDir().isEmpty());
      assertTrue(plan.remoteDir().isEmpty());
      assertEquals(1, plan.durableEvery());
      List<Map<String, String>> bases = plan.workerSettings();
      assertEquals(1, bases.size());
      Map<String, String> b = bases.get(0);
      assertFalse(b.containsKey("WARREN_CHECKPOINT_DIR"), b.toString());
      assertFalse(b.containsKey("WARREN_DURABLE_EVERY"), b.toString());
      assertEquals("100", b.get("WARREN_TIMEOUT_S"), b.toString());
      plan.closeDirectory(); // nothing to remove
    }
  }

  @Test
  void eachAttemptHasItsOwnTracker(@TempDir Path tmp) {
    try (JobPlan plan = JobPlan.start(failAll(tmp), 2, 4, null, engine())) {
      assertEquals(4, plan.trackers().attempts());
      Set<String> uris = new HashSet<>();
      for (Map<String, String> b : plan.workerSettings()) {
        uris.add(b.get("WARREN_TRACKER_URI"));
      }
      assertEquals(4, uris.size(), uris.toString());
      assertNotEquals(plan.trackers().tracker(0).uri(), plan.trackers().tracker(1).uri());
      plan.closeDirectory();
    }
  }

  @Test
  void anElasticRunStartsWithFewerWorkers() {
    Tracker.Elastic limits = new Tracker.Elastic(1, 3, Duration.ofSeconds(1), true);
    try (JobPlan plan = JobPlan.start(settings(Map.of()), 2, 1, limits, engine())) {
      assertEquals("2", plan.workerSettings().get(0).get("WARREN_NUM_WORKERS"));
    }
  }

  @Test
  void closingTwiceIsHarmless(@TempDir Path tmp) {
    JobPlan plan = JobPlan.start(failAll(tmp), 2, 2, null, engine());
    plan.close();
    plan.close();
    plan.closeDirectory();
    plan.closeDirectory();
    assertFalse(new File(plan.localDir().orElseThrow()).exists());
  }

  @Test
  void trackersThatCannotStartLeaveNoDirectory(@TempDir Path tmp) {
    RunnerSettings s =
        settings(
            Map.of(
                "recovery", "fail-all", "checkpointDir", tmp.toString(), "trackerHost", "no.such.host.invalid"));
    assertThrows(RuntimeException.class, () -> JobPlan.start(s, 2, 2, null, engine()));
    assertEquals(0, tmp.toFile().list().length);
  }
}
