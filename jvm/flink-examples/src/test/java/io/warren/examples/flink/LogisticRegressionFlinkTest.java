package io.warren.examples.flink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.apache.flink.runtime.testutils.MiniClusterResourceConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Flink example on a MiniCluster of three TaskManagers of one slot each: its MODEL_HASH on
 * the demo's data is the one the Spark example gives (spark-examples/demo-model-hash.txt), with
 * and without a subtask killed mid-run.
 */
class LogisticRegressionFlinkTest {
  @RegisterExtension
  static final MiniClusterExtension CLUSTER =
      new MiniClusterExtension(
          new MiniClusterResourceConfiguration.Builder()
              .setNumberTaskManagers(3)
              .setNumberSlotsPerTaskManager(1)
              .setConfiguration(LogisticRegression.localConfiguration())
              .build());

  /** The demo's job arguments and the hash the Spark example prints for them. */
  private static Map<String, String> demo() throws Exception {
    Path file = Path.of(System.getProperty("user.dir")).resolve("../../spark-examples/demo-model-hash.txt");
    return Files.readAllLines(file).stream()
        .filter(l -> !l.isBlank() && !l.startsWith("#"))
        .collect(Collectors.toMap(l -> l.substring(0, l.indexOf(' ')), l -> l.substring(l.indexOf(' ') + 1).trim()));
  }

  private static List<WorkerResult> run(String... extra) throws Exception {
    String[] base = demo().get("args").split(" ");
    String[] args = new String[base.length + extra.length];
    System.arraycopy(base, 0, args, 0, base.length);
    System.arraycopy(extra, 0, args, base.length, extra.length);
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
    return LogisticRegression.run(env, CommandLine.parse(args));
  }

  @Test
  void aNumberArgumentThatIsNotANumberIsNamedWithTheUsage() {
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> CommandLine.parse("--workers", "abc"));
    assertTrue(e.getMessage().startsWith("--workers wants a whole number, got abc; "), e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> CommandLine.parse("--step-size", "x"));
    assertTrue(e.getMessage().startsWith("--step-size wants a number, got x; "), e.getMessage());
  }

  @Test
  void theFlinkModelIsTheSparkExamplesModel() throws Exception {
    List<WorkerResult> rs = run();
    for (WorkerResult r : rs) {
      assertEquals(demo().get("hash"), r.modelHash(), "task " + r.task);
      assertEquals(0, r.attempt);
    }
  }

  @Test
  void aKilledSubtaskIsRetriedAloneAndTheModelDoesNotChange() throws Exception {
    List<WorkerResult> rs = run("--kill-task", "8");
    assertEquals(3, rs.size());
    for (WorkerResult r : rs) {
      assertEquals(demo().get("hash"), r.modelHash(), "task " + r.task);
      assertEquals(r.task == 1 ? 1 : 0, r.attempt, "task " + r.task + "'s Flink attempt number");
    }
    assertEquals(8, rs.get(1).startVersion, "task 1 resumed from its peers' checkpoint 8");
  }

  @Test
  void failAllWithAKilledSubtaskRestartsEveryWorkerFromTheDurableCheckpoint(@TempDir Path dir) throws Exception {
    List<WorkerResult> rs =
        run("--kill-task", "8", "--recovery", "fail-all", "--checkpoint-dir", dir.toString());
    assertEquals(3, rs.size());
    for (WorkerResult r : rs) {
      assertEquals(demo().get("hash"), r.modelHash(), "task " + r.task);
      assertEquals(1, r.attempt, "task " + r.task + "'s Flink attempt number");
      assertEquals(8, r.startVersion, "task " + r.task + " resumed from durable checkpoint 8");
    }
  }
}
