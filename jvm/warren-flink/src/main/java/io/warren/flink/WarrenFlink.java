package io.warren.flink;

import io.warren.runner.ElasticSettings;
import io.warren.runner.JobPlan;
import io.warren.runner.PsServers;
import io.warren.runner.PsSettings;
import io.warren.runner.Recovery;
import io.warren.runner.RunnerException;
import io.warren.runner.RunnerSettings;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import org.apache.flink.api.common.ExecutionConfig;
import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.RuntimeExecutionMode;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.typeutils.GenericTypeInfo;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.ExecutionOptions;
import org.apache.flink.configuration.ReadableConfig;
import org.apache.flink.core.execution.JobListener;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * Runs Warren workers as the parallel subtasks of a Flink DataStream job.
 *
 * <pre>{@code
 * DataStream<double[]> rows = env.fromSource(new PartitionedSource<>(4, data), ...).setParallelism(4);
 * DataStream<double[]> models = WarrenFlink.train(rows, 4, Map.of(), (ctx, part) -> {
 *   Communicator comm = ctx.communicator();
 *   Checkpoint ckpt = comm.loadCheckpoint();        // after a restart: the last checkpoint
 *   double[] w = ckpt.version() == 0 ? init() : decode(ckpt.global());
 *   for (int it = ckpt.version(); it < iters; it++) {
 *     double[] g = gradient(part, w); comm.allreduce(g, Op.SUM); step(w, g);
 *     comm.checkpoint(encode(w), null);
 *   }
 *   return w;
 * }, PrimitiveArrayTypeInfo.DOUBLE_PRIMITIVE_ARRAY_TYPE_INFO);
 * models.map(...).setParallelism(4).sinkTo(...).setParallelism(4);   // forward edges only
 * WarrenFlink.execute(env, "training");
 * }</pre>
 *
 * <p>Each worker is subtask {@code i} of the workers' operator: Warren task id {@code i},
 * attempt = Flink's attempt number of the subtask. The trackers run on the client, started by
 * {@code train} and closed when the job ends (call {@code execute} soon after {@code train}:
 * the first tracker's rendezvous deadline, {@code warren.rendezvousTimeout}, runs from {@code
 * train}).
 *
 * <h2>Recovery</h2>
 *
 * <ul>
 *   <li>{@code retry-one} (the default) through Flink's {@code region} failover: with only
 *       forward edges at the workers' parallelism around the workers (source(N) → workers(N) →
 *       sink(N)), each subtask chain is its own failover region, so Flink restarts only a failed
 *       subtask; it joins again with a higher attempt number and catches up from its peers,
 *       which wait inside their collective call. {@code train} refuses an input with a shuffle
 *       or another parallelism upstream; consume the results with forward edges too (an
 *       all-to-all edge after the workers, such as a parallelism-1 sink, also joins every
 *       subtask into one region). Flink restarts nothing without a restart strategy when
 *       checkpointing is off: set {@code restart-strategy.type: fixed-delay}.
 *   <li>{@code fail-all} for shapes with an all-to-all edge upstream of the workers (refused
 *       without one): Flink restarts every subtask (one region), each attempt
 *       joins its own tracker and resumes from the newest durable checkpoint every rank wrote to
 *       {@code warren.checkpointDir}: a local path of a file system every TaskManager shares,
 *       or a Hadoop file system URI ({@code hdfs://namenode:8020/dir}), whose checkpoints each
 *       worker stages locally (Hadoop's client on the class path, its configuration from
 *       {@code core-site.xml} and the {@code flink.hadoop.*} entries of the job's configuration).
 * </ul>
 *
 * <h2>Elastic membership</h2>
 *
 * With {@code warren.elastic=true} (retry-one) a worker whose restarted subtask has not
 * registered within {@code warren.rejoinTimeout} is dropped from the view: the others get
 * {@link io.warren.RolledBackException}, load the last checkpoint and go on without it, never
 * below {@code warren.minWorkers}; when Flink runs the subtask again it joins at a checkpoint
 * boundary. A restarted subtask that finds the job over, or that left, ends with no result.
 * Where the client can ask the cluster for its free slots (see Requirements), an elastic run
 * starts with the free slots if there are fewer than workers but at least {@code
 * warren.minWorkers}: the other subtasks wait for a slot, and their workers join at a checkpoint
 * boundary once Flink runs them.
 *
 * <h2>Parameter servers</h2>
 *
 * {@link #trainPS} starts parameter servers in the client (warren-runner's {@link PsServers}, as
 * Spark's driver does) and runs trainers with a {@link io.warren.ps.PsClient} in the subtasks; a
 * trainer subtask Flink restarts goes on at the servers' step.
 *
 * <h2>Hung, frozen and cut-off workers</h2>
 *
 * The tracker fences a worker silent for {@code warren.peerTimeout} (default 30 s); the others
 * wait for its replacement. If its TaskManager still runs (a network cut, a pause that ended),
 * the worker's own side fails its subtask at once ({@code Environment.failExternally}, from the
 * runner's watch thread, even while the task thread is busy outside Warren's calls) and Flink
 * restarts that subtask alone. A frozen TaskManager cannot, and Flink has no API to fail one
 * subtask from outside: Flink replaces its worker after the cluster's {@code heartbeat.timeout}
 * (50 s by default), which {@code train} logs against the peer timeout, warning when it is not
 * below {@code warren.connectTimeout} (the other workers would stop waiting first). Lower {@code
 * heartbeat.timeout} on the cluster to replace frozen TaskManagers sooner.
 *
 * <h2>Requirements</h2>
 *
 * STREAMING execution mode (BATCH may run the workers in turns, and they wait for each other),
 * Flink's default scheduler (not the adaptive one), no speculative execution, and a free task
 * slot for every worker ({@code warren.minWorkers} of them for an elastic run). When the client knows the
 * JobManager's REST address ({@code rest.address}: {@code flink run}, {@code
 * createRemoteEnvironment}), {@code train} asks it for the free slots and throws a {@link
 * WarrenFlinkException} at once if there are fewer than workers (after {@code
 * warren.slotWaitTimeout} seconds, default 0, for TaskManagers still registering; at least 10 s
 * when the slots exist but are busy). Otherwise a job that cannot get them (Flink deploys the
 * workers it has slots for, which wait for the others) is cancelled with a {@link
 * WarrenFlinkException} from {@link #execute} when the first tracker's rendezvous deadline
 * passes. Warren's jars in Flink's {@code lib/} (see {@code ClassLoading}).
 */
public final class WarrenFlink {
  /** The prefix of the settings in {@code train}'s map (optional there). */
  public static final String PREFIX = "warren.";

  /**
   * The first tracker's rendezvous deadline on Flink when {@code warren.rendezvousTimeout} is not
   * set, seconds: also how long a job without enough slots waits before it is cancelled.
   */
  public static final double DEFAULT_RENDEZVOUS_S = 60.0;

  /** How many attempts of a fail-all run get a tracker when Flink's configuration does not say. */
  public static final int DEFAULT_FAIL_ALL_ATTEMPTS = 4;

  /**
   * The declarations of the parameter-server settings of {@link #trainPS} ({@code warren.ps.*},
   * warren-runner's, as Spark's {@code spark.warren.ps.*}).
   */
  public static final PsSettings.Declarations PS_SETTINGS =
      PsSettings.declarations("client", "`warren.trackerHost`, else 127.0.0.1");

  /**
   * The declarations of the elastic-membership settings of {@link #train} ({@code
   * warren.elastic}, {@code warren.minWorkers}, {@code warren.rejoinTimeout}; warren-runner's,
   * as Spark's, with Flink's doc lines).
   */
  public static final ElasticSettings.Declarations ELASTIC_SETTINGS =
      ElasticSettings.declarations(
          "retry-one: elastic membership. A lost worker whose restarted subtask has not registered"
              + " within `rejoinTimeout` is dropped: the others roll back to their last checkpoint"
              + " and go on without it (its rows are skipped) instead of waiting for Flink to"
              + " redeploy it (a lost TaskManager's subtask waits for a free slot), and the"
              + " restarted subtask joins again at a checkpoint boundary",
          "elastic: never fewer workers; going on without a lost one below it fails naming the"
              + " missing tasks",
          "elastic: seconds the others wait for a lost worker's restarted subtask (Flink's"
              + " restart delay included) before going on without it");

  private static final AtomicLong RUNS = new AtomicLong();

  private WarrenFlink() {}

  /**
   * Runs {@code worker} in {@code numWorkers} parallel subtasks over {@code input}, with results
   * typed by Kryo (see the overload to give their type).
   *
   * @param input the rows; subtask {@code i} of the workers gets what Flink sends to it
   * @param numWorkers the workers (all must run at once)
   * @param settings {@code warren.*} settings (the prefix is optional)
   * @param worker the work of one worker
   * @param <T> the rows
   * @param <R> the results
   * @return the workers' results, one per subtask, at parallelism {@code numWorkers}
   * @throws WarrenFlinkException for an invalid setting or a job shape Warren cannot run
   */
  @SuppressWarnings({"unchecked", "rawtypes"})
  public static <T, R> SingleOutputStreamOperator<R> train(
      DataStream<T> input, int numWorkers, Map<String, String> settings, WarrenWorker<T, R> worker) {
    return train(input, numWorkers, settings, worker, (TypeInformation<R>) new GenericTypeInfo(Object.class));
  }

  /**
   * Runs {@code worker} in {@code numWorkers} parallel subtasks over {@code input}.
   *
   * @param input the rows; subtask {@code i} of the workers gets what Flink sends to it
   * @param numWorkers the workers (all must run at once)
   * @param settings {@code warren.*} settings (the prefix is optional)
   * @param worker the work of one worker
   * @param resultType the type of the results
   * @param <T> the rows
   * @param <R> the results
   * @return the workers' results, one per subtask, at parallelism {@code numWorkers}
   * @throws WarrenFlinkException for an invalid setting, a job shape Warren cannot run, or a
   *     cluster with fewer free task slots than workers
   */
  public static <T, R> SingleOutputStreamOperator<R> train(
      DataStream<T> input,
      int numWorkers,
      Map<String, String> settings,
      WarrenWorker<T, R> worker,
      TypeInformation<R> resultType) {
    Objects.requireNonNull(worker, "worker");
    StreamExecutionEnvironment env = input.getExecutionEnvironment();
    RunnerSettings s = parse(settings, numWorkers);
    ElasticSettings elastic = parseElastic(settings);
    if (elastic.enabled()) {
      // before the shape's checks, whose advice would not fit an elastic run's conflicts
      checkPlan(s, numWorkers, elastic, engine(env.getConfiguration()));
    }
    String bad = Shape.firstShuffle(input.getTransformation(), numWorkers, env.getParallelism());
    if (s.recovery() == Recovery.FAIL_ALL && bad == null) {
      throw new WarrenFlinkException(
          "warren.recovery=fail-all needs an all-to-all edge (a shuffle, a rebalance, a change of"
              + " parallelism) upstream of the workers, so that Flink restarts every worker"
              + " together, but the input reaches the workers through forward edges only: Flink's"
              + " region failover would restart only a failed subtask. Use warren.recovery="
              + "retry-one (made for this shape), or shuffle the input (partitionCustom)",
          null);
    }
    if (s.recovery() == Recovery.RETRY_ONE) {
      if (bad != null) {
        throw new WarrenFlinkException(
            "warren.recovery=retry-one needs forward edges at the workers' parallelism ("
                + numWorkers
                + ") from the sources to the workers, so that each worker subtask is its own"
                + " failover region, but the input has "
                + bad
                + ": Flink would restart every worker on any failure. Give the input"
                + " parallelism "
                + numWorkers
                + " without a shuffle (PartitionedSource), or set warren.recovery=fail-all",
            null);
      }
    }
    RunConfig run = start(env, numWorkers, s, elastic);
    return input
        .transform("warren-workers", resultType, new WorkerOperator<>(run, worker))
        .setParallelism(numWorkers);
  }

  /**
   * Trains with parameter servers: starts {@code numServers} servers in this process (the client
   * that calls {@link #execute}; warren-runner's {@link PsServers}, stopped when the job ends),
   * then runs {@code worker} in {@code numWorkers} parallel subtasks over {@code input}, subtask
   * {@code i} as trainer {@code i} with a {@link io.warren.ps.PsClient} connected to every server.
   * The worker defines the job ({@code ctx.client().define(job)}, the same on every trainer),
   * then pulls and pushes from {@code ctx.client().step()} on:
   *
   * <pre>{@code
   * WarrenFlink.trainPS(rows, 4, 2, Map.of("warren.ps.checkpointDir", "/tmp/ps"), (ctx, part) -> {
   *   PsClient ps = ctx.client();
   *   ps.define(job);
   *   for (long step = ps.step(); step < steps; step++) {   // a restarted subtask resumes here
   *     float[] w = ps.pullSparse("w", keys(part, step));
   *     ps.push(new PsGradients().sparse("w", keys(part, step), grad(part, step, w)));
   *   }
   *   return ...;
   * }, resultType);
   * }</pre>
   *
   * <p>A worker that returns leaves the job (its trainer holds nobody back any more); one that
   * throws aborts its client without leaving, so that Flink's restart of the subtask (with
   * forward edges around the trainers, Flink's region failover restarts that subtask alone)
   * connects as the same trainer and goes on at the step the servers have: in sync mode the
   * others wait for it and the model is the failure-free one. Settings: {@code warren.ps.*}
   * ({@link #PS_SETTINGS}), and of the others {@code warren.tls*} (the servers and trainers),
   * {@code warren.slotWaitTimeout} and {@code warren.trackerHost} (the servers' address when
   * {@code warren.ps.host} is not set); the collective ones (recovery, checkpoints, timeouts) do
   * not apply. The same requirements as {@link #train}: STREAMING mode, no speculative
   * execution, a free slot for every trainer.
   *
   * @param input the rows; subtask {@code i} of the trainers gets what Flink sends to it
   * @param numWorkers the trainers (all must run at once)
   * @param numServers the parameter servers
   * @param settings {@code warren.*} settings (the prefix is optional)
   * @param worker the work of one trainer
   * @param resultType the type of the results
   * @param <T> the rows
   * @param <R> the results
   * @return the trainers' results, one per subtask, at parallelism {@code numWorkers}
   * @throws WarrenFlinkException for an invalid setting, or a cluster with fewer free task
   *     slots than trainers
   */
  public static <T, R> SingleOutputStreamOperator<R> trainPS(
      DataStream<T> input,
      int numWorkers,
      int numServers,
      Map<String, String> settings,
      PsWorker<T, R> worker,
      TypeInformation<R> resultType) {
    return trainPS(input, numWorkers, numServers, settings, worker, resultType, s -> {});
  }

  /**
   * {@link #trainPS(DataStream, int, int, Map, PsWorker, TypeInformation)}, calling {@code
   * onServers} on the client once the servers run (to watch them, or restart one with {@link
   * PsServers#restart}; they stop when the job ends).
   *
   * @param input the rows; subtask {@code i} of the trainers gets what Flink sends to it
   * @param numWorkers the trainers (all must run at once)
   * @param numServers the parameter servers
   * @param settings {@code warren.*} settings (the prefix is optional)
   * @param worker the work of one trainer
   * @param resultType the type of the results
   * @param onServers called with the running servers, before the job is built further
   * @param <T> the rows
   * @param <R> the results
   * @return the trainers' results, one per subtask, at parallelism {@code numWorkers}
   * @throws WarrenFlinkException for an invalid setting, or a cluster with fewer free task
   *     slots than trainers
   */
  public static <T, R> SingleOutputStreamOperator<R> trainPS(
      DataStream<T> input,
      int numWorkers,
      int numServers,
      Map<String, String> settings,
      PsWorker<T, R> worker,
      TypeInformation<R> resultType,
      Consumer<PsServers> onServers) {
    Objects.requireNonNull(worker, "worker");
    Objects.requireNonNull(onServers, "onServers");
    if (numServers < 1) {
      throw new IllegalArgumentException("numServers must be at least 1, got " + numServers);
    }
    StreamExecutionEnvironment env = input.getExecutionEnvironment();
    RunnerSettings s = parse(settings, numWorkers);
    PsSettings ps = parsePs(settings);
    checkEnvironment(env.getConfiguration(), numWorkers, s.slotWaitTimeout());
    String host = ps.host().or(s::trackerHost).orElse("127.0.0.1");
    PsServers servers = PsServers.start(numServers, host, ps, s.tls());
    try {
      onServers.accept(servers);
      env.registerJobListener(new PsRunListener(servers));
    } catch (RuntimeException | Error e) {
      servers.close();
      throw e;
    }
    return input
        .transform("warren-trainers", resultType, new PsTrainerOperator<>(servers.trainers(), numWorkers, worker))
        .setParallelism(numWorkers);
  }

  /**
   * The settings table of docs/flink.md, rendered from the declarations: warren-runner's
   * settings, then the elastic and parameter-server ones, then {@code warren.setting.WARREN_X}.
   *
   * @return the Markdown table, lines joined by {@code \n}
   */
  public static String markdownTable() {
    List<String> lines =
        new ArrayList<>(Arrays.asList(RunnerSettings.markdownTable(PREFIX, "Flink setting").split("\n")));
    String last = lines.remove(lines.size() - 1);
    lines.addAll(RunnerSettings.markdownRows(PREFIX, ELASTIC_SETTINGS.all()));
    lines.addAll(RunnerSettings.markdownRows(PREFIX, PS_SETTINGS.all()));
    lines.add(last);
    return String.join("\n", lines);
  }

  /**
   * Sets up a Warren run for a job whose own {@code RichFunction}s join it with {@link
   * WarrenContext#of}: starts its trackers and puts what the workers need in the job's global
   * parameters (merged with those already set).
   *
   * @param env the job's environment
   * @param numWorkers the workers: the parallelism of the joining function
   * @param settings {@code warren.*} settings (the prefix is optional)
   * @throws WarrenFlinkException for an invalid setting
   */
  public static void prepare(StreamExecutionEnvironment env, int numWorkers, Map<String, String> settings) {
    RunConfig run = start(env, numWorkers, parse(settings, numWorkers), parseElastic(settings));
    ExecutionConfig config = env.getConfig();
    Map<String, String> params = new HashMap<>(config.getGlobalJobParameters().toMap());
    params.putAll(run.toJobParameters());
    config.setGlobalJobParameters(new Parameters(params));
  }

  /**
   * {@code env.execute(jobName)}, with a clear error when Warren cancelled the job (its workers
   * could not all start).
   *
   * @param env the environment
   * @param jobName the job's name
   * @return the job's result
   * @throws WarrenFlinkException if Warren cancelled the job (the cause is Flink's exception)
   * @throws Exception what {@code env.execute} throws otherwise
   */
  public static JobExecutionResult execute(StreamExecutionEnvironment env, String jobName) throws Exception {
    try {
      return env.execute(jobName);
    } catch (Exception e) {
      for (JobListener l : env.getJobListeners()) {
        if (l instanceof RunListener r && r.failure() != null) {
          throw new WarrenFlinkException(r.failure(), e);
        }
      }
      throw e;
    }
  }

  private static RunnerSettings parse(Map<String, String> settings, int numWorkers) {
    if (numWorkers < 1) {
      throw new IllegalArgumentException("numWorkers must be at least 1, got " + numWorkers);
    }
    Map<String, String> raw = RunnerSettings.stripped(settings, PREFIX);
    raw.putIfAbsent(RunnerSettings.RENDEZVOUS_TIMEOUT.name(), Double.toString(DEFAULT_RENDEZVOUS_S));
    // The parameter-server settings are checked too (an unknown or bad one fails), then left out.
    parsePs(settings);
    parseElastic(settings);
    raw.keySet().removeIf(k -> PsSettings.owns(k) || ELASTIC_SETTINGS.owns(k));
    try {
      return RunnerSettings.parse(raw, PREFIX);
    } catch (RunnerException e) {
      throw new WarrenFlinkException(e.getMessage(), null);
    }
  }

  private static ElasticSettings parseElastic(Map<String, String> settings) {
    Map<String, String> raw = RunnerSettings.stripped(settings, PREFIX);
    raw.keySet().removeIf(k -> !ELASTIC_SETTINGS.owns(k));
    try {
      return ElasticSettings.parse(raw, PREFIX, ELASTIC_SETTINGS);
    } catch (RunnerException e) {
      throw new WarrenFlinkException(e.getMessage(), null);
    }
  }

  private static PsSettings parsePs(Map<String, String> settings) {
    Map<String, String> raw = RunnerSettings.stripped(settings, PREFIX);
    raw.keySet().removeIf(k -> !PsSettings.owns(k));
    try {
      return PsSettings.parse(raw, PREFIX, PS_SETTINGS, List.of());
    } catch (RunnerException e) {
      throw new WarrenFlinkException(e.getMessage(), null);
    }
  }

  /** Checks the environment, starts the trackers and registers the run's job listener. */
  private static RunConfig start(
      StreamExecutionEnvironment env, int numWorkers, RunnerSettings s, ElasticSettings elastic) {
    ReadableConfig conf = env.getConfiguration();
    checkMode(conf);
    int startWith =
        elastic.enabled()
            ? Slots.startingWorkers(conf, numWorkers, elastic.minWorkers(), s.slotWaitTimeout())
            : checkSlots(conf, numWorkers, s.slotWaitTimeout());
    String connect = s.workerSettings().get(RunnerSettings.CONNECT_TIMEOUT.worker());
    Heartbeats.log(
        conf,
        s.trackerPeerTimeout(),
        connect == null ? null : Duration.ofMillis((long) (Double.parseDouble(connect) * 1000)));
    boolean failAll = s.recovery() == Recovery.FAIL_ALL;
    int attempts = failAll ? failAllAttempts(conf) : 1;
    JobPlan plan = plan(s, startWith, numWorkers, attempts, elastic, engine(conf));
    env.registerJobListener(new RunListener(plan, startWith));
    String label = Long.toString(RUNS.incrementAndGet());
    return new RunConfig(
        numWorkers,
        failAll,
        plan.workerSettings(),
        label,
        s.progressInterval(),
        plan.remoteDir().orElse(null),
        plan.durableEvery(),
        // Only a remote directory loads RemoteCheckpoints, the one class that touches Hadoop's.
        plan.remoteDir().isPresent() ? RemoteCheckpoints.hadoopSettings(conf) : Map.of());
  }

  /** STREAMING mode, no speculative execution, and (where the client can ask) enough free slots. */
  private static void checkEnvironment(ReadableConfig conf, int numWorkers, double slotWaitTimeout) {
    checkMode(conf);
    checkSlots(conf, numWorkers, slotWaitTimeout);
  }

  /** A free slot per worker where the client can ask ({@link Slots#check}). */
  private static int checkSlots(ReadableConfig conf, int numWorkers, double slotWaitTimeout) {
    Slots.check(conf, numWorkers, slotWaitTimeout);
    return numWorkers;
  }

  /** STREAMING mode, Flink's default scheduler, no speculative execution. */
  private static void checkMode(ReadableConfig conf) {
    RuntimeExecutionMode mode = conf.get(ExecutionOptions.RUNTIME_MODE);
    if (mode != RuntimeExecutionMode.STREAMING) {
      throw new WarrenFlinkException(
          "Warren needs execution.runtime-mode STREAMING (it is "
              + mode
              + "): Flink then deploys every worker at once, while BATCH may run them in turns,"
              + " and they wait for each other",
          null);
    }
    boolean speculative =
        conf.get(ConfigOptions.key("execution.batch.speculative.enabled").booleanType().defaultValue(false));
    if (speculative) {
      throw new WarrenFlinkException(
          "Warren needs execution.batch.speculative.enabled=false: a speculative copy of a worker"
              + " would register the same task id and hold a slot while the original runs",
          null);
    }
    String scheduler = conf.get(ConfigOptions.key("jobmanager.scheduler").stringType().defaultValue(""));
    String schedulerMode = conf.get(ConfigOptions.key("scheduler-mode").stringType().defaultValue(""));
    if (scheduler.equalsIgnoreCase("adaptive") || schedulerMode.equalsIgnoreCase("reactive")) {
      throw new WarrenFlinkException(
          "Warren needs Flink's default scheduler, but the job's configuration sets "
              + (scheduler.equalsIgnoreCase("adaptive") ? "jobmanager.scheduler: adaptive" : "scheduler-mode: reactive")
              + ": the adaptive scheduler may run fewer worker subtasks than numWorkers and restarts"
              + " every subtask on a failure. Remove the setting (warren.elastic=true starts with"
              + " the free slots and lets the others join later)",
          null);
    }
  }

  /**
   * What a Flink run's plan needs from Flink: fail-all's run directory, local ones created here
   * on the client, remote ones with the Hadoop settings of the job's configuration.
   */
  private static JobPlan.Engine engine(ReadableConfig conf) {
    return new JobPlan.Engine(
        PREFIX,
        "a directory every TaskManager can read and write (a local path of a shared file system, or"
            + " a Hadoop file system URI such as hdfs://namenode:8020/dir), where each worker's"
            + " durable checkpoints go",
        "the client and every TaskManager",
        "flink",
        (setting, dir) -> {
          if (!dir.mkdirs()) {
            throw new RunnerException(
                PREFIX + "checkpointDir=" + setting + ": cannot create the run directory " + dir, null);
          }
        },
        (e, setting, dir, timeoutS) -> RemoteCheckpoints.create(e, setting, dir, timeoutS, conf),
        "127.0.0.1");
  }

  /**
   * Checks the run's settings against its shape, then starts its plan, whose first view has
   * {@code startWith} of the {@code numWorkers} workers (fewer only for an elastic run).
   */
  private static JobPlan plan(
      RunnerSettings s, int startWith, int numWorkers, int attempts, ElasticSettings elastic, JobPlan.Engine engine) {
    try {
      JobPlan.check(s, numWorkers, elastic.enabled(), elastic.minWorkers(), engine);
      return JobPlan.start(s, startWith, attempts, elastic.limits(numWorkers), engine);
    } catch (RunnerException e) {
      throw new WarrenFlinkException(e.getMessage(), e.getCause());
    } catch (NoClassDefFoundError e) {
      // Only a remote checkpoint directory loads Hadoop's classes.
      throw new WarrenFlinkException(
          PREFIX
              + "checkpointDir="
              + s.checkpointDir().orElse("")
              + " is on a Hadoop file system, but Hadoop's classes are not on the class path:"
              + " put hadoop-client-api and hadoop-client-runtime (or HADOOP_CLASSPATH) on the"
              + " client's and the TaskManagers' class path, or use a local path of a shared file"
              + " system",
          e);
    }
  }

  /** An elastic run's limits (retry-one, {@code minWorkers}), before anything starts. */
  private static void checkPlan(RunnerSettings s, int numWorkers, ElasticSettings elastic, JobPlan.Engine engine) {
    try {
      JobPlan.check(s, numWorkers, elastic.enabled(), elastic.minWorkers(), engine);
    } catch (RunnerException e) {
      throw new WarrenFlinkException(e.getMessage(), e.getCause());
    }
  }

  /** Fail-all's attempts: Flink's fixed-delay restarts + 1 if the job's configuration says. */
  private static int failAllAttempts(ReadableConfig conf) {
    String type = conf.get(ConfigOptions.key("restart-strategy.type").stringType().defaultValue(""));
    if (type.toLowerCase(Locale.ROOT).replace("-", "").startsWith("fixeddelay")) {
      int restarts =
          conf.get(ConfigOptions.key("restart-strategy.fixed-delay.attempts").intType().defaultValue(1));
      return Math.min(1000, Math.max(1, restarts + 1));
    }
    return DEFAULT_FAIL_ALL_ATTEMPTS;
  }

  /** Global job parameters as a map. */
  private static final class Parameters extends ExecutionConfig.GlobalJobParameters {
    private static final long serialVersionUID = 1L;
    private final HashMap<String, String> map;

    Parameters(Map<String, String> map) {
      this.map = new HashMap<>(map);
    }

    @Override
    public Map<String, String> toMap() {
      return map;
    }
  }
}
