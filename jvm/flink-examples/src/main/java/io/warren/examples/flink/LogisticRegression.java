package io.warren.examples.flink;

import io.warren.CallOptions;
import io.warren.Checkpoint;
import io.warren.Communicator;
import io.warren.Op;
import io.warren.examples.data.LogisticData;
import io.warren.flink.WarrenContext;
import io.warren.flink.WarrenFlink;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.stream.Collectors;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * Distributed logistic regression as a Flink DataStream job with Warren: full-batch gradient
 * descent, one gradient allreduce and one checkpoint per iteration, retry-one recovery through
 * Flink's region failover (or fail-all: {@code --recovery fail-all --checkpoint-dir DIR}). The
 * same rows ({@link LogisticData}), arithmetic and MODEL_HASH as the Spark example.
 *
 * <pre>
 * jvm/flink-examples/bin/run-lr --workers 3 --kill-task 8     # a local MiniCluster
 * flink run -c io.warren.examples.flink.LogisticRegression warren-flink-examples.jar --workers 3
 * </pre>
 *
 * <p>The command line is {@link CommandLine}'s; its failures ({@code --kill-task}, ...) are
 * {@link Faults}'. Prints the loss per iteration, {@code ACCURACY}, {@code ATTEMPTS} (task id
 * and Flink's attempt number of each worker) and {@code MODEL_HASH}.
 */
public final class LogisticRegression {
  private LogisticRegression() {}

  /** One worker: bootstrap calls, then a checkpointed gradient loop from the last checkpoint. */
  static WorkerResult worker(TrainingParams p, WarrenContext ctx, List<double[]> parts) throws Exception {
    Communicator comm = ctx.communicator();
    double[] xy = parts.isEmpty() ? new double[0] : parts.get(0); // [x..., y...], see LogisticData
    // Bootstrap calls: made once before the first checkpoint, replayed to a restarted worker.
    int d = comm.allreduce(new int[] {p.features + 1}, Op.MAX, CallOptions.bootstrap())[0];
    int n = xy.length / (d + 1);
    byte[] seedBytes = comm.broadcast(ByteBuffer.allocate(8).putLong(p.seed).array(), 0, CallOptions.bootstrap());
    SplittableRandom r = new SplittableRandom(ByteBuffer.wrap(seedBytes).getLong() ^ 0x5deece66dL);
    Checkpoint ckpt = comm.loadCheckpoint(); // the weights and losses so far, [w..., losses...]
    double[] wl = new double[d + p.iters];
    if (ckpt.version() == 0) {
      for (int j = 0; j < d; j++) {
        wl[j] = r.nextDouble(-0.01, 0.01);
      }
    } else {
      ByteBuffer.wrap(ckpt.global()).order(ByteOrder.LITTLE_ENDIAN).asDoubleBuffer().get(wl);
    }
    double[] buf = new double[d + 2];
    long loopStart = System.nanoTime();
    for (int it = ckpt.version(); it < p.iters; it++) {
      p.hooks.beforeIteration(ctx, it);
      java.util.Arrays.fill(buf, 0.0);
      LogisticData.accumulate(xy, n, d, wl, buf); // this partition's gradient and log loss
      buf[d + 1] = n;
      comm.allreduce(buf, Op.SUM);
      wl[d + it] = buf[d] / buf[d + 1];
      for (int j = 0; j < d; j++) {
        wl[j] -= p.stepSize * buf[j] / buf[d + 1];
      }
      ByteBuffer b = ByteBuffer.allocate(8 * wl.length).order(ByteOrder.LITTLE_ENDIAN);
      b.asDoubleBuffer().put(wl);
      comm.checkpoint(b.array(), null);
      p.hooks.afterCheckpoint(ctx, it);
    }
    double loopMs = (System.nanoTime() - loopStart) / 1e6;
    double[] acc = {LogisticData.correct(xy, n, d, wl), n};
    comm.allreduce(acc, Op.SUM);
    WorkerResult res = new WorkerResult();
    res.task = ctx.taskId();
    res.attempt = ctx.attempt();
    res.rank = comm.rank();
    res.weights = java.util.Arrays.copyOf(wl, d);
    res.losses = java.util.Arrays.copyOfRange(wl, d, d + p.iters);
    res.accuracy = acc[0] / acc[1];
    res.recoveries = comm.recoveries();
    res.startVersion = ckpt.version();
    res.iterMs = p.iters > ckpt.version() ? loopMs / (p.iters - ckpt.version()) : 0.0;
    return res;
  }

  /**
   * Runs the job on {@code env} (which needs {@code p.workers} free task slots): the
   * partitions, the workers, their results to the client.
   *
   * @param env the environment
   * @param p the parameters
   * @return every worker's result, in task-id order
   * @throws Exception if the job failed
   */
  public static List<WorkerResult> run(StreamExecutionEnvironment env, TrainingParams p) throws Exception {
    p.hooks.beforeSubmit(env);
    boolean failAll = "fail-all".equalsIgnoreCase(p.settings.getOrDefault("recovery", "retry-one").trim());
    DataStream<double[]> data =
        Partitions.of(env, p.workers, failAll, pid -> LogisticData.generate(p.rows, p.workers, p.features, p.seed, pid));
    Results.collect(WarrenFlink.train(data, p.workers, p.settings, (ctx, part) -> worker(p, ctx, part), TypeInformation.of(WorkerResult.class)));
    List<WorkerResult> results = Results.of(WarrenFlink.execute(env, "warren-logistic-regression"));
    results.sort((a, b) -> Integer.compare(a.task, b.task));
    return results;
  }

  /**
   * The configuration of a local run: fixed-delay restarts (Flink restarts nothing by default
   * without checkpointing) and region failover.
   *
   * @return the configuration
   */
  public static Configuration localConfiguration() {
    Configuration c = new Configuration();
    c.setString("restart-strategy.type", "fixed-delay");
    c.setString("restart-strategy.fixed-delay.attempts", "3");
    c.setString("restart-strategy.fixed-delay.delay", "1 s");
    c.setString("jobmanager.execution.failover-strategy", "region");
    return c;
  }

  /**
   * Entry point: a local MiniCluster from the command line, the cluster under {@code flink run}.
   *
   * @param args see {@link CommandLine#usage()}
   * @throws Exception if the job failed
   */
  public static void main(String[] args) throws Exception {
    TrainingParams p = CommandLine.parse(args);
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(localConfiguration());
    long started = System.nanoTime();
    List<WorkerResult> results = run(env, p);
    double seconds = (System.nanoTime() - started) / 1e9;
    WorkerResult r0 = results.stream().filter(r -> r.rank == 0).findFirst().orElseThrow();
    for (int i = 0; i < r0.losses.length; i++) {
      System.out.printf(Locale.ROOT, "iter %3d loss %.10f%n", i + 1, r0.losses[i]);
    }
    System.out.printf(Locale.ROOT, "ACCURACY %.6f%n", r0.accuracy);
    System.out.println("ATTEMPTS " + results.stream().map(r -> r.task + ":" + r.attempt).collect(Collectors.joining(" ")));
    System.out.printf(Locale.ROOT, "RECOVERIES %d%n", r0.recoveries);
    System.out.printf(Locale.ROOT, "SECONDS %.2f%n", seconds);
    System.out.printf(Locale.ROOT, "ITER_MS %.3f%n", r0.iterMs);
    System.out.println("MODEL_HASH " + r0.modelHash());
  }
}
