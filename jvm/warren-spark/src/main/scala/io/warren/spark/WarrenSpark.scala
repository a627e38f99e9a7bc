package io.warren.spark

import java.security.SecureRandom
import java.time.Duration

import scala.jdk.CollectionConverters._
import scala.reflect.ClassTag
import scala.util.control.NonFatal

import io.warren.{Communicator, Tracker}
import org.apache.spark.{SparkContext, SparkException, TaskContext, WarrenSlots}
import org.apache.spark.rdd.RDD

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
  * ==Retry-one recovery==
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
  * ==Requirements==
  *  - All `numWorkers` tasks must run at once: the driver checks the free task slots first and
  *    fails with a [[WarrenSparkException]] before starting any task if there are fewer.
  *  - `spark.speculation` must be off: a speculative copy of a live task would register the
  *    same task id (the tracker answers "retry later", so it could never take over, but it
  *    would hold a slot and retry until the original ends). The runner refuses it.
  *  - Partitions: an RDD with more partitions is coalesced (no shuffle, order kept); one with
  *    fewer is repartitioned, a shuffle whose row order can differ between task attempts (then
  *    sort the rows in `f` if bit-identical recovery matters).
  *
  * ==Settings (`spark.warren.*` in the Spark conf, or in `conf` with or without the prefix)==
  * | key | default | meaning |
  * |---|---|---|
  * | `spark.warren.timeout` | 1800 | seconds one collective call may take (`WARREN_TIMEOUT_S`) |
  * | `spark.warren.connectTimeout` | 300 | seconds to join and re-link (`WARREN_CONNECT_TIMEOUT_S`) |
  * | `spark.warren.bootstrapCache` | false | keep bootstrap results for the whole job (`WARREN_BOOTSTRAP_CACHE`) |
  * | `spark.warren.localReplicas` | 2 | ring successors keeping each local model (`WARREN_LOCAL_REPLICAS`) |
  * | `spark.warren.trackerHost` | `spark.driver.host` | address the tracker binds and advertises |
  * | `spark.warren.rendezvousTimeout` | 600 | seconds all workers have to arrive |
  * | `spark.warren.slotWaitTimeout` | 0 | seconds to wait for enough free slots (executors registering) before failing |
  * | `spark.warren.progressInterval` | 10 | seconds between rank 0's progress lines in the driver log (0: none) |
  * | `spark.warren.setting.WARREN_X` | | passed to every worker as `WARREN_X` |
  *
  * ==Observability==
  * While the job runs, rank 0 sends a progress line every `progressInterval` seconds (and one
  * when it finishes) to the driver's log (logger `io.warren.native.warren.tracker.server`,
  * INFO): checkpoint version, recoveries, latency percentiles of each collective (see
  * `Progress`). The Spark UI's stage page shows the `warren.recoveries` accumulator (re-run
  * tasks that recovered from their peers), and a [[WarrenListener]] logs each failed and
  * re-run task of the job.
  */
object WarrenSpark {

  /** Prefix of the Spark settings read by [[train]]. */
  val ConfPrefix = "spark.warren."

  private val WorkerKeys = Map(
    "timeout" -> "WARREN_TIMEOUT_S",
    "connectTimeout" -> "WARREN_CONNECT_TIMEOUT_S",
    "localReplicas" -> "WARREN_LOCAL_REPLICAS"
  )

  /** Runs `f` in `numWorkers` Spark tasks, one per partition of `rdd` (coalesced or
    * repartitioned to `numWorkers`), each with a [[io.warren.Communicator]] joined to a tracker
    * this driver starts and stops.
    *
    * @param rdd the data; task `i` gets partition `i`
    * @param numWorkers the number of workers (tasks that must run together)
    * @param conf `spark.warren.*` settings overriding the Spark conf (the prefix is optional)
    * @param f the worker body: the communicator (do not close it) and the partition's rows
    * @return each worker's result, in task-id (= rank) order
    * @throws WarrenSparkException if there are too few free task slots, speculation is on, or
    *   a worker failed beyond Spark's retries
    */
  def train[T: ClassTag, R: ClassTag](rdd: RDD[T], numWorkers: Int, conf: Map[String, String] = Map.empty)(
      f: (Communicator, Iterator[T]) => R
  ): Seq[R] = {
    require(numWorkers >= 1, s"numWorkers must be at least 1, got $numWorkers")
    val sc = rdd.sparkContext
    val settings = merged(sc, conf)
    if (sc.getConf.getBoolean("spark.speculation", defaultValue = false)) {
      throw new WarrenSparkException(
        "Warren needs spark.speculation=false: a speculative copy of a worker task would " +
          "register the same task id and hold a slot while the original runs",
        null
      )
    }
    checkSlots(sc, numWorkers, settings.get("slotWaitTimeout").map(_.toDouble).getOrElse(0.0))
    val input =
      if (rdd.getNumPartitions == numWorkers) rdd
      else if (rdd.getNumPartitions > numWorkers) rdd.coalesce(numWorkers, shuffle = false)
      else rdd.repartition(numWorkers)
    val host = settings.getOrElse("trackerHost", sc.getConf.get("spark.driver.host", "127.0.0.1"))
    val rendezvous = Duration.ofSeconds(settings.get("rendezvousTimeout").map(_.toLong).getOrElse(600L))
    val tracker = Tracker.start(numWorkers, newSecret(), host, 0, rendezvous)
    try {
      val base = workerSettings(tracker, settings)
      val results = Observation.around(sc, numWorkers, settings) { probe =>
        input
          .mapPartitions(rows => Iterator.single(runWorker(base, rows, probe.wrap(f))), preservesPartitioning = false)
          .collect()
      }
      results.toSeq
    } catch {
      case e: SparkException =>
        throw new WarrenSparkException(s"Warren job of $numWorkers workers failed: ${rootMessage(e)}", e)
    } finally {
      tracker.close()
    }
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

  private def checkSlots(sc: SparkContext, n: Int, waitS: Double): Unit = {
    def free(): (Int, Int) = {
      val total = WarrenSlots.maxConcurrentTasks(sc)
      val busy = sc.statusTracker.getExecutorInfos.map(_.numRunningTasks).sum
      (total - busy, total)
    }
    val until = System.nanoTime() + (waitS * 1e9).toLong
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

  private def merged(sc: SparkContext, conf: Map[String, String]): Map[String, String] = {
    val fromSpark = sc.getConf.getAllWithPrefix(ConfPrefix).toMap
    fromSpark ++ conf.map { case (k, v) => k.stripPrefix(ConfPrefix) -> v }
  }

  private def workerSettings(tracker: Tracker, s: Map[String, String]): Map[String, String] = {
    val base = tracker.workerSettings().asScala.toMap - "WARREN_TASK_ID"
    val mapped = WorkerKeys.flatMap { case (k, env) => s.get(k).map(env -> _) }
    val cache = s.get("bootstrapCache").map(v => "WARREN_BOOTSTRAP_CACHE" -> (if (v.toBoolean) "1" else "0"))
    val raw = s.collect { case (k, v) if k.startsWith("setting.") => k.stripPrefix("setting.") -> v }
    base ++ mapped ++ cache ++ raw
  }

  /** The body of one task: join, run, close on success, abort on failure. */
  private def runWorker[T, R](base: Map[String, String], rows: Iterator[T], f: (Communicator, Iterator[T]) => R): R = {
    val ctx = TaskContext.get()
    val settings = base ++ Map(
      "WARREN_TASK_ID" -> ctx.partitionId().toString,
      "WARREN_ATTEMPT" -> ctx.attemptNumber().toString
    )
    val comm = Communicator.create(settings.asJava)
    try {
      val r = f(comm, rows)
      comm.close()
      r
    } catch {
      case t: Throwable =>
        try comm.abort()
        catch { case NonFatal(e) => t.addSuppressed(e) }
        throw t
    }
  }

  private def newSecret(): String = {
    val b = new Array[Byte](24)
    new SecureRandom().nextBytes(b)
    b.map(x => f"$x%02x").mkString
  }

  private def rootMessage(e: Throwable): String = {
    var c = e
    while (c.getCause != null && c.getCause != c) c = c.getCause
    val first = Option(e.getMessage).getOrElse(e.toString).linesIterator.nextOption().getOrElse("")
    if (c eq e) first else s"$first (cause: $c)"
  }
}
