package io.warren.flink;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.warren.TlsSettings;
import io.warren.runner.PsServers;
import io.warren.runner.PsSettings;
import io.warren.runner.PsTrainers;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

/**
 * WarrenFlink.trainPS on a MiniCluster of three TaskManagers of one slot each (fixed-delay
 * restarts, region failover), two parameter servers on the client (this JVM): the sync model of
 * sparse logistic regression equals the one the same trainers make as threads of this JVM
 * without Flink, after a trainer subtask that throws (Flink restarts it alone, and it resumes at
 * the servers' step) and after a server restarted from its checkpoint mid-run.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class PsTrainingTest {
  private static final int WORKERS = 3;
  private static final int SERVERS = 2;
  private static final int STEPS = 20;
  private static final TypeInformation<double[]> ROW = PrimitiveArrayTypeInfo.DOUBLE_PRIMITIVE_ARRAY_TYPE_INFO;
  private static final TypeInformation<float[]> RESULT = PrimitiveArrayTypeInfo.FLOAT_PRIMITIVE_ARRAY_TYPE_INFO;

  @RegisterExtension static final MiniClusterExtension CLUSTER = WarrenFlinkTest.newCluster();

  private static volatile float[] reference;

  /** The model of the same trainers as threads of this JVM, with the runner's servers, no Flink. */
  static synchronized float[] withoutFlink() throws Exception {
    if (reference != null) {
      return reference;
    }
    ExecutorService pool = Executors.newFixedThreadPool(WORKERS);
    try (PsServers servers = PsServers.start(SERVERS, "127.0.0.1", PsSettings.DEFAULTS, TlsSettings.OFF)) {
      PsTrainers trainers = servers.trainers();
      PsTraining.Plan plan = PsTraining.Plan.clean("reference", STEPS);
      List<Future<float[]>> fs = new ArrayList<>();
      for (int t = 0; t < WORKERS; t++) {
        int id = t;
        fs.add(
            pool.submit(
                () -> trainers.run(id, ps -> PsTraining.train(ps, id, 0, WORKERS, PsTraining.partition(id, WORKERS), plan))));
      }
      float[] model = PsTraining.model(fs.get(0).get(120, TimeUnit.SECONDS));
      for (Future<float[]> f : fs) {
        f.get(120, TimeUnit.SECONDS);
      }
      reference = model;
      return model;
    } finally {
      pool.shutdownNow();
    }
  }

  /** source(N) → trainers(N) → collect(N) → discard(N): forward edges only. */
  private static void job(
      StreamExecutionEnvironment env, PsTraining.Plan plan, Map<String, String> settings, Consumer<PsServers> onServers) {
    DataStream<double[]> rows =
        env.fromSource(
                new PartitionedSource<>(WORKERS, PsTraining::partition),
                WatermarkStrategy.noWatermarks(),
                "partitions",
                ROW)
            .setParallelism(WORKERS);
    String run = plan.run();
    WarrenFlink.trainPS(
            rows,
            WORKERS,
            SERVERS,
            settings,
            (ctx, part) ->
                PsTraining.train(ctx.client(), ctx.trainerId(), ctx.attempt(), ctx.numTrainers(), part, plan),
            RESULT,
            onServers)
        .map(r -> PsTraining.collect(run, r))
        .returns(RESULT)
        .setParallelism(WORKERS)
        .sinkTo(new DiscardingSink<>())
        .setParallelism(WORKERS);
  }

  private static StreamExecutionEnvironment env() {
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
    env.setParallelism(WORKERS);
    return env;
  }

  private static Map<Integer, float[]> results(String run) {
    Map<Integer, float[]> r = PsTraining.RESULTS.get(run);
    assertTrue(r != null && r.size() == WORKERS, "results of run " + run + ": " + r);
    return r;
  }

  @Test
  void theSyncModelEqualsTheTrainingWithoutFlinkAndTheServersStopWithTheJob() throws Exception {
    String run = UUID.randomUUID().toString();
    AtomicReference<PsServers> servers = new AtomicReference<>();
    StreamExecutionEnvironment env = env();
    job(env, PsTraining.Plan.clean(run, STEPS), Map.of(), servers::set);
    WarrenFlink.execute(env, "ps-clean");
    Map<Integer, float[]> r = results(run);
    float[] model = PsTraining.model(r.get(0));
    assertEquals((1 << PsTraining.BITS) + 1, model.length);
    boolean learnt = false;
    for (float v : model) {
      learnt |= v != 0;
    }
    assertTrue(learnt, "the model learnt nothing");
    assertArrayEquals(withoutFlink(), model);
    for (float[] row : r.values()) {
      assertEquals(0, row[1], "trainer " + row[0] + " ran once");
    }
    assertTrue(servers.get().isClosed(), "the servers stop when the job ends");
  }

  @Test
  void aTrainerSubtaskThatThrowsIsRestartedAloneResumesAtTheServersStepAndTheModelIsTheFailureFreeOne()
      throws Exception {
    String run = UUID.randomUUID().toString();
    StreamExecutionEnvironment env = env();
    job(env, new PsTraining.Plan(run, STEPS, 1, 7, 0), Map.of(), s -> {});
    WarrenFlink.execute(env, "ps-throw");
    Map<Integer, float[]> r = results(run);
    assertEquals(1, r.get(1)[1], "trainer 1's attempt (Flink's attempt number)");
    assertEquals(7, r.get(1)[2], "trainer 1's restart resumed at the step the servers had");
    assertEquals(0, r.get(0)[1], "trainer 0 ran once");
    assertEquals(0, r.get(2)[1], "trainer 2 ran once");
    for (float[] row : r.values()) {
      assertEquals(0, row[3], "sync loses no update");
    }
    assertArrayEquals(withoutFlink(), PsTraining.model(r.get(0)));
  }

  @Test
  void aServerRestartedFromItsCheckpointMidRunLosesNothing(@TempDir Path dir) throws Exception {
    String run = UUID.randomUUID().toString();
    AtomicInteger restarts = new AtomicInteger();
    // once the trainers are at step 6 or so, server 0 is stopped and started again from its
    // checkpoint (every 3 steps), on the client, while the trainers wait for it
    Consumer<PsServers> restartLater =
        servers -> {
          Thread t =
              new Thread(
                  () -> {
                    AtomicInteger pushes = PsTraining.PUSHES.computeIfAbsent(run, k -> new AtomicInteger());
                    long until = System.nanoTime() + Duration.ofSeconds(120).toNanos();
                    while (pushes.get() < 6 * WORKERS && System.nanoTime() < until) {
                      try {
                        Thread.sleep(5);
                      } catch (InterruptedException e) {
                        return;
                      }
                    }
                    servers.restart(0);
                    restarts.incrementAndGet();
                  },
                  "restart-server-0");
          t.setDaemon(true);
          t.start();
        };
    StreamExecutionEnvironment env = env();
    Map<String, String> settings =
        Map.of("warren.ps.checkpointDir", dir.toString(), "warren.ps.checkpointEvery", "3");
    job(env, new PsTraining.Plan(run, STEPS, -1, -1, 30), settings, restartLater);
    WarrenFlink.execute(env, "ps-restart-server");
    assertEquals(1, restarts.get(), "server 0 was restarted mid-run");
    Map<Integer, float[]> r = results(run);
    for (float[] row : r.values()) {
      assertEquals(0, row[1], "no trainer failed: they waited for the server");
      assertEquals(0, row[3], "sync loses no update");
    }
    assertArrayEquals(withoutFlink(), PsTraining.model(r.get(0)));
    try (var files = Files.list(dir)) {
      assertTrue(files.findAny().isPresent(), "the servers checkpointed to " + dir);
    }
  }
}
