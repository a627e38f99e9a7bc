package io.warren.examples.flink;

import io.warren.CallOptions;
import io.warren.Checkpoint;
import io.warren.Communicator;
import io.warren.Op;
import io.warren.flink.PartitionedSource;
import io.warren.flink.WarrenContext;
import io.warren.flink.WarrenFlink;
import java.io.Serializable;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;
import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.accumulators.ListAccumulator;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.DeploymentOptions;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;

/**
 * Distributed logistic regression as a Flink DataStream job with Warren: full-batch gradient
 * descent, one gradient allreduce and one checkpoint per iteration, retry-one recovery through
 * Flink's region failover. The same data, arithmetic and MODEL_HASH as the Spark example
 * ({@code spark-examples/.../LogisticRegression.scala}): {@code --workers 3 --rows 100000
 * --features 20 --iters 20} prints the hash of spark-examples/demo-model-hash.txt.
 *
 * <pre>
 * jvm/flink-examples/bin/run-lr --workers 3 --kill-task 8     # a local MiniCluster
 * flink run -c io.warren.examples.flink.LogisticRegression warren-flink-examples.jar --workers 3
 * </pre>
 *
 * <p>Job shape: a {@link PartitionedSource} (subtask i makes partition i) → the workers → a
 * report map → a discarding sink, all at parallelism {@code --workers} with forward edges, so
 * each worker subtask is its own failover region. Rank 0's result reaches the client through
 * a list accumulator. Prints the loss per iteration, {@code ACCURACY}, {@code ATTEMPTS} (task id
 * and Flink's attempt number of each worker) and {@code MODEL_HASH}.
 */
public final class LogisticRegression {
  private static final String ACCUMULATOR = "warren-lr-results";

  private LogisticRegression() {}

  /** The job's parameters (see {@link #usage()}). */
  public static final class Params implements Serializable {
    private static final long serialVersionUID = 1L;
    /** Warren workers (parallel subtasks). */
    public int workers = 3;
    /** Rows of synthetic data in all. */
    public int rows = 100000;
    /** Features per row. */
    public int features = 20;
    /** Gradient steps. */
    public int iters = 20;
    /** The learning rate. */
    public double stepSize = 1.0;
    /** Seed of the data and of the initial weights. */
    public long seed = 20240601L;
    /** Throw in task 1's first attempt at this iteration (-1: never). */
    public int killTask = -1;
    /**
     * SIGKILL the TaskManager process of task 1's first attempt at this iteration (-1: never);
     * only on a cluster whose TaskManagers have their own processes.
     */
    public int killTaskManager = -1;
    /**
     * SIGSTOP the TaskManager process of task 1's first attempt at this iteration (-1: never): a
     * frozen TaskManager; only on a cluster whose TaskManagers have their own processes.
     */
    public int pauseTaskManager = -1;
    /** Milliseconds each worker sleeps after each checkpoint (0: none). */
    public int pauseMs;
    /** {@code warren.*} settings. */
    public Map<String, String> settings = new HashMap<>(Map.of("bootstrapCache", "true"));

    /**
     * Parses command-line arguments.
     *
     * @param args the arguments
     * @return the parameters
     * @throws IllegalArgumentException naming an unknown argument, with the usage
     */
    public static Params parse(String... args) {
      Params p = new Params();
      for (int i = 0; i < args.length; i++) {
        String a = args[i];
        if (i + 1 >= args.length) {
          throw new IllegalArgumentException("missing value of " + a + "; " + usage());
        }
        String v = args[++i];
        switch (a) {
          case "--workers" -> p.workers = integer(a, v);
          case "--rows" -> p.rows = integer(a, v);
          case "--features" -> p.features = integer(a, v);
          case "--iters" -> p.iters = integer(a, v);
          case "--step-size" -> p.stepSize = number(a, v);
          case "--seed" -> p.seed = wholeLong(a, v);
          case "--kill-task" -> p.killTask = integer(a, v);
          case "--kill-taskmanager" -> p.killTaskManager = integer(a, v);
          case "--pause-taskmanager" -> p.pauseTaskManager = integer(a, v);
          case "--pause-ms" -> p.pauseMs = integer(a, v);
          case "--recovery" -> p.settings.put("recovery", v);
          case "--checkpoint-dir" -> p.settings.put("checkpointDir", v);
          case "--set" -> {
            int eq = v.indexOf('=');
            if (eq < 0) {
              throw new IllegalArgumentException("--set wants KEY=VALUE, got " + v);
            }
            p.settings.put(v.substring(0, eq), v.substring(eq + 1));
          }
          default -> throw new IllegalArgumentException("unknown argument " + a + "; " + usage());
        }
      }
      return p;
    }

    /** {@code v} as the whole number {@code arg} wants, or an error naming both and the usage. */
    private static int integer(String arg, String v) {
      try {
        return Integer.parseInt(v.trim());
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException(arg + " wants a whole number, got " + v + "; " + usage());
      }
    }

    /** {@code v} as the 64-bit whole number {@code arg} wants, or an error naming both. */
    private static long wholeLong(String arg, String v) {
      try {
        return Long.parseLong(v.trim());
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException(arg + " wants a whole number, got " + v + "; " + usage());
      }
    }

    /** {@code v} as the number {@code arg} wants, or an error naming both and the usage. */
    private static double number(String arg, String v) {
      try {
        return Double.parseDouble(v.trim());
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException(arg + " wants a number, got " + v + "; " + usage());
      }
    }
  }

  /**
   * The command line's usage.
   *
   * @return one line
   */
  public static String usage() {
    return "usage: [--workers N] [--rows N] [--features N] [--iters N] [--step-size X] [--seed N]"
        + " [--kill-task ITER] [--kill-taskmanager ITER] [--pause-taskmanager ITER] [--pause-ms MS] [--recovery retry-one|fail-all] [--checkpoint-dir"
        + " DIR] [--set warren.KEY=VALUE]...";
  }

  /** One worker's result (rank 0's is the run's; every rank has the same weights). */
  public static final class Result implements Serializable {
    private static final long serialVersionUID = 1L;
    /** Task id (subtask index). */
    public int task;
    /** Flink's attempt number of the subtask. */
    public int attempt;
    /** The Warren rank. */
    public int rank;
    /** Final weights (the last is the intercept). */
    public double[] weights;
    /** Mean log loss before each step. */
    public double[] losses;
    /** Training accuracy of the final weights. */
    public double accuracy;
    /** Recoveries this worker took part in. */
    public long recoveries;
    /** The checkpoint version the worker started from. */
    public int startVersion;
    /** Milliseconds per gradient iteration of this attempt's loop (its wall time / iterations). */
    public double iterMs;

    /** For Flink's POJO serializer. */
    public Result() {}

    /**
     * SHA-256 of the weights as little-endian doubles.
     *
     * @return 64 hex digits
     */
    public String modelHash() {
      return hash(weights);
    }
  }

  /**
   * SHA-256 of {@code w} as little-endian doubles, in hex.
   *
   * @param w the weights
   * @return 64 hex digits
   */
  public static String hash(double[] w) {
    ByteBuffer b = ByteBuffer.allocate(8 * w.length).order(ByteOrder.LITTLE_ENDIAN);
    for (double x : w) {
      b.putDouble(x);
    }
    try {
      return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b.array()));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  private static double[] trueWeights(Params p) {
    SplittableRandom r = new SplittableRandom(p.seed);
    double[] w = new double[p.features + 1];
    for (int j = 0; j < w.length; j++) {
      w[j] = r.nextDouble(-1.0, 1.0);
    }
    return w;
  }

  /**
   * Partition {@code pid}'s rows as one element: row-major {@code x} (with a trailing 1 for the
   * intercept) then the labels {@code y}.
   *
   * @param p the parameters
   * @param pid the partition
   * @return {@code [x..., y...]}
   */
  static double[] generate(Params p, int pid) {
    int n = p.rows / p.workers + (pid < p.rows % p.workers ? 1 : 0);
    int d = p.features + 1;
    double[] wt = trueWeights(p);
    SplittableRandom r = new SplittableRandom(p.seed * 1000003L + pid);
    double[] xy = new double[n * d + n];
    for (int i = 0; i < n; i++) {
      double z = 0.0;
      for (int j = 0; j < d; j++) {
        double v = j == p.features ? 1.0 : r.nextGaussian();
        xy[i * d + j] = v;
        z += v * wt[j];
      }
      xy[n * d + i] = r.nextDouble() < 1.0 / (1.0 + Math.exp(-3.0 * z)) ? 1.0 : 0.0;
    }
    return xy;
  }

  private static byte[] toBytes(double[] w, double[] losses) {
    ByteBuffer b = ByteBuffer.allocate(8 * (w.length + losses.length)).order(ByteOrder.LITTLE_ENDIAN);
    for (double x : w) {
      b.putDouble(x);
    }
    for (double x : losses) {
      b.putDouble(x);
    }
    return b.array();
  }

  /**
   * One worker: bootstrap calls, then a checkpointed gradient loop from the last checkpoint.
   *
   * @param p the parameters
   * @param ctx the worker
   * @param parts its partition (one element, see {@link #generate})
   * @return its result
   * @throws InterruptedException if interrupted while pausing
   */
  static Result worker(Params p, WarrenContext ctx, List<double[]> parts) throws InterruptedException {
    Communicator comm = ctx.communicator();
    int d = p.features + 1;
    double[] xy = parts.isEmpty() ? new double[0] : parts.get(0);
    int n = xy.length / (d + 1);
    int[] dims = {d};
    comm.allreduce(dims, Op.MAX, CallOptions.bootstrap());
    byte[] seedBytes = comm.broadcast(ByteBuffer.allocate(8).putLong(p.seed).array(), 0, CallOptions.bootstrap());
    long initSeed = ByteBuffer.wrap(seedBytes).getLong();
    Checkpoint ckpt = comm.loadCheckpoint();
    double[] losses = new double[p.iters];
    double[] w = new double[dims[0]];
    if (ckpt.version() == 0) {
      SplittableRandom r = new SplittableRandom(initSeed ^ 0x5deece66dL);
      for (int j = 0; j < d; j++) {
        w[j] = r.nextDouble(-0.01, 0.01);
      }
    } else {
      ByteBuffer b = ByteBuffer.wrap(ckpt.global()).order(ByteOrder.LITTLE_ENDIAN);
      for (int j = 0; j < d; j++) {
        w[j] = b.getDouble();
      }
      for (int i = 0; i < p.iters; i++) {
        losses[i] = b.getDouble();
      }
    }
    double[] buf = new double[d + 2];
    long loopStart = System.nanoTime();
    for (int it = ckpt.version(); it < p.iters; it++) {
      if (ctx.taskId() == 1 && it == p.killTask && ctx.attempt() == 0) {
        throw new IllegalStateException(
            "injected failure of task 1 at iteration " + it + " (attempt " + ctx.attempt() + ")");
      }
      if (ctx.taskId() == 1 && it == p.killTaskManager && ctx.attempt() == 0) {
        signalThisTaskManager("KILL", it);
        Thread.sleep(60_000); // the signal ends the process first
        throw new IllegalStateException("this TaskManager survived its SIGKILL");
      }
      if (ctx.taskId() == 1 && it == p.pauseTaskManager && ctx.attempt() == 0) {
        signalThisTaskManager("STOP", it);
        // Continued (SIGCONT) later: the tracker fenced this worker meanwhile, and the job
        // went on with its replacement.
        throw new IllegalStateException(
            "task 1 was paused at iteration " + it + " and continued: " + comm.fenced().orElse("not fenced"));
      }
      gradient(xy, n, d, w, buf);
      comm.allreduce(buf, Op.SUM);
      double total = buf[d + 1];
      losses[it] = buf[d] / total;
      for (int j = 0; j < d; j++) {
        w[j] -= p.stepSize * buf[j] / total;
      }
      comm.checkpoint(toBytes(w, losses), null);
      if (p.pauseMs > 0) {
        Thread.sleep(p.pauseMs);
      }
    }
    double loopMs = (System.nanoTime() - loopStart) / 1e6;
    double[] acc = {0.0, n};
    for (int i = 0; i < n; i++) {
      double z = 0.0;
      for (int j = 0; j < d; j++) {
        z += xy[i * d + j] * w[j];
      }
      if ((z > 0) == (xy[n * d + i] > 0.5)) {
        acc[0] += 1;
      }
    }
    comm.allreduce(acc, Op.SUM);
    Result res = new Result();
    res.task = ctx.taskId();
    res.attempt = ctx.attempt();
    res.rank = comm.rank();
    res.weights = w;
    res.losses = losses;
    res.accuracy = acc[0] / acc[1];
    res.recoveries = comm.recoveries();
    res.startVersion = ckpt.version();
    res.iterMs = p.iters > ckpt.version() ? loopMs / (p.iters - ckpt.version()) : 0.0;
    return res;
  }

  /** The main class of a TaskManager process of its own (a standalone cluster's). */
  static final String TASK_MANAGER_MAIN = "org.apache.flink.runtime.taskexecutor.TaskManagerRunner";

  /**
   * Sends {@code SIG<signal>} to the process this worker runs in, a TaskManager of its own:
   * {@code KILL} ends it (Flink loses every task it ran, and a restarted subtask needs a slot on
   * another TaskManager); {@code STOP} freezes it (nothing in it runs or answers until a {@code
   * SIGCONT}).
   *
   * @param signal KILL or STOP
   * @param it the iteration (for the message)
   * @throws IllegalStateException if this TaskManager shares its process with others or with
   *     the JobManager (a MiniCluster): the signal would reach the whole job
   * @throws InterruptedException if interrupted while waiting for the signal
   */
  private static void signalThisTaskManager(String signal, int it) throws InterruptedException {
    String main = System.getProperty("sun.java.command", "").split(" ")[0];
    if (!main.equals(TASK_MANAGER_MAIN)) {
      throw new IllegalStateException(
          "--kill-taskmanager and --pause-taskmanager need TaskManagers in processes of their own (a"
              + " standalone cluster), but this worker runs in "
              + main
              + ", which the JobManager shares: use --kill-task");
    }
    long pid = ProcessHandle.current().pid();
    System.err.printf(Locale.ROOT, "task 1: SIG%s to this TaskManager (pid %d) at iteration %d%n", signal, pid, it);
    try {
      new ProcessBuilder("kill", "-" + signal, Long.toString(pid)).inheritIO().start().waitFor();
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException("cannot run kill", e);
    }
  }

  /** The gradient, loss and row count of one partition into {@code buf}. */
  private static void gradient(double[] xy, int n, int d, double[] w, double[] buf) {
    java.util.Arrays.fill(buf, 0.0);
    for (int i = 0; i < n; i++) {
      double z = 0.0;
      int o = i * d;
      for (int j = 0; j < d; j++) {
        z += xy[o + j] * w[j];
      }
      double y = xy[n * d + i];
      double prob = 1.0 / (1.0 + Math.exp(-z));
      double g = prob - y;
      for (int j = 0; j < d; j++) {
        buf[j] += g * xy[o + j];
      }
      buf[d] += z > 0 ? Math.log1p(Math.exp(-z)) + (1 - y) * z : Math.log1p(Math.exp(z)) - y * z;
    }
    buf[d + 1] = n;
  }

  /** Hands every worker's result to the client through a list accumulator. */
  private static final class Report extends RichMapFunction<Result, Result> {
    private static final long serialVersionUID = 1L;
    private transient ListAccumulator<Result> results;

    @Override
    public void open(OpenContext openContext) {
      results = new ListAccumulator<>();
      getRuntimeContext().addAccumulator(ACCUMULATOR, results);
    }

    @Override
    public Result map(Result r) {
      results.add(r);
      return r;
    }
  }

  /** The partition id of a fail-all row. */
  private static final class ByPartition implements KeySelector<Tuple2<Integer, double[]>, Integer> {
    private static final long serialVersionUID = 1L;

    @Override
    public Integer getKey(Tuple2<Integer, double[]> t) {
      return t.f0;
    }
  }

  /**
   * Builds the job on {@code env}: source → workers → report → discard, forward edges only
   * (retry-one); under fail-all one source subtask and a shuffle into the workers.
   *
   * @param env the environment
   * @param p the parameters
   */
  public static void build(StreamExecutionEnvironment env, Params p) {
    Params params = p;
    DataStream<double[]> data;
    if ("fail-all".equalsIgnoreCase(p.settings.getOrDefault("recovery", "retry-one").trim())) {
      // fail-all needs one failover region: one source subtask makes every partition, and a
      // custom partitioning by partition id (an all-to-all edge) sends each to its worker.
      data =
          env.fromSource(
                  new PartitionedSource<Tuple2<Integer, double[]>>(
                      1,
                      (ignored, one) -> {
                        List<Tuple2<Integer, double[]>> all = new ArrayList<>();
                        for (int pid = 0; pid < params.workers; pid++) {
                          all.add(Tuple2.of(pid, generate(params, pid)));
                        }
                        return all;
                      }),
                  WatermarkStrategy.noWatermarks(),
                  "synthetic-data",
                  Types.TUPLE(Types.INT, TypeInformation.of(double[].class)))
              .setParallelism(1)
              .partitionCustom((Integer pid, int n) -> pid, new ByPartition())
              .map(t -> t.f1)
              .returns(TypeInformation.of(double[].class))
              .setParallelism(p.workers);
    } else {
      data =
          env.fromSource(
                  new PartitionedSource<>(p.workers, (pid, n) -> List.of(generate(params, pid))),
                  WatermarkStrategy.noWatermarks(),
                  "synthetic-partitions",
                  TypeInformation.of(double[].class))
              .setParallelism(p.workers);
    }
    WarrenFlink.train(
            data, p.workers, p.settings, (ctx, part) -> worker(params, ctx, part), TypeInformation.of(Result.class))
        .map(new Report())
        .setParallelism(p.workers)
        .sinkTo(new DiscardingSink<>())
        .setParallelism(p.workers);
  }

  /**
   * Runs the job and returns every worker's result, in task-id order.
   *
   * @param env the environment (needs {@code p.workers} free task slots)
   * @param p the parameters
   * @return the results
   * @throws Exception if the job failed
   */
  public static List<Result> run(StreamExecutionEnvironment env, Params p) throws Exception {
    build(env, p);
    JobExecutionResult r = WarrenFlink.execute(env, "warren-logistic-regression");
    List<Result> results = new ArrayList<>(r.<List<Result>>getAccumulatorResult(ACCUMULATOR));
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
   * @param args see {@link #usage()}
   * @throws Exception if the job failed
   */
  public static void main(String[] args) throws Exception {
    Params p = Params.parse(args);
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(localConfiguration());
    String target = env.getConfiguration().get(DeploymentOptions.TARGET);
    if ((p.killTaskManager >= 0 || p.pauseTaskManager >= 0) && (target == null || target.equals("local"))) {
      throw new IllegalArgumentException(
          "--kill-taskmanager and --pause-taskmanager need a cluster whose TaskManagers have processes of their own (flink"
              + " run on a standalone cluster); this local run's TaskManagers share this JVM: use"
              + " --kill-task");
    }
    long started = System.nanoTime();
    List<Result> results = run(env, p);
    double seconds = (System.nanoTime() - started) / 1e9;
    Result r0 = results.stream().filter(r -> r.rank == 0).findFirst().orElseThrow();
    for (int i = 0; i < r0.losses.length; i++) {
      System.out.printf(Locale.ROOT, "iter %3d loss %.10f%n", i + 1, r0.losses[i]);
    }
    System.out.printf(Locale.ROOT, "ACCURACY %.6f%n", r0.accuracy);
    StringBuilder attempts = new StringBuilder();
    for (Result r : results) {
      attempts.append(attempts.length() == 0 ? "" : " ").append(r.task).append(':').append(r.attempt);
    }
    System.out.println("ATTEMPTS " + attempts);
    System.out.printf(Locale.ROOT, "RECOVERIES %d%n", r0.recoveries);
    System.out.printf(Locale.ROOT, "SECONDS %.2f%n", seconds);
    System.out.printf(Locale.ROOT, "ITER_MS %.3f%n", r0.iterMs);
    System.out.println("MODEL_HASH " + r0.modelHash());
  }
}
