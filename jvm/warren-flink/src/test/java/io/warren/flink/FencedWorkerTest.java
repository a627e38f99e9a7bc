package io.warren.flink;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.warren.runner.Trackers;
import io.warren.runner.WorkerRun;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.testutils.MiniClusterResourceConfiguration;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.test.junit5.InjectMiniCluster;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * A worker that stops answering while its TaskManager runs, on a MiniCluster of three
 * TaskManagers of one slot each (fixed-delay restarts, region failover): subtask 2 is cut off
 * from the tracker ({@code WARREN_MOCK} {@code ,cut}: its heartbeats stop, it hears nothing) and
 * its thread hangs outside Warren's calls. The tracker fences it after {@code warren.peerTimeout}
 * and the others wait for its replacement; its own side fences itself too, and the runner's watch
 * fails the subtask through Flink ({@code failExternally}), which interrupts the hung thread and
 * restarts that subtask alone. Flink itself would never replace it here (the TaskManager answers
 * Flink's heartbeats), so without the watch the job would hang for the thread's ten minutes.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class FencedWorkerTest {
  private static final int WORKERS = 3;
  private static final int ITERS = 30;
  private static final int HANG_TASK = 2;
  private static final int HANG_AT = 10;
  private static final double PEER_TIMEOUT_S = 3.0;
  private static final TypeInformation<double[]> ROW = PrimitiveArrayTypeInfo.DOUBLE_PRIMITIVE_ARRAY_TYPE_INFO;

  @RegisterExtension
  static final MiniClusterExtension CLUSTER =
      new MiniClusterExtension(
          new MiniClusterResourceConfiguration.Builder()
              .setNumberTaskManagers(WORKERS)
              .setNumberSlotsPerTaskManager(1)
              .setConfiguration(clusterConfig())
              .build());

  private static Configuration clusterConfig() {
    Configuration c = new Configuration();
    c.setString("restart-strategy.type", "fixed-delay");
    c.setString("restart-strategy.fixed-delay.attempts", "3");
    c.setString("restart-strategy.fixed-delay.delay", "200 ms");
    c.setString("jobmanager.execution.failover-strategy", "region");
    return c;
  }

  /** The model of the same workers as threads of this JVM, without Flink and without failures. */
  private static double[] withoutFlink() throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(WORKERS);
    try (Trackers trackers = Trackers.start(WORKERS, "127.0.0.1", 1, Duration.ofSeconds(60))) {
      Map<String, String> base = trackers.workerSettings(Map.of()).get(0);
      Training.Plan plan = Training.Plan.clean("reference-" + UUID.randomUUID(), ITERS);
      List<Future<double[]>> fs = new ArrayList<>();
      for (int t = 0; t < WORKERS; t++) {
        int task = t;
        Map<String, String> s = WorkerRun.taskSettings(base, Integer.toString(t), 0);
        fs.add(
            pool.submit(
                () ->
                    WorkerRun.run(
                        s,
                        WorkerRun.Options.plain(),
                        c -> Training.train(c, task, 0, Training.partition(task, WORKERS), plan))));
      }
      double[] w = Training.weights(fs.get(0).get(120, TimeUnit.SECONDS));
      for (Future<double[]> f : fs) {
        assertArrayEquals(w, Training.weights(f.get(120, TimeUnit.SECONDS)));
      }
      return w;
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void aWorkerCutOffFromTheTrackerWithAHungThreadIsFencedAndOnlyItsSubtaskRestarts(
      @InjectMiniCluster MiniCluster mini) throws Exception {
    double[] want = withoutFlink();
    String run = UUID.randomUUID().toString();
    Training.Plan plan = new Training.Plan(run, ITERS, -1, -1, 0, -1, HANG_TASK, HANG_AT);
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
    env.setParallelism(WORKERS);
    DataStream<double[]> rows =
        env.fromSource(
                new PartitionedSource<>(WORKERS, Training::partition),
                WatermarkStrategy.noWatermarks(),
                "partitions",
                ROW)
            .setParallelism(WORKERS);
    // cut off at the gradient allreduce of the iteration before the hang (rank = task id here)
    Map<String, String> settings =
        Map.of(
            "warren.peerTimeout", Double.toString(PEER_TIMEOUT_S),
            "warren.setting.WARREN_MOCK", HANG_TASK + "," + (HANG_AT - 1) + ",0,0,cut");
    WarrenFlink.train(
            rows,
            WORKERS,
            settings,
            (ctx, part) -> Training.train(ctx.communicator(), ctx.taskId(), ctx.attempt(), part, plan),
            ROW)
        .map(r -> Training.collect(run, r))
        .returns(ROW)
        .setParallelism(WORKERS)
        .sinkTo(new DiscardingSink<>())
        .setParallelism(WORKERS);
    JobClient client = env.executeAsync("fenced");
    client.getJobExecutionResult().get(180, TimeUnit.SECONDS);

    Map<Integer, double[]> r = Training.RESULTS.get(run);
    assertTrue(r != null && r.size() == WORKERS, "results: " + r);
    assertEquals(1, r.get(HANG_TASK)[1], "the hung task's attempt (Flink's attempt number)");
    assertEquals(0, r.get(0)[1], "task 0 ran once");
    assertEquals(0, r.get(1)[1], "task 1 ran once");
    assertEquals(HANG_AT, r.get(HANG_TASK)[2], "the replacement resumed from the last checkpoint");
    for (double[] row : r.values()) {
      assertArrayEquals(want, Training.weights(row), "the failure-free model");
    }

    Map<String, Long> ev = Training.EVENTS.get(run);
    Long hung = ev.get("hung");
    Long interrupted = ev.get("interrupted");
    assertNotNull(hung, "the task hung: " + ev);
    assertNotNull(interrupted, "Flink interrupted the hung thread (the fenced subtask was failed): " + ev);
    Long resumed = ev.get("0/0/" + HANG_AT);
    assertNotNull(resumed, "task 0 went on past the hang: " + ev);
    String exceptions = exceptions(mini, client);
    assertTrue(
        exceptions.contains("Warren fenced the worker of subtask " + HANG_TASK + " (attempt 0)"),
        "Flink's failure of the subtask names the fence: " + exceptions);
    System.out.printf(
        "FENCE_FLINK_MINICLUSTER peer_timeout_s=%.1f hang_to_interrupt_s=%.2f hang_to_resumed_s=%.2f%n",
        PEER_TIMEOUT_S, (interrupted - hung) / 1e9, (resumed - hung) / 1e9);
    // Behaviour, not speed: the job went on because Warren failed the subtask, long before the
    // hung thread's ten-minute sleep (which nothing else would end on a MiniCluster).
    assertTrue((resumed - hung) / 1e9 < 120, "the job went on " + (resumed - hung) / 1e9 + " s after the hang");
  }

  /** The job's exception history, from the MiniCluster's REST API. */
  private static String exceptions(MiniCluster mini, JobClient client) throws Exception {
    URI rest = mini.getRestAddress().get(30, TimeUnit.SECONDS);
    URI uri = rest.resolve("/jobs/" + client.getJobID() + "/exceptions");
    HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
    HttpRequest req = HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(10)).GET().build();
    return http.send(req, HttpResponse.BodyHandlers.ofString()).body();
  }
}
