package io.warren.spark

import java.util.UUID

import scala.jdk.CollectionConverters._
import scala.jdk.OptionConverters._
import scala.reflect.ClassTag
import scala.util.control.NonFatal

import io.warren.{Communicator, NativeLog, TaskLeftException, TlsSettings, Tracker}
import io.warren.ps.PsClient
import io.warren.runner.{HadoopCheckpoints, JobPlan, PsTrainers, RunnerException, WorkerRun}
import org.apache.hadoop.conf.Configuration
import org.apache.spark.{HashPartitioner, SerializableWritable, SparkContext, SparkException, TaskContext, WarrenSlots}
import org.apache.spark.broadcast.Broadcast
import org.apache.spark.rdd.RDD
import org.slf4j.LoggerFactory

/** A Warren job failed: the message names the first worker error Spark reported.
  *
  * @param message what failed
  * @param cause the Spark exception (its cause chain holds the worker's exception)
  */
class WarrenSparkException(message: String, cause: Throwable) extends RuntimeException(message, cause)

/** Runs a Warren job as one Spark stage: one task per worker, each with its own
  * [[io.warren.Communicator]].
  *
  * {{{
  * val weights: Seq[Array[Double]] = WarrenSpark.train(points, numWorkers = 3) { (comm, rows) =>
  *   val data = rows.toArray
  *   val ckpt = comm.loadCheckpoint()            // after a failure: the last checkpoint
  *   var w = if (ckpt.version == 0) init() else decode(ckpt.global)
  *   for (it <- ckpt.version until iters) {
  *     val g = gradient(data, w); comm.allreduce(g, Op.SUM); w = step(w, g)
  *     comm.checkpoint(encode(w), null)
  *   }
  *   w
  * }
  * }}}
  *
  * ==Retry-one recovery (the default)==
  * The stage is a normal (non-barrier) one, so Spark re-runs only a failed task: a thrown
  * exception is retried on the same executor within ~0.1 s, a lost executor's task on a new
  * executor ~5 s later. The new attempt joins with the same task id (the partition id) and
  * `WARREN_ATTEMPT` = its attempt number; the other tasks wait inside their current
  * collective call, serve it the last checkpoint and the results it replays, and the job goes
  * on. The result is bit-identical to a run without failures if `f` is deterministic given
  * its partition's rows in their order. A task that throws aborts its communicator
  * (`Communicator.abort`, never `close`, which would tell the tracker the worker finished and
  * make it refuse the replacement).
  *
  * ==Fail-all recovery (`spark.warren.recovery=fail-all`)==
  * The workers run as a barrier stage (Spark launches all of them together or none) whose
  * results reach the driver through a one-partition shuffle: Spark 4.3 re-runs a failed
  * barrier stage only when it is a ShuffleMapStage (a failed barrier ResultStage aborts the
  * job, "Could not recover from a failed barrier ResultStage"). When any worker fails, Spark
  * kills the others and re-runs every task (up to `spark.stage.maxConsecutiveAttempts`,
  * default 4, stage attempts; `spark.task.maxFailures` does not apply); each new worker loads
  * the newest checkpoint that every rank wrote to `spark.warren.checkpointDir` and the job goes
  * on from there, bit-identical to a run without failures. Each stage attempt joins its own
  * tracker (started with the job: a tracker keeps the finished and lost state of every task id,
  * so a whole new set of workers could not join the previous attempt's); when a task of an
  * attempt fails the driver closes that attempt's tracker, so the surviving tasks, blocked
  * waiting for a replacement, fail at once and free their slots for the re-run. A re-run starts
  * only when all `numWorkers` slots are free again, so after a lost executor it waits for the
  * replacement executor to register. Every checkpoint is
  * written (fsync'd) to disk, or uploaded, by every worker (`spark.warren.durableEvery`), so
  * fail-all pays that on every iteration and the re-run of all tasks after a failure; retry-one
  * pays neither.
  *
  * The checkpoint directory is any path Hadoop's `FileSystem` supports. A local path or `file:`
  * URI is written by the native library itself (POSIX file I/O, fsync'd), so it must be
  * visible at the same path to every executor: on a cluster of several machines, a shared file
  * system (NFS, say). Any other scheme (`hdfs:`, `s3a:`, `viewfs:`, ...) goes through Hadoop
  * with the driver's Hadoop configuration (`sc.hadoopConfiguration`, shipped to the tasks):
  * each task points the native library at a local staging directory (under the executor's
  * local directory, removed when the task ends), downloads its rank's two newest durable
  * checkpoints into it before the worker loads one, and uploads each new durable checkpoint
  * from it in the communicator's checkpoint listener, synchronously, before the worker goes on
  * (see warren-runner's `HadoopCheckpoints` for why that keeps every rank's resume point available). The
  * driver creates the run's directory before starting any task and fails with a
  * [[WarrenSparkException]] naming it and the cause if it cannot (within
  * `spark.warren.checkpointDirTimeout` seconds, default 60; its Hadoop client retries little,
  * so a namenode that refuses connections is reported at once). Each `train` call writes to a new
  * subdirectory of the directory, removed when `train` returns.
  *
  * ==Elastic membership (`spark.warren.elastic=true`, retry-one only)==
  * A lost executor does not stall the others while Spark starts a new executor JVM (2-4 s):
  * when a worker's connection drops and its re-run task has not registered within
  * `spark.warren.rejoinTimeout` seconds (default 1; a thrown task is re-run on its live
  * executor well within it, and recovers as under retry-one), the tracker drops it from the
  * view. Every survivor's current call then throws `io.warren.RolledBackException`: the body
  * loads the checkpoint (`comm.loadCheckpoint()`, whose version is the newest one the
  * survivors committed) and goes on from its version with one worker fewer (`comm.rank()` and
  * `comm.worldSize()` change). When Spark runs the re-run task, it registers again and joins
  * at the next checkpoint boundary like a restarted worker: its `loadCheckpoint()` returns the
  * global model from its peers. Never below `spark.warren.minWorkers` (default 1): the job
  * then fails naming the missing tasks.
  *
  * '''Data.''' Task `i` always reads partition `i`. While task `i` is out of the view its
  * partition is read by nobody: it is skipped until the task rejoins (the example's gradient
  * is then the mean over the members' rows only, as the allreduced row count says). Nothing
  * moves partitions between tasks.
  *
  * '''Starting with fewer slots.''' If fewer than `numWorkers` task slots are free (after
  * `spark.warren.slotWaitTimeout`), the job starts with the free ones if there are at least
  * `minWorkers`: the first tasks to register make the first view, the driver then admits the
  * others, and each joins at the first checkpoint boundary after Spark runs it (a slot frees
  * up, dynamic allocation adds an executor).
  *
  * '''View changes.''' A worker learns of each change from `comm.takeViewChange()` (after the
  * checkpoint at which a task joined or was removed, and after `RolledBackException`): the old
  * and new members and its old and new rank, to re-shard or rescale. A worker removed from
  * the job (`Tracker.removeWorker` from `onTracker`) sees `left()`: its body returns, making no
  * more collective calls. Should its executor die after it left, Spark re-runs its task,
  * which is told it is not a member any more and ends at once with no result (not a failure).
  *
  * '''The end.''' The job is over when every member of the view has returned; a task
  * that is not a member then (a re-run task still waiting for its new executor) is cancelled,
  * and `train` returns the members' results.
  *
  * '''Determinism.''' The model depends on the membership schedule (which tasks are in
  * the view at each checkpoint version): a worker dropped at version `v` and back at `w` gives
  * the same model, bit for bit, on every run with that schedule (`ElasticClusterTest`); when
  * the re-run task comes back depends on Spark, so two runs with the same failure may differ.
  *
  * ==Paused, frozen and cut-off workers==
  * Workers send heartbeats to the tracker on the driver from a native thread (a garbage
  * collection does not stop it). One silent for `spark.warren.peerTimeout` seconds (default
  * 30) is fenced: the others go on without it, waiting for its replacement, and anything it
  * sends later is refused. The driver then kills its task attempt (`killTaskAttempt`) so that
  * Spark runs it again; an executor that does not end the attempt within 5 s (a paused or
  * frozen JVM cannot, nor one on a host that is gone or cut off) is killed, replaced
  * (`killAndReplaceExecutor`) and removed from the scheduler, and the task runs again
  * elsewhere: well before Spark's own executor heartbeat timeout (120 s) would.
  *
  * ==Requirements==
  *  - All `numWorkers` tasks must run at once: the driver checks the free task slots first and
  *    fails with a [[WarrenSparkException]] before starting any task if there are fewer.
  *  - `spark.speculation` must be off; the runner refuses it. A speculative copy of a live
  *    task would register the same task id, which the tracker refuses while the original is
  *    alive ("retry later"), so it cannot corrupt the job; but it would hold a task slot
  *    retrying until `spark.warren.connectTimeout` and then fail (or be killed when the
  *    original ends): a wasted slot and a spurious failure for no gain, since a Warren worker
  *    that is merely slow holds every other worker back and a copy started from scratch cannot
  *    catch up with it.
  *  - Dynamic allocation: fail-all is refused with it (Spark does not run barrier stages with
  *    `spark.dynamicAllocation.enabled=true`). Under retry-one it works with care: executors
  *    running a Warren task are never idle, so they are not removed while their task waits in a
  *    collective call; but the slot check only counts executors already registered, and Spark
  *    requests executors only for pending tasks, so keep `spark.dynamicAllocation.minExecutors`
  *    (or `initialExecutors`) large enough for `numWorkers` tasks, and expect a lost executor's
  *    task to wait for a new executor to be granted, within `spark.warren.connectTimeout`, while
  *    the other workers wait in their collective call. An elastic job needs neither: it starts
  *    on the executors there are (at least `minWorkers` free slots), its pending tasks make
  *    Spark request more executors, and each joins when Spark runs it
  *    (`ElasticDynamicAllocationTest`); a lost executor's task rejoins when its new executor
  *    is granted, the others going on meanwhile.
  *  - Partitions: an RDD with more partitions is coalesced (no shuffle, order kept; fail-all
  *    repartitions, since a barrier stage may not coalesce); one with fewer is repartitioned, a
  *    shuffle whose row order can differ between task attempts (then sort the rows in `f` if
  *    bit-identical recovery matters).
  *
  * ==Settings (`spark.warren.*` in the Spark conf, or in `conf` with or without the prefix)==
  * Declared, with their types, accepted values, defaults and doc lines, in [[WarrenSettings]]
  * (the table in docs/spark.md is rendered from it). [[train]] parses and validates them all
  * on the driver before anything starts: an invalid value or an unknown `spark.warren.*` key
  * fails with a [[WarrenSparkException]] naming the setting, the value and what it accepts
  * (`spark.warren.timeout = "ten": expected a number of seconds > 0 and <= 86400`).
  *
  * ==Observability==
  * While the job runs, rank 0 sends a progress line every `progressInterval` seconds (and one
  * when it finishes) to the driver's log (logger `io.warren.native.warren.tracker.server`,
  * INFO): checkpoint version, recoveries, latency percentiles of each collective (see
  * `Progress`). The Spark UI has a Warren tab (`/warren/`: each job's state, checkpoint
  * version, re-run tasks and task attempts, the versions of running tasks following the
  * executors' heartbeats), the job's description names it (`warren job 3: 4 workers,
  * retry-one`), the stage page shows the `warren.recoveries` accumulator (re-run tasks that
  * recovered from their peers) and `warren.checkpointVersion` (the highest checkpoint version
  * its tasks reached), and a [[WarrenListener]] logs each failed and re-run task of the job.
  */
object WarrenSpark {

  /** Prefix of the Spark settings read by [[train]]. */
  val ConfPrefix: String = WarrenSettings.Prefix

  /** Runs `f` in `numWorkers` Spark tasks, one per partition of `rdd` (coalesced or
    * repartitioned to `numWorkers`), each with a [[io.warren.Communicator]] joined to a tracker
    * this driver starts and stops.
    *
    * @param rdd the data; task `i` gets partition `i`
    * @param numWorkers the number of workers (tasks that must run together)
    * @param conf `spark.warren.*` settings overriding the Spark conf (the prefix is optional)
    * @param onTracker called on the driver once the tracker runs, before any task starts (to
    *   watch an elastic job's members with `Tracker.list`, or schedule a change with
    *   `Tracker.restart`/`addWorker`/`removeWorker`; fail-all: the first attempt's tracker)
    * @param f the worker body: the communicator (do not close it) and the partition's rows
    * @return each worker's result, in task-id (= rank) order; elastic jobs: the results of the
    *   members of the final view, in task-id order (a worker dropped and not back by the end
    *   has none)
    * @throws WarrenSparkException if there are too few free task slots, speculation is on, a
    *   setting is invalid, the fail-all checkpoint directory cannot be created, or a worker
    *   failed beyond Spark's retries (the message names the failed task ids)
    */
  def train[T: ClassTag, R: ClassTag](
      rdd: RDD[T],
      numWorkers: Int,
      conf: Map[String, String] = Map.empty,
      onTracker: Tracker => Unit = _ => ()
  )(
      f: (Communicator, Iterator[T]) => R
  ): Seq[R] = {
    require(numWorkers >= 1, s"numWorkers must be at least 1, got $numWorkers")
    val sc = rdd.sparkContext
    // Every setting is parsed and checked here, before anything starts.
    val settings = WarrenSettings.parse(merged(sc, conf))
    val recovery = settings.recovery
    if (sc.getConf.getBoolean("spark.speculation", defaultValue = false)) {
      throw new WarrenSparkException(
        "Warren needs spark.speculation=false: a speculative copy of a worker task would " +
          "register the same task id and hold a slot while the original runs",
        null
      )
    }
    if (recovery == Recovery.FailAll && sc.getConf.getBoolean("spark.dynamicAllocation.enabled", false)) {
      throw new WarrenSparkException(
        "spark.warren.recovery=fail-all runs a barrier stage, which Spark does not run with " +
          "spark.dynamicAllocation.enabled=true: disable dynamic allocation or use retry-one",
        null
      )
    }
    val failAll = recovery == Recovery.FailAll
    val elastic = settings.elastic
    val runner = settings.runner
    val engine = jobEngine(sc)
    asSpark(JobPlan.check(runner, numWorkers, elastic.enabled, elastic.minWorkers, engine))
    val startWith =
      if (elastic.enabled) ElasticRun.startingWorkers(sc, numWorkers, elastic.minWorkers, settings.slotWaitTimeout)
      else {
        checkSlots(sc, numWorkers, settings.slotWaitTimeout)
        numWorkers
      }
    val input =
      if (rdd.getNumPartitions == numWorkers) rdd
      // A barrier stage may not coalesce (Spark refuses the RDD chain): fail-all shuffles.
      else if (rdd.getNumPartitions > numWorkers && recovery == Recovery.RetryOne) {
        rdd.coalesce(numWorkers, shuffle = false)
      } else rdd.repartition(numWorkers)
    // Fail-all: one tracker per attempt of the barrier stage (a tracker keeps ranks and the
    // finished/lost state of the task ids, so a whole new set of workers cannot join the
    // previous attempt's). They start now because a task can only learn an address from its
    // closure; the later ones' rendezvous is bounded by the workers' connectTimeout instead.
    val attempts =
      if (recovery == Recovery.FailAll) sc.getConf.getInt("spark.stage.maxConsecutiveAttempts", 4).max(1) else 1
    var plan: JobPlan = null
    // Elastic: the cancelled tasks that were not needed, still ending (see ElasticRun.closeAfter).
    var lingering: Option[org.apache.spark.FutureAction[_]] = None
    var hadoopConf: Option[Broadcast[SerializableWritable[Configuration]]] = None
    var echo: AutoCloseable = null
    try {
      val limits =
        if (elastic.enabled) new Tracker.Elastic(elastic.minWorkers, numWorkers, elastic.rejoinTimeout, true) else null
      echo = consoleEcho(sc)
      // The run's checkpoint directory (a remote one created now through Hadoop's FileSystem:
      // a clear error, before any task starts, if it cannot be), then the trackers.
      plan = asSpark(JobPlan.start(runner, startWith, attempts, limits, engine))
      val trackers = plan.trackers
      // A remote checkpoint directory: the driver's Hadoop configuration is shipped to the
      // tasks, which stage their checkpoints locally and copy them over.
      val remote = plan.remoteDir.toScala.map { dir =>
        hadoopConf = Some(sc.broadcast(new SerializableWritable(sc.hadoopConfiguration)))
        RemoteCheckpoints(dir, hadoopConf.get, plan.durableEvery)
      }
      onTracker(trackers.tracker(0))
      val bases = plan.workerSettings.asScala.map(_.asScala.toMap).toArray
      val mode = if (elastic.enabled) s"${recovery.name}, elastic" else recovery.name
      Observation.around(sc, numWorkers, settings.progressInterval, mode) { probe =>
        val workers = {
          val body = (rows: Iterator[T]) => runWorker(bases, failAll, remote, rows, probe, probe.wrap(f)).iterator
          if (failAll) input.barrier().mapPartitions(body) else input.mapPartitions(body)
        }
        val watch = new JobWatch(
          UUID.randomUUID().toString,
          workers.id,
          failAll = failAll,
          attempt => if (failAll) trackers.closeAttempt(attempt),
          (stage, why) => sc.cancelStage(stage, s"a Warren worker failed with an error that cannot succeed on retry: $why")
        )
        // A worker the tracker fenced (paused, frozen, cut off): its attempt is killed and re-run.
        val fences = new FenceWatch(sc, trackers, watch)
        try {
          run(sc, watch, numWorkers, recovery) {
            // A failed barrier stage is re-run only if it feeds a shuffle (a failed barrier
            // ResultStage aborts the job): hand the results over through one.
            if (failAll) workers.partitionBy(new HashPartitioner(1)).collect()
            else if (elastic.enabled)
              ElasticRun.collect(sc, workers, trackers.tracker(0), numWorkers, job => lingering = Some(job))
            else workers.collect()
          }
        } finally fences.stop()
      }
    } finally {
      if (plan != null) {
        lingering match {
          case Some(job) => ElasticRun.closeAfter(job, plan.trackers, scala.concurrent.duration.Duration(60, "s"))
          case None      => plan.close()
        }
        plan.closeDirectory()
      }
      hadoopConf.foreach(b => try b.destroy() catch { case NonFatal(_) => })
      if (echo != null) echo.close()
    }
  }

  /** In an interactive shell (spark-shell and the notebook set `spark.ui.showConsoleProgress`),
    * whose console shows only warnings, the tracker's lines (workers arriving, recoveries, rank
    * 0's progress, the end) are echoed to the console for the job; null elsewhere, where they
    * are in the driver's log.
    */
  private def consoleEcho(sc: SparkContext): AutoCloseable =
    if (sc.getConf.getBoolean("spark.ui.showConsoleProgress", defaultValue = false)) NativeLog.echoTrackerToConsole()
    else null

  /** What a Spark job's run plan needs from Spark: the application id names the fail-all run
    * directory, which the native library creates on the executors (the driver may not see
    * their shared file system), and a remote one is created with the driver's Hadoop
    * configuration.
    */
  private def jobEngine(sc: SparkContext): JobPlan.Engine =
    new JobPlan.Engine(
      ConfPrefix,
      "a directory every executor can read and write (a local path of a shared file system, or any " +
        "Hadoop file system URI such as hdfs://namenode:8020/dir), where each worker's durable checkpoints go",
      "the driver and every executor",
      sc.applicationId,
      (_, _) => (),
      (e, setting, dir, timeoutS) =>
        HadoopCheckpoints.create(e.prefix, setting, dir, sc.hadoopConfiguration, timeoutS, e.reachableFrom),
      sc.getConf.get("spark.driver.host", "127.0.0.1")
    )

  /** `body`, with the runner's error as a [[WarrenSparkException]] of the same message. */
  private def asSpark[A](body: => A): A =
    try body
    catch { case e: RunnerException => throw new WarrenSparkException(e.getMessage, e.getCause) }

  /** Trains with parameter servers: starts `numServers` servers in this (the driver's) process,
    * then runs `f` in `numWorkers` Spark tasks, one per partition of `rdd` (coalesced or
    * repartitioned as for [[train]]), task `i` as trainer `i` with an [[io.warren.ps.PsClient]]
    * connected to every server. The body defines the job ([[io.warren.ps.PsClient#define]]; every
    * trainer defines the same one), pulls, pushes, and starts at `ps.step()`:
    *
    * {{{
    * val models = WarrenSpark.trainPS(rows, numWorkers = 4, numServers = 2) { (ps, part) =>
    *   val data = part.toArray
    *   ps.define(job)
    *   for (step <- ps.step() until steps) {          // a re-run task resumes where it was
    *     val w = ps.pullSparse("w", keys(data, step))
    *     ps.push(new PsGradients().sparse("w", keys(data, step), grad(data, step, w)))
    *   }
    *   ...
    * }
    * }}}
    *
    * A task that ends normally leaves the job (its trainer holds nobody back any more) and its
    * client is closed; one that throws aborts its client without leaving, so Spark's re-run of
    * it connects as the same trainer id and goes on at the step the servers have (sync: the
    * other trainers wait for it; async: they go on). A server [[PsServers.restart restarted]]
    * from its checkpoint (`spark.warren.ps.checkpointDir`) makes the trainers pause, then push
    * again what it lost (sync loses nothing). Settings: `spark.warren.ps.*` (see
    * [[PsSettings]]); `spark.speculation` must be off and all `numWorkers` tasks must fit at once
    * (checked as for [[train]]).
    *
    * @param rdd the data; trainer `i` gets partition `i`
    * @param numWorkers the number of trainers
    * @param numServers the number of parameter servers
    * @param conf `spark.warren.*` settings overriding the Spark conf (the prefix is optional)
    * @param onServers called on the driver once the servers run, before any task starts (to
    *   watch them, or restart one)
    * @param f the trainer body: the client (do not close it) and the partition's rows
    * @return each trainer's result, in trainer-id order
    * @throws WarrenSparkException if a setting is invalid, there are too few free task slots,
    *   speculation is on, or a trainer failed beyond Spark's retries
    */
  def trainPS[T: ClassTag, R: ClassTag](
      rdd: RDD[T],
      numWorkers: Int,
      numServers: Int,
      conf: Map[String, String] = Map.empty,
      onServers: PsServers => Unit = _ => ()
  )(f: (PsClient, Iterator[T]) => R): Seq[R] = {
    require(numWorkers >= 1, s"numWorkers must be at least 1, got $numWorkers")
    require(numServers >= 1, s"numServers must be at least 1, got $numServers")
    val sc = rdd.sparkContext
    val all = WarrenSettings.parse(merged(sc, conf))
    val settings = all.ps
    if (sc.getConf.getBoolean("spark.speculation", defaultValue = false)) {
      throw new WarrenSparkException(
        "Warren needs spark.speculation=false: a speculative copy of a trainer task would push as " +
          "the same trainer id",
        null
      )
    }
    checkSlots(sc, numWorkers, all.slotWaitTimeout)
    val input =
      if (rdd.getNumPartitions == numWorkers) rdd
      else if (rdd.getNumPartitions > numWorkers) rdd.coalesce(numWorkers, shuffle = false)
      else rdd.repartition(numWorkers)
    val host = settings.host.getOrElse(sc.getConf.get("spark.driver.host", "127.0.0.1"))
    val secret = UUID.randomUUID().toString
    val tls = all.tls // serializable, into the tasks' closure
    val servers = new PsServers(numServers, secret, settings, host, tls)
    try {
      onServers(servers)
      // serializable, into the tasks' closure: addresses, secret, timeouts, TLS
      val trainers = new PsTrainers(servers.uris.asJava, secret, settings.connectTimeout, settings.callTimeout, tls)
      val workers = input.mapPartitions { rows =>
        val id = TaskContext.get().partitionId()
        // ends normally: leaves the job; throws: aborts without leaving, for Spark's re-run
        Iterator.single((id, trainers.run[R](id, ps => f(ps, rows))))
      }
      val watch = new JobWatch(
        UUID.randomUUID().toString,
        workers.id,
        failAll = false,
        _ => (),
        (stage, why) => sc.cancelStage(stage, s"a Warren worker failed with an error that cannot succeed on retry: $why")
      )
      run(sc, watch, numWorkers, Recovery.RetryOne)(workers.collect())
    } finally servers.close()
  }

  /** The encryption in transit of jobs run with `conf` (`spark.warren.tls*`, or
    * `spark.warren.setting.WARREN_TLS*`, in the Spark conf or in `conf`): for endpoints the
    * application starts on the driver itself and whose clients run in the tasks, such as an
    * [[io.warren.Master]] (`Master.builder().tls(WarrenSpark.tlsSettings(sc))`; its
    * `workerSettings()` then carry the same settings to `MasterClient.connect`).
    *
    * @param sc the context
    * @param conf `spark.warren.*` settings overriding the Spark conf, as given to [[train]]
    * @return the settings (`TlsSettings.OFF` unless TLS is on)
    * @throws WarrenSparkException if a setting is invalid
    */
  def tlsSettings(sc: SparkContext, conf: Map[String, String] = Map.empty): TlsSettings =
    WarrenSettings.parse(merged(sc, conf)).tls

  /** Where a fail-all run with a remote checkpoint directory keeps its checkpoints, as the
    * tasks see it.
    *
    * @param dir the run's remote directory (a URI)
    * @param hadoopConf the driver's Hadoop configuration
    * @param durableEvery `spark.warren.durableEvery`
    */
  private case class RemoteCheckpoints(
      dir: String,
      hadoopConf: Broadcast[SerializableWritable[Configuration]],
      durableEvery: Int
  )

  /** Runs the workers' job with `watch` listening, and turns a failure into one clear error. A
    * killed task still joining the job (a re-run the tracker holds after an error that cannot
    * succeed on retry) sees the kill through [[io.warren.runner.KillWatch.whileJoining]].
    */
  private[spark] def run[R: ClassTag](sc: SparkContext, watch: JobWatch, numWorkers: Int, recovery: Recovery)(
      job: => Array[(Int, R)]
  ): Seq[R] = {
    sc.addSparkListener(watch)
    val previous = sc.getLocalProperty(JobWatch.RunKey)
    sc.setLocalProperty(JobWatch.RunKey, watch.runId)
    try job.sortBy(_._1).map(_._2).toSeq
    catch {
      case e: SparkException =>
        // The tasks Spark kills when a job fails end (and free their slots) a moment later:
        // wait for them, so that the next job finds the slots free.
        watch.awaitTasksEnded(sc, JobWatch.KilledTasksWaitMs)
        throw failure(sc, watch, numWorkers, recovery, e)
    } finally {
      sc.setLocalProperty(JobWatch.RunKey, previous)
      sc.removeSparkListener(watch)
    }
  }

  /** The error a failed run ends with: the failure that cannot succeed on retry, if a worker
    * had one; else the lost task ids and how often each failed, and Spark's root cause. */
  private def failure(sc: SparkContext, watch: JobWatch, numWorkers: Int, recovery: Recovery, e: SparkException) =
    watch.finalFailure match {
      case Some((task, why)) =>
        new WarrenSparkException(
          s"Warren job of $numWorkers workers (${recovery.name}) failed: task $task failed with an error that " +
            s"cannot succeed on retry, and the job was stopped: $why",
          e
        )
      case None =>
        WarrenSlots.drainListeners(sc, 2000)
        val failed = watch.failedTasks
        val lost =
          if (failed.isEmpty) ""
          else {
            val counts = failed.map { case (id, k) => s"task $id failed $k time${if (k == 1) "" else "s"}" }
            val limit = recovery match {
              case Recovery.RetryOne => s"spark.task.maxFailures=${sc.getConf.get("spark.task.maxFailures", "4")}"
              case Recovery.FailAll =>
                s"spark.stage.maxConsecutiveAttempts=${sc.getConf.get("spark.stage.maxConsecutiveAttempts", "4")}"
            }
            s": lost task id(s) ${failed.map(_._1).mkString(", ")} (${counts.mkString(", ")}; $limit)"
          }
        new WarrenSparkException(s"Warren job of $numWorkers workers (${recovery.name}) failed$lost: ${rootMessage(e)}", e)
    }

  /** Waits until `sc` has at least `n` task slots registered, up to `timeoutS` seconds (local
    * cluster executors register several seconds after the context starts).
    *
    * @param sc the context
    * @param n the slots wanted
    * @param timeoutS the most seconds to wait
    * @return the number of slots registered when it returned
    */
  def awaitSlots(sc: SparkContext, n: Int, timeoutS: Double): Int = {
    val until = System.nanoTime() + (timeoutS * 1e9).toLong
    var slots = WarrenSlots.maxConcurrentTasks(sc)
    while (slots < n && System.nanoTime() < until) {
      Thread.sleep(100)
      slots = WarrenSlots.maxConcurrentTasks(sc)
    }
    slots
  }

  /** The free task slots and all of them, as the driver sees them now. */
  private[spark] def freeSlots(sc: SparkContext): (Int, Int) = {
    val total = WarrenSlots.maxConcurrentTasks(sc)
    val busy = sc.statusTracker.getExecutorInfos.map(_.numRunningTasks).sum
    (total - busy, total)
  }

  private[spark] def checkSlots(sc: SparkContext, n: Int, waitS: Double): Unit = {
    def free(): (Int, Int) = freeSlots(sc)
    val until = System.nanoTime() + (waitS * 1e9).toLong
    // The running-task counts come from the listener bus: let it deliver the end of a job
    // that just finished, or its tasks still count as busy.
    WarrenSlots.drainListeners(sc, 2000)
    var (avail, total) = free()
    while (avail < n && System.nanoTime() < until) {
      Thread.sleep(100)
      val (a, t) = free()
      avail = a
      total = t
    }
    if (avail < n) {
      throw new WarrenSparkException(
        s"Warren needs $n task slots running at once but the cluster has $avail free " +
          s"(of $total): its workers wait for each other, so they cannot run in turns. Use " +
          s"fewer workers, more executors or cores, or spark.warren.slotWaitTimeout to wait " +
          "for executors that are still registering",
        null
      )
    }
  }

  private[spark] def merged(sc: SparkContext, conf: Map[String, String]): Map[String, String] = {
    val fromSpark = sc.getConf.getAllWithPrefix(ConfPrefix).toMap
    fromSpark ++ conf.map { case (k, v) => k.stripPrefix(ConfPrefix) -> v }
  }

  /** The body of one task: join (the tracker of this stage attempt in fail-all mode), run,
    * close on success, abort on failure. Returns the result with the task id.
    */
  private lazy val log = LoggerFactory.getLogger(getClass)

  private def runWorker[T, R](
      bases: Array[Map[String, String]],
      failAll: Boolean,
      remote: Option[RemoteCheckpoints],
      rows: Iterator[T],
      probe: TaskProbe,
      f: (Communicator, Iterator[T]) => R
  ): Option[(Int, R)] = {
    val ctx = TaskContext.get()
    val stageAttempt = ctx.stageAttemptNumber()
    val base = if (!failAll) bases(0) else if (stageAttempt < bases.length) bases(stageAttempt) else {
      throw new WarrenSparkException(
        s"stage attempt $stageAttempt has no tracker: the runner started ${bases.length} " +
          "(spark.stage.maxConsecutiveAttempts)",
        null
      )
    }
    val attempt = JobWatch.workerAttempt(failAll, stageAttempt, ctx.attemptNumber())
    // A remote checkpoint directory: the native library writes and reads a local staging
    // directory, which this task fills from the remote one and copies back after each durable
    // checkpoint (HadoopCheckpoints).
    val staging = remote.map { r =>
      val conf = r.hadoopConf.value.value
      new HadoopCheckpoints.Staging(r.dir, conf, r.durableEvery, new java.io.File(WarrenSlots.localDir()))
    }
    try {
      val settings = WorkerRun.taskSettings(base.asJava, ctx.partitionId().toString, attempt)
      staging.foreach(s => settings.put("WARREN_CHECKPOINT_DIR", s.local().toString))
      // A kill without an interrupt (cancelJobGroup without interruptOnCancel) aborts the calls.
      // Each commit is recorded for the driver's Warren tab, and a remote directory's durable
      // checkpoints are copied back.
      val setup: WorkerRun.Setup = comm => {
        staging.foreach(_.download(comm))
        comm.setCheckpointListener { version =>
          probe.checkpointed(version)
          staging.foreach(_.checkpointCommitted(version))
        }
      }
      val options = new WorkerRun.Options(() => ctx.isInterrupted(), probe.label, probe.progressIntervalS, setup)
      Some((ctx.partitionId(), WorkerRun.run[R](settings, options, comm => f(comm, rows))))
    } catch {
      // Elastic: a re-run of a task that was removed and has left (its executor died after
      // it left), or one removed before it could join: it has no result, and is no failure.
      case e: TaskLeftException =>
        log.info(s"Warren task ${ctx.partitionId()} is not a member of the elastic job: ${e.getMessage}")
        None
    } finally staging.foreach(_.close())
  }

  private def rootMessage(e: Throwable): String = {
    var c = e
    while (c.getCause != null && c.getCause != c) c = c.getCause
    val first = Option(e.getMessage).getOrElse(e.toString).linesIterator.take(1).toList.headOption.getOrElse("")
    if (c eq e) first else s"$first (cause: $c)"
  }
}
