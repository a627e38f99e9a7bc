package io.warren.flink;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.warren.runner.Trackers;
import io.warren.runner.WorkerRun;
import java.net.URI;
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
import org.apache.flink.api.common.JobStatus;
import io.warren.Op;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.testutils.MiniClusterResourceConfiguration;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.test.junit5.InjectMiniCluster;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

/**
 * WarrenFlink.train on a MiniCluster of three TaskManagers of one slot each, with fixed-delay
 * restarts and region failover (Flink's default): the model equals the one trained without
 * Flink after a thrown exception, a terminated TaskManager, and a fail-all restart; too few
 * slots and a cancel end the job within seconds.
 */
class WarrenFlinkTest {
  private static final int WORKERS = 3;
  private static final int ITERS = 30;
  private static final TypeInformation<double[]> ROW = PrimitiveArrayTypeInfo.DOUBLE_PRIMITIVE_ARRAY_TYPE_INFO;

  @RegisterExtension static final MiniClusterExtension CLUSTER = newCluster();

  /** A MiniCluster of one TaskManager of one slot per worker, {@link #clusterConfig()}. */
  static MiniClusterExtension newCluster() {
    return new MiniClusterExtension(
        new MiniClusterResourceConfiguration.Builder()
            .setNumberTaskManagers(WORKERS)
            .setNumberSlotsPerTaskManager(1)
            .setConfiguration(clusterConfig())
            .build());
  }

  /** Fixed-delay restarts 200 ms apart, region failover. */
  static Configuration clusterConfig() {
    Configuration c = new Configuration();
    c.setString("restart-strategy.type", "fixed-delay");
    c.setString("restart-strategy.fixed-delay.attempts", "3");
    c.setString("restart-strategy.fixed-delay.delay", "200 ms");
    c.setString("jobmanager.execution.failover-strategy", "region");
    return c;
  }

  private static volatile double[] reference;

  /** The model trained by the same workers as threads of this JVM, without Flink. */
  static synchronized double[] withoutFlink() throws Exception {
    if (reference != null) {
      return reference;
    }
    ExecutorService pool = Executors.newFixedThreadPool(WORKERS);
    try (Trackers trackers = Trackers.start(WORKERS, "127.0.0.1", 1, Duration.ofSeconds(60))) {
      Map<String, String> base = trackers.workerSettings(Map.of()).get(0);
      Training.Plan plan = Training.Plan.clean("reference", ITERS);
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
      reference = w;
      return w;
    } finally {
      pool.shutdownNow();
    }
  }

  private static StreamExecutionEnvironment env() {
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
    env.setParallelism(WORKERS);
    return env;
  }

  /** An environment that knows the cluster's REST address, as {@code flink run}'s does. */
  static StreamExecutionEnvironment envWithRest(MiniCluster mini) throws Exception {
    URI rest = mini.getRestAddress().get(30, TimeUnit.SECONDS);
    Configuration conf = new Configuration();
    conf.set(RestOptions.ADDRESS, rest.getHost());
    conf.set(RestOptions.PORT, rest.getPort());
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
    env.setParallelism(WORKERS);
    return env;
  }

  /** The training rows: one source subtask per worker, each emitting its partition. */
  static DataStream<double[]> partitions(StreamExecutionEnvironment env) {
    return env.fromSource(
            new PartitionedSource<>(WORKERS, Training::partition),
            WatermarkStrategy.noWatermarks(),
            "partitions",
            ROW)
        .setParallelism(WORKERS);
  }

  /** source(N) → workers(N) → collect(N) → discard(N): forward edges only. */
  static void job(StreamExecutionEnvironment env, Training.Plan plan, Map<String, String> settings) {
    DataStream<double[]> rows = partitions(env);
    collect(
        WarrenFlink.train(
            rows,
            WORKERS,
            settings,
            (ctx, part) -> Training.train(ctx.communicator(), ctx.taskId(), ctx.attempt(), part, plan),
            ROW),
        plan.run());
  }

  private static void collect(DataStream<double[]> results, String run) {
    results
        .map(r -> Training.collect(run, r))
        .returns(ROW)
        .setParallelism(WORKERS)
        .sinkTo(new DiscardingSink<>())
        .setParallelism(WORKERS);
  }

  private static String newRun() {
    return UUID.randomUUID().toString();
  }

  private static Map<Integer, double[]> results(String run) {
    Map<Integer, double[]> r = Training.RESULTS.get(run);
    assertTrue(r != null && r.size() == WORKERS, "results of run " + run + ": " + r);
    return r;
  }

  private static int attempts(Map<Integer, double[]> results, int attempt) {
    return (int) results.values().stream().filter(r -> r[1] == attempt).count();
  }

  @Test
  void theModelEqualsTheTrainingWithoutFlink(@InjectMiniCluster MiniCluster mini) throws Exception {
    String run = newRun();
    // with the slot check: every slot exists (some may still be held by the previous test's job)
    StreamExecutionEnvironment env = envWithRest(mini);
    job(env, Training.Plan.clean(run, ITERS), Map.of());
    WarrenFlink.execute(env, "clean");
    Map<Integer, double[]> r = results(run);
    for (double[] row : r.values()) {
      assertArrayEquals(withoutFlink(), Training.weights(row));
      assertEquals(0, row[1]);
    }
  }

  @Test
  void underTlsTheModelEqualsThePlainTrainingWithoutFlink() throws Exception {
    String run = newRun();
    StreamExecutionEnvironment env = env();
    job(env, Training.Plan.clean(run, ITERS), Map.of("warren.tls", "true"));
    WarrenFlink.execute(env, "tls");
    for (double[] row : results(run).values()) {
      assertArrayEquals(withoutFlink(), Training.weights(row));
    }
  }

  @Test
  void aSubtaskThatThrowsIsTheOnlyOneRestartedAndTheModelIsTheFailureFreeOne() throws Exception {
    String run = newRun();
    StreamExecutionEnvironment env = env();
    job(env, new Training.Plan(run, ITERS, 1, 12, 0, -1), Map.of("warren.connectTimeout", "60"));
    WarrenFlink.execute(env, "throw");
    Map<Integer, double[]> r = results(run);
    assertEquals(1, r.get(1)[1], "task 1's attempt (Flink's attempt number)");
    assertEquals(0, r.get(0)[1]);
    assertEquals(0, r.get(2)[1]);
    assertTrue(r.get(1)[2] > 0, "task 1 resumed from version " + r.get(1)[2]);
    for (double[] row : r.values()) {
      assertArrayEquals(withoutFlink(), Training.weights(row));
    }
  }

  @Test
  void aTerminatedTaskManagerReplacedByANewOneRecoversWithTheSameModel(@InjectMiniCluster MiniCluster mini)
      throws Exception {
    String run = newRun();
    StreamExecutionEnvironment env = env();
    job(env, new Training.Plan(run, ITERS, -1, -1, 100, -1), Map.of("warren.connectTimeout", "120"));
    JobClient client = env.executeAsync("terminate");
    AtomicInteger iters = Training.ITERATIONS.computeIfAbsent(run, k -> new AtomicInteger());
    long until = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    while (iters.get() < 5 * WORKERS && System.nanoTime() < until) {
      Thread.sleep(20);
    }
    assertTrue(iters.get() >= 5 * WORKERS, "the workers did not get going: " + iters.get());
    mini.terminateTaskManager(0).get(30, TimeUnit.SECONDS);
    mini.startTaskManager();
    client.getJobExecutionResult().get(180, TimeUnit.SECONDS);
    Map<Integer, double[]> r = results(run);
    assertEquals(1, attempts(r, 1), "one subtask restarted: " + r.keySet());
    assertEquals(WORKERS - 1, attempts(r, 0));
    for (double[] row : r.values()) {
      assertArrayEquals(withoutFlink(), Training.weights(row));
    }
  }

  @Test
  void fewerSlotsThanWorkersFailsBeforeTheJobIsSubmittedWithinSeconds(@InjectMiniCluster MiniCluster mini)
      throws Exception {
    StreamExecutionEnvironment env = envWithRest(mini);
    int workers = WORKERS + 1;
    DataStream<double[]> rows =
        env.fromSource(
                new PartitionedSource<>(workers, Training::partition),
                WatermarkStrategy.noWatermarks(),
                "partitions",
                ROW)
            .setParallelism(workers);
    Training.Plan plan = Training.Plan.clean(newRun(), 2);
    long start = System.nanoTime();
    // the default settings: no rendezvous deadline to wait for, the REST API's slot count
    WarrenFlinkException e =
        assertThrows(
            WarrenFlinkException.class,
            () ->
                WarrenFlink.train(
                    rows,
                    workers,
                    Map.of(),
                    (ctx, part) -> Training.train(ctx.communicator(), ctx.taskId(), ctx.attempt(), part, plan),
                    ROW));
    double took = (System.nanoTime() - start) / 1e9;
    assertTrue(
        e.getMessage().matches("Warren needs 4 task slots running at once but the cluster has \\d free \\(of 3, in 3 TaskManagers\\): .*"),
        e.getMessage());
    assertTrue(e.getMessage().contains("warren.slotWaitTimeout"), e.getMessage());
    assertTrue(took < 30, "took " + took + " s");
  }

  @Test
  void withoutTheRestAddressFewerSlotsThanWorkersFailsAtTheRendezvousDeadline() throws Exception {
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
    int workers = WORKERS + 1;
    DataStream<double[]> rows =
        env.fromSource(
                new PartitionedSource<>(workers, Training::partition),
                WatermarkStrategy.noWatermarks(),
                "partitions",
                ROW)
            .setParallelism(workers);
    Training.Plan plan = Training.Plan.clean(newRun(), 2);
    WarrenFlink.train(
            rows,
            workers,
            Map.of("rendezvousTimeout", "5"),
            (ctx, part) -> Training.train(ctx.communicator(), ctx.taskId(), ctx.attempt(), part, plan),
            ROW)
        .sinkTo(new DiscardingSink<>())
        .setParallelism(workers);
    long start = System.nanoTime();
    WarrenFlinkException e = assertThrows(WarrenFlinkException.class, () -> WarrenFlink.execute(env, "slots"));
    double took = (System.nanoTime() - start) / 1e9;
    assertTrue(e.getMessage().startsWith("Warren needs 4 task slots running at once"), e.getMessage());
    assertTrue(e.getMessage().contains("of 4 workers arrived"), e.getMessage());
    assertTrue(e.getMessage().contains("fewer free task slots than workers"), e.getMessage());
    assertTrue(took < 60, "took " + took + " s");
  }

  @Test
  void retryOneRefusesAShuffleIntoTheWorkersNamingFailAll() {
    StreamExecutionEnvironment env = env();
    DataStream<double[]> rows = env.fromData(List.of(new double[] {1}), ROW).rebalance();
    WarrenFlinkException e =
        assertThrows(
            WarrenFlinkException.class,
            () -> WarrenFlink.train(rows, WORKERS, Map.of(), (ctx, part) -> part.size(), Types.INT));
    assertTrue(e.getMessage().contains("warren.recovery=fail-all"), e.getMessage());
  }

  @Test
  void failAllRefusesAForwardOnlyInputWhereFlinkWouldRestartOneSubtask(@TempDir Path dir) {
    StreamExecutionEnvironment env = env();
    DataStream<double[]> rows =
        env.fromSource(
                new PartitionedSource<>(WORKERS, Training::partition),
                WatermarkStrategy.noWatermarks(),
                "partitions",
                ROW)
            .setParallelism(WORKERS);
    Map<String, String> failAll = Map.of("recovery", "fail-all", "checkpointDir", dir.toString());
    WarrenFlinkException e =
        assertThrows(
            WarrenFlinkException.class,
            () -> WarrenFlink.train(rows, WORKERS, failAll, (ctx, part) -> part.size(), Types.INT));
    assertTrue(e.getMessage().startsWith("warren.recovery=fail-all needs an all-to-all edge"), e.getMessage());
  }

  @Test
  void aShuffleIntoTheWorkersTakesTheFailAllPathAndResumesFromTheDurableCheckpoint(@TempDir Path dir)
      throws Exception {
    failAllResumesFromTheDurableCheckpoint(env(), dir.toString());
    try (var left = Files.list(dir)) {
      assertEquals(0, left.count(), "the run's checkpoint directory is removed");
    }
  }

  @Test
  void failAllResumesFromCheckpointsOnAHadoopFileSystem(@TempDir Path dir) throws Exception {
    // viewfs://warren-test/ckpt is Hadoop's view file system over file://dir: not a path the
    // native library writes, so every checkpoint goes through Hadoop's FileSystem API (staged
    // locally by each worker, uploaded after each durable checkpoint, downloaded on a restart)
    Configuration conf = new Configuration();
    conf.setString("flink.hadoop.fs.viewfs.mounttable.warren-test.link./ckpt", dir.toUri().toString());
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
    env.setParallelism(WORKERS);
    failAllResumesFromTheDurableCheckpoint(env, "viewfs://warren-test/ckpt");
    try (var left = Files.list(dir)) {
      assertEquals(0, left.count(), "the run's directory is removed through Hadoop");
    }
  }

  /**
   * One source subtask, a shuffle into the workers (one failover region), task 1 throws at
   * iteration 12 of its first attempt: every subtask re-runs and resumes from the durable
   * checkpoint in {@code checkpointDir}, and the model is the failure-free one.
   */
  private static void failAllResumesFromTheDurableCheckpoint(StreamExecutionEnvironment env, String checkpointDir)
      throws Exception {
    String run = newRun();
    List<Tuple2<Integer, double[]>> all = new ArrayList<>();
    for (int p = 0; p < WORKERS; p++) {
      for (double[] row : Training.partition(p, WORKERS)) {
        all.add(Tuple2.of(p, row));
      }
    }
    // one source subtask, then a custom partitioning by the row's partition: an all-to-all edge
    DataStream<double[]> rows =
        env.fromData(all, Types.TUPLE(Types.INT, ROW))
            .setParallelism(1)
            .partitionCustom((Integer key, int n) -> key, new ByPartition())
            .map(t -> t.f1)
            .returns(ROW);
    Training.Plan plan = new Training.Plan(run, ITERS, 1, 12, 0, -1);
    collect(
        WarrenFlink.train(
            rows,
            WORKERS,
            Map.of("recovery", "fail-all", "checkpointDir", checkpointDir, "connectTimeout", "60"),
            (ctx, part) -> Training.train(ctx.communicator(), ctx.taskId(), ctx.attempt(), part, plan),
            ROW),
        run);
    WarrenFlink.execute(env, "fail-all");
    Map<Integer, double[]> r = results(run);
    assertEquals(WORKERS, attempts(r, 1), "every subtask re-ran");
    for (double[] row : r.values()) {
      // Task 1 throws at iteration 12, once every rank has committed checkpoint 12; but a rank
      // cancelled while still uploading it leaves 11 as its newest, and the ranks then agree on
      // 11 (HadoopCheckpoints: the agreed version is a rank's newest or the one before). Seen
      // once in a `make jvm` run.
      assertTrue(row[2] >= 11, "resumed from durable version " + row[2]);
      assertArrayEquals(withoutFlink(), Training.weights(row));
    }
  }

  /** The partition a row of the fail-all test belongs to. */
  private static final class ByPartition implements KeySelector<Tuple2<Integer, double[]>, Integer> {
    @Override
    public Integer getKey(Tuple2<Integer, double[]> t) {
      return t.f0;
    }
  }

  /** A user's own function joining the run of WarrenFlink.prepare: sums the subtask indexes. */
  private static final class JoinAndSum extends RichMapFunction<Integer, Integer> {
    private final String run;
    private transient WarrenContext warren;

    JoinAndSum(String run) {
      this.run = run;
    }

    @Override
    public void open(OpenContext openContext) {
      warren = WarrenContext.of(getRuntimeContext());
    }

    @Override
    public Integer map(Integer v) {
      int[] x = {v};
      warren.communicator().allreduce(x, Op.SUM);
      Training.RESULTS
          .computeIfAbsent(run, k -> new java.util.concurrent.ConcurrentHashMap<>())
          .put(warren.taskId(), new double[] {x[0], warren.attempt()});
      warren.finish();
      return x[0];
    }

    @Override
    public void close() {
      warren.close();
    }
  }

  @Test
  void aUsersRichFunctionJoinsThePreparedRunWithWarrenContextOf() throws Exception {
    String run = newRun();
    StreamExecutionEnvironment env = env();
    WarrenFlink.prepare(env, WORKERS, Map.of());
    env.fromSource(
            new PartitionedSource<>(WORKERS, (p, n) -> List.of(p)),
            WatermarkStrategy.noWatermarks(),
            "indexes",
            Types.INT)
        .setParallelism(WORKERS)
        .map(new JoinAndSum(run))
        .setParallelism(WORKERS)
        .sinkTo(new DiscardingSink<>())
        .setParallelism(WORKERS);
    WarrenFlink.execute(env, "context-of");
    Map<Integer, double[]> r = Training.RESULTS.get(run);
    assertEquals(WORKERS, r.size());
    for (double[] v : r.values()) {
      assertEquals(0 + 1 + 2, v[0]);
      assertEquals(0, v[1]);
    }
  }

  @Test
  void cancellingTheJobWhileWorkersWaitInACollectiveEndsEveryTaskWithinTenSeconds() throws Exception {
    String run = newRun();
    StreamExecutionEnvironment env = env();
    job(env, new Training.Plan(run, ITERS, -1, -1, 0, 2), Map.of());
    JobClient client = env.executeAsync("cancel");
    // tasks 0 and 1 wait in their first allreduce for task 2, which sleeps
    long until = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    while (client.getJobStatus().get() != JobStatus.RUNNING && System.nanoTime() < until) {
      Thread.sleep(50);
    }
    Thread.sleep(3000);
    assertEquals(0, Training.ITERATIONS.getOrDefault(run, new AtomicInteger()).get());
    long cancel = System.nanoTime();
    client.cancel().get(10, TimeUnit.SECONDS);
    while (!client.getJobStatus().get().isGloballyTerminalState()
        && System.nanoTime() - cancel < Duration.ofSeconds(20).toNanos()) {
      Thread.sleep(20);
    }
    double took = (System.nanoTime() - cancel) / 1e9;
    assertEquals(JobStatus.CANCELED, client.getJobStatus().get());
    assertTrue(took < 10, "the job took " + took + " s to cancel");
    Map<String, Long> ended = Training.ENDED.get(run);
    assertTrue(ended != null && ended.size() == WORKERS, "worker bodies that ended: " + ended);
    for (Map.Entry<String, Long> e : ended.entrySet()) {
      double s = (e.getValue() - cancel) / 1e9;
      assertTrue(s < 10, "worker " + e.getKey() + " ended " + s + " s after the cancel");
    }
  }
}
