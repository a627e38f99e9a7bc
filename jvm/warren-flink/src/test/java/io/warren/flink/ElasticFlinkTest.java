package io.warren.flink;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.HashMap;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.runtime.messages.webmonitor.ClusterOverview;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.test.junit5.InjectMiniCluster;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Elastic membership ({@code warren.elastic=true}) on a MiniCluster of three TaskManagers of one
 * slot each (fixed-delay restarts, region failover): a terminated TaskManager's worker, whose
 * restarted subtask has no slot to run in, is dropped after {@code warren.rejoinTimeout}; the
 * other two go on without it instead of waiting, and once a new TaskManager is started the
 * restarted subtask joins again at a checkpoint boundary and the job ends with one model on
 * every member. An elastic run on a cluster with fewer free slots than workers (but at least
 * {@code warren.minWorkers}) starts with those, and the last worker joins at a checkpoint
 * boundary once a TaskManager arrives.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class ElasticFlinkTest {
  private static final int WORKERS = 3;
  private static final int ITERS = 300;
  private static final TypeInformation<double[]> ROW = PrimitiveArrayTypeInfo.DOUBLE_PRIMITIVE_ARRAY_TYPE_INFO;

  @RegisterExtension static final MiniClusterExtension CLUSTER = WarrenFlinkTest.newCluster();

  @Test
  void theOthersGoOnWithoutALostTaskManagersWorkerWhichRejoinsWhenItsSubtaskRunsAgain(
      @InjectMiniCluster MiniCluster mini) throws Exception {
    String run = UUID.randomUUID().toString();
    Training.Plan plan = new Training.Plan(run, ITERS, -1, -1, 40, -1);
    Map<String, String> settings = Map.of("warren.minWorkers", "2", "warren.rejoinTimeout", "1");
    JobClient client =
        startElastic(StreamExecutionEnvironment.getExecutionEnvironment(), plan, settings, "elastic");
    AtomicInteger iters = Training.ITERATIONS.computeIfAbsent(run, k -> new AtomicInteger());
    await(() -> iters.get() >= 5 * WORKERS, Duration.ofSeconds(60), "the workers did not get going");

    terminateOne(mini);
    int atLoss = iters.get();
    // Every slot is taken: the lost worker's restarted subtask cannot run until a TaskManager
    // starts. Under a fixed world the others would wait for it; here they go on without it.
    await(
        () -> iters.get() >= atLoss + 2 * 15,
        Duration.ofSeconds(60),
        "the two other workers did not go on without the lost one");
    mini.startTaskManager();
    client.getJobExecutionResult().get(180, TimeUnit.SECONDS);

    Map<Integer, double[]> r = Training.RESULTS.get(run);
    assertTrue(r != null && r.size() == WORKERS, "every worker ended a member, the lost one rejoined: " + r);
    List<Integer> restarted = r.values().stream().filter(v -> v[1] == 1).map(v -> (int) v[0]).toList();
    assertEquals(1, restarted.size(), "one subtask was restarted: " + r.keySet());
    int lost = restarted.get(0);
    assertTrue(r.get(lost)[2] > 0, "the rejoined worker started from its peers' checkpoint " + r.get(lost)[2]);
    double[] model = Training.weights(r.get(0));
    for (double[] row : r.values()) {
      assertArrayEquals(model, Training.weights(row), "every member ends with the same model");
    }
    Map<String, List<String>> views = Training.VIEWS.get(run);
    for (int t = 0; t < WORKERS; t++) {
      if (t != lost) {
        List<String> seen = views.get(t + "/0");
        assertTrue(
            seen.stream().anyMatch(v -> v.endsWith("3->2")) && seen.contains("2->3"),
            "survivor " + t + " saw the view shrink and grow again: " + seen);
      }
    }
  }

  @Test
  void anElasticRunStartsWithTheFreeSlotsAndTheLastWorkerJoinsWhenATaskManagerArrives(
      @InjectMiniCluster MiniCluster mini) throws Exception {
    terminateOne(mini);
    await(
        () -> {
          ClusterOverview o = overview(mini);
          return o.getNumTaskManagersConnected() == WORKERS - 1 && o.getNumSlotsAvailable() == WORKERS - 1;
        },
        Duration.ofSeconds(60),
        "the cluster did not settle at two free slots");
    String run = UUID.randomUUID().toString();
    Training.Plan plan = new Training.Plan(run, ITERS, -1, -1, 40, -1);
    // A fixed run would throw here: two free slots for three workers.
    StreamExecutionEnvironment env = WarrenFlinkTest.envWithRest(mini);
    JobClient client = startElastic(env, plan, Map.of("warren.minWorkers", "2"), "elastic start");
    AtomicInteger iters = Training.ITERATIONS.computeIfAbsent(run, k -> new AtomicInteger());
    await(() -> iters.get() >= 2 * 10, Duration.ofSeconds(60), "the two workers with a slot did not get going");
    mini.startTaskManager();
    client.getJobExecutionResult().get(180, TimeUnit.SECONDS);

    Map<Integer, double[]> r = Training.RESULTS.get(run);
    assertTrue(r != null && r.size() == WORKERS, "every worker ended a member: " + r);
    for (double[] row : r.values()) {
      assertEquals(0, (int) row[1], "no subtask was restarted: task " + (int) row[0]);
    }
    List<Integer> late = r.values().stream().filter(v -> v[2] > 0).map(v -> (int) v[0]).toList();
    assertEquals(1, late.size(), "one worker joined late, from its peers' checkpoint: " + r.keySet());
    double[] model = Training.weights(r.get(0));
    for (double[] row : r.values()) {
      assertArrayEquals(model, Training.weights(row), "every member ends with the same model");
    }
    Map<String, List<String>> views = Training.VIEWS.get(run);
    for (int t = 0; t < WORKERS; t++) {
      if (t != late.get(0)) {
        List<String> seen = views.get(t + "/0");
        assertEquals(List.of("2->3"), seen, "worker " + t + " started in a view of two that grew to three");
      }
    }
  }

  /**
   * Submits the elastic training of {@code plan} on {@code env} (parallelism: the workers) with {@code settings} besides {@code warren.elastic=true} and a long
   * connect timeout, and returns at once.
   */
  private static JobClient startElastic(
      StreamExecutionEnvironment env, Training.Plan plan, Map<String, String> settings, String name)
      throws Exception {
    env.setParallelism(WORKERS);
    DataStream<double[]> rows = WarrenFlinkTest.partitions(env);
    Map<String, String> all = new HashMap<>(settings);
    all.put("warren.elastic", "true");
    all.put("warren.connectTimeout", "120");
    WarrenFlink.train(
            rows,
            WORKERS,
            all,
            (ctx, part) -> Training.trainElastic(ctx.communicator(), ctx.taskId(), ctx.attempt(), part, plan),
            ROW)
        .map(r -> Training.collect(plan.run(), r))
        .returns(ROW)
        .setParallelism(WORKERS)
        .sinkTo(new DiscardingSink<>())
        .setParallelism(WORKERS);
    return env.executeAsync(name);
  }

  /**
   * The MiniCluster's TaskManagers by index, terminated ones included (each test terminates one
   * and starts another, in either order).
   */
  private static final AtomicInteger NEXT_TO_TERMINATE = new AtomicInteger();

  private static void terminateOne(MiniCluster mini) throws Exception {
    mini.terminateTaskManager(NEXT_TO_TERMINATE.getAndIncrement()).get(30, TimeUnit.SECONDS);
  }

  private static ClusterOverview overview(MiniCluster mini) {
    try {
      return mini.requestClusterOverview().get(10, TimeUnit.SECONDS);
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  private static void await(java.util.function.BooleanSupplier done, Duration limit, String what)
      throws InterruptedException {
    long until = System.nanoTime() + limit.toNanos();
    while (!done.getAsBoolean() && System.nanoTime() < until) {
      Thread.sleep(20);
    }
    assertTrue(done.getAsBoolean(), what);
  }
}
