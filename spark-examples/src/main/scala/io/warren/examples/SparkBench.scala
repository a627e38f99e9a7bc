package io.warren.examples

import java.nio.file.Files

import org.apache.spark.{SparkConf, SparkContext, Success, WarrenSlots}
import org.apache.spark.ml.classification.{LogisticRegression => MLlibLogisticRegression}
import org.apache.spark.ml.feature.LabeledPoint
import org.apache.spark.ml.linalg.Vectors
import org.apache.spark.scheduler.{SparkListener, SparkListenerTaskEnd, SparkListenerTaskStart}
import org.apache.spark.sql.SparkSession
import org.apache.spark.storage.StorageLevel

import io.warren.examples.data.LogisticData
import io.warren.spark.WarrenSpark

/** The Spark benchmark (`make bench-spark`, `bench/spark.sh`), in one spark-submit run on one
  * local-cluster:
  *
  *  - (a) time per iteration of the Warren logistic-regression example against Spark MLlib's
  *    `LogisticRegression` (L-BFGS, `tol = 0`, no regularization, no standardization) on the
  *    same rows (the example's generator), as the driver sees it: the marginal cost of an
  *    iteration, `(T(long) - T(short)) / (iterations(long) - iterations(short))`, which leaves
  *    out what does not grow with the iterations (Warren: generating the rows, rendezvous,
  *    bootstrap; MLlib: the statistics pass and set-up). Each timing is the median of
  *    `repeats` runs; MLlib reads a DataFrame cached (and counted) beforehand.
  *  - (b) the Warren stage's total time without failures and with one failure at iteration
  *    `killIter` under retry-one (and fail-all, with `--fail-all-dir DIR`), for two kinds of
  *    failure: task 1's executor JVM halted (`Runtime.halt`, the issue's case) and task 1
  *    throwing (its executor lives on). Each failure run also records how long Spark took from
  *    reporting the failure to launching the re-run task(s) (see [[RestartClock]]), so that the
  *    added time splits into Spark's part and the rest. Then the same under elastic membership
  *    (`spark.warren.elastic=true`, `minWorkers` = workers - 1): the others go on without the
  *    lost worker after the rejoin timeout (`--rejoin-timeout`, default 1 s).
  *
  *  - (c) time to accuracy: the wall time of the Warren example with L-BFGS (`--optimizer
  *    lbfgs`), stopping at the first iteration whose training loss is at most the loss MLlib's
  *    long run ended with, against that MLlib run's own wall time (median of `repeats` runs each).
  *
  * Prints `BENCH_JSON {...}` with every figure (bench/spark.sh turns it into a table).
  */
object SparkBench {

  /** Benchmark parameters.
    *
    * @param workers Warren workers = MLlib partitions (executors: at least this many)
    * @param rows rows in all
    * @param features features per row
    * @param shortIters iterations of the short runs
    * @param longIters iterations of the long runs (and of the recovery runs)
    * @param repeats runs per timing (median)
    * @param killIter iteration at which the recovery runs halt an executor
    * @param recoveryRepeats runs per recovery timing (median)
    * @param failAllDir checkpoint directory for the fail-all runs (None: no fail-all runs)
    * @param durableEvery fail-all: write every k-th checkpoint to disk (`spark.warren.durableEvery`)
    * @param ttaMaxIters time to accuracy: iterations Warren's L-BFGS may take to reach MLlib's loss
    * @param recoveryOnly run only (b), the failure runs (skip the comparison with MLlib)
    * @param rejoinTimeout the elastic runs' `spark.warren.rejoinTimeout`, seconds
    */
  case class Params(
      workers: Int = 4,
      rows: Int = 1000000,
      features: Int = 100,
      shortIters: Int = 5,
      longIters: Int = 25,
      repeats: Int = 3,
      killIter: Int = 12,
      recoveryRepeats: Int = 2,
      failAllDir: Option[String] = None,
      durableEvery: Int = 1,
      ttaMaxIters: Int = 200,
      recoveryOnly: Boolean = false,
      rejoinTimeout: Double = 1.0
  ) {
    require(workers >= 2, s"workers must be at least 2 (an executor is halted), got $workers")
    require(shortIters >= 1 && longIters > shortIters, s"need 1 <= short-iters < iters, got $shortIters, $longIters")
    require(repeats >= 1 && recoveryRepeats >= 1, "repeats must be at least 1")
    require(killIter >= 1 && killIter < longIters, s"kill-iter must be in [1, iters), got $killIter")
    require(durableEvery >= 1, s"durable-every must be at least 1, got $durableEvery")
    require(ttaMaxIters >= 1, s"tta-max-iters must be at least 1, got $ttaMaxIters")
  }

  /** A JSON value written as is (an object or array made by [[json]]). */
  private final case class Raw(json: String)

  /** Records when Spark reported the first failed task of a run and when it launched the
    * first task after that (the re-run task under retry-one, the re-run stage's tasks under
    * fail-all): Spark's part of a recovery (noticing a lost executor, starting a new one,
    * scheduling). Times are Spark's own (`TaskInfo`), in milliseconds.
    */
  private final class RestartClock extends SparkListener {
    private var failedAt = -1L
    private var restartedAt = -1L

    /** Forgets the previous run. */
    def reset(): Unit = synchronized { failedAt = -1L; restartedAt = -1L }

    override def onTaskEnd(e: SparkListenerTaskEnd): Unit = synchronized {
      if (failedAt < 0 && e.reason != Success) failedAt = e.taskInfo.finishTime
    }

    override def onTaskStart(e: SparkListenerTaskStart): Unit = synchronized {
      if (failedAt >= 0 && restartedAt < 0 && e.taskInfo.launchTime >= failedAt) restartedAt = e.taskInfo.launchTime
    }

    /** Seconds from the first failure to the next task launch (NaN if either is missing). */
    def seconds: Double = synchronized {
      if (failedAt < 0 || restartedAt < 0) Double.NaN else (restartedAt - failedAt) / 1e3
    }
  }

  private def median(xs: Seq[Double]): Double = {
    val s = xs.sorted
    if (s.size % 2 == 1) s(s.size / 2) else (s(s.size / 2 - 1) + s(s.size / 2)) / 2
  }

  private def timed[A](body: => A): (A, Double) = {
    val t0 = System.nanoTime()
    val a = body
    (a, (System.nanoTime() - t0) / 1e9)
  }

  private def json(fields: (String, Any)*): String = fields
    .map {
      case (k, v: String) => s""""$k":"$v""""
      case (k, v: Double) => s""""$k":${if (v.isNaN) "null" else v.toString}"""
      case (k, Raw(v))    => s""""$k":$v"""
      case (k, v)         => s""""$k":$v"""
    }
    .mkString("{", ",", "}")

  /** Parses command-line arguments over `p`.
    *
    * @param args `--name value` pairs (see the usage in the error message)
    * @param p the defaults
    * @return the parameters
    */
  def parse(args: List[String], p: Params): Params = args match {
    case Nil                               => p
    case "--workers" :: v :: rest          => parse(rest, p.copy(workers = v.toInt))
    case "--rows" :: v :: rest             => parse(rest, p.copy(rows = v.toInt))
    case "--features" :: v :: rest         => parse(rest, p.copy(features = v.toInt))
    case "--short-iters" :: v :: rest      => parse(rest, p.copy(shortIters = v.toInt))
    case "--iters" :: v :: rest            => parse(rest, p.copy(longIters = v.toInt))
    case "--repeats" :: v :: rest          => parse(rest, p.copy(repeats = v.toInt))
    case "--kill-iter" :: v :: rest        => parse(rest, p.copy(killIter = v.toInt))
    case "--recovery-repeats" :: v :: rest => parse(rest, p.copy(recoveryRepeats = v.toInt))
    case "--fail-all-dir" :: v :: rest     => parse(rest, p.copy(failAllDir = Some(v)))
    case "--durable-every" :: v :: rest    => parse(rest, p.copy(durableEvery = v.toInt))
    case "--tta-max-iters" :: v :: rest    => parse(rest, p.copy(ttaMaxIters = v.toInt))
    case "--recovery-only" :: rest         => parse(rest, p.copy(recoveryOnly = true))
    case "--rejoin-timeout" :: v :: rest   => parse(rest, p.copy(rejoinTimeout = v.toDouble))
    case other :: _ =>
      throw new IllegalArgumentException(
        s"unknown argument $other; usage: [--workers N] [--rows N] [--features N] [--short-iters N] " +
          "[--iters N] [--repeats N] [--kill-iter N] [--recovery-repeats N] [--fail-all-dir DIR] [--durable-every K] [--tta-max-iters N] " +
          "[--recovery-only] [--rejoin-timeout S]"
      )
  }

  /** Entry point for spark-submit.
    *
    * @param args see [[parse]]
    */
  def main(args: Array[String]): Unit = {
    val p = parse(args.toList, Params())
    val sc = new SparkContext(new SparkConf().setAppName("warren-spark-bench"))
    try run(sc, p)
    finally sc.stop()
  }

  /** (a) and (c): the Warren example against MLlib on the same rows (see the object's doc);
    * their figures as JSON fields (`{...}`).
    */
  private def versusMLlibRuns(sc: SparkContext, p: Params, lr: LogisticRegression.Params): Raw = {
    val spark = SparkSession.builder().getOrCreate()
    val d = p.features + 1
    val points = sc.parallelize(0 until p.workers, p.workers).flatMap { pid =>
      val xy = LogisticData.generate(lr.rows, lr.workers, lr.features, lr.seed, pid)
      val n = xy.length / (d + 1)
      // The generator's rows end with a constant 1 (Warren's intercept); MLlib fits its own.
      Iterator.tabulate(n)(i => LabeledPoint(xy(n * d + i), Vectors.dense(java.util.Arrays.copyOfRange(xy, i * d, i * d + p.features))))
    }
    val df = spark.createDataFrame(points).persist(StorageLevel.MEMORY_AND_DISK)
    val (count, cacheS) = timed(df.count())
    require(count == p.rows, s"the DataFrame has $count rows, expected ${p.rows}")
    def mllib(iters: Int) = new MLlibLogisticRegression()
      .setMaxIter(iters)
      .setTol(0.0)
      .setRegParam(0.0)
      .setElasticNetParam(0.0)
      .setStandardization(false)
      .setFitIntercept(true)
      .fit(df)

    LogisticRegression.run(sc, lr.copy(iters = p.shortIters)) // warm-up: JIT, native library in every executor
    mllib(p.shortIters)
    val warren = scala.collection.mutable.Map[Int, Seq[Double]]().withDefaultValue(Nil)
    val ml = scala.collection.mutable.Map[Int, Seq[Double]]().withDefaultValue(Nil)
    var warrenLong: LogisticRegression.Result = null
    var mlLong: org.apache.spark.ml.classification.LogisticRegressionModel = null
    val mlIters = scala.collection.mutable.Map[Int, Int]()
    for (rep <- 1 to p.repeats; iters <- Seq(p.shortIters, p.longIters)) {
      val w = LogisticRegression.run(sc, lr.copy(iters = iters))
      warren(iters) = warren(iters) :+ w.seconds
      val (m, s) = timed(mllib(iters))
      ml(iters) = ml(iters) :+ s
      mlIters(iters) = m.summary.totalIterations
      if (iters == p.longIters) {
        warrenLong = w
        mlLong = m
      }
      println(f"BENCH rep $rep iters $iters: warren ${w.seconds}%.3f s, mllib $s%.3f s (${m.summary.totalIterations} iterations)")
    }
    val warrenPerIter = (median(warren(p.longIters)) - median(warren(p.shortIters))) / (p.longIters - p.shortIters)
    val mlPerIter = (median(ml(p.longIters)) - median(ml(p.shortIters))) / (mlIters(p.longIters) - mlIters(p.shortIters))
    val mlAccuracy = mlLong.summary.accuracy
    val mlLoss = mlLong.summary.objectiveHistory.last

    // (c) time to accuracy: Warren's L-BFGS until MLlib's final loss, against MLlib's long runs.
    val tta = (1 to p.repeats).map { rep =>
      val r = LogisticRegression.run(sc, lr.copy(optimizer = "lbfgs", iters = p.ttaMaxIters, targetLoss = mlLoss))
      println(f"BENCH rep $rep time to accuracy: warren lbfgs ${r.seconds}%.3f s, ${r.losses.length} iterations, loss ${r.losses.last}%.6f (target $mlLoss%.6f)")
      r
    }
    val ttaReached = tta.forall(_.losses.last <= mlLoss)

    Raw(
      json(
        "cache_s" -> cacheS,
        "warren_short_s" -> median(warren(p.shortIters)),
        "warren_long_s" -> median(warren(p.longIters)),
        "warren_per_iter_s" -> warrenPerIter,
        "warren_loss" -> warrenLong.losses.last,
        "warren_accuracy" -> warrenLong.accuracy,
        "mllib_short_s" -> median(ml(p.shortIters)),
        "mllib_long_s" -> median(ml(p.longIters)),
        "mllib_short_iterations" -> mlIters(p.shortIters),
        "mllib_long_iterations" -> mlIters(p.longIters),
        "mllib_per_iter_s" -> mlPerIter,
        "mllib_loss" -> mlLoss,
        "mllib_accuracy" -> mlAccuracy,
        "speedup" -> mlPerIter / warrenPerIter,
        "tta_target_loss" -> mlLoss,
        "tta_warren_s" -> median(tta.map(_.seconds)),
        "tta_warren_runs" -> tta.map(r => f"${r.seconds}%.2f").mkString(","),
        "tta_warren_iterations" -> tta.head.losses.length,
        "tta_warren_loss" -> tta.head.losses.last,
        "tta_warren_accuracy" -> tta.head.accuracy,
        "tta_reached" -> ttaReached,
        "tta_ratio" -> (if (ttaReached) median(tta.map(_.seconds)) / median(ml(p.longIters)) else Double.NaN)
      )
    )
  }

  private def run(sc: SparkContext, p: Params): Unit = {
    def slots(): Unit = {
      require(WarrenSpark.awaitSlots(sc, p.workers, 180) >= p.workers, s"fewer than ${p.workers} executors registered")
      // And free: an elastic run's cancelled task (a re-run that was not needed) may still be
      // ending; the next run must not start with fewer slots (or wait for them in its time).
      val until = System.nanoTime() + 60e9.toLong
      def free = WarrenSlots.maxConcurrentTasks(sc) - sc.statusTracker.getExecutorInfos.map(_.numRunningTasks).sum
      WarrenSlots.drainListeners(sc, 5000)
      while (free < p.workers && System.nanoTime() < until) Thread.sleep(100)
    }
    slots()
    val executors = sc.statusTracker.getExecutorInfos.length - 1 // without the driver
    val slots0 = WarrenSlots.maxConcurrentTasks(sc)
    val lr = LogisticRegression.Params(workers = p.workers, rows = p.rows, features = p.features)

    // (a) and (c) against MLlib, unless only the failure runs are wanted (a warm-up then).
    val versusMLlib =
      if (p.recoveryOnly) {
        LogisticRegression.run(sc, lr.copy(iters = p.shortIters)) // warm-up: JIT, native library in every executor
        None
      } else Some(versusMLlibRuns(sc, p, lr))

    // (b) recovery: failure-free vs one failure (a halted executor, a thrown task), retry-one
    // (and fail-all); the clean and failure runs alternate.
    val clock = new RestartClock
    sc.addSparkListener(clock)
    def stage(conf: Map[String, String], failure: Option[String]): (LogisticRegression.Result, Double) = {
      slots()
      clock.reset()
      val run = lr.copy(
        iters = p.longIters,
        conf = lr.conf ++ conf,
        hooks = FaultHarness.Faults(
          killExecutor = if (failure.contains("executor")) p.killIter else -1,
          killTask = if (failure.contains("task")) p.killIter else -1
        )
      )
      val r = LogisticRegression.run(sc, run)
      WarrenSlots.drainListeners(sc, 5000)
      val name = if (conf.contains("elastic")) "elastic" else conf.getOrElse("recovery", "retry-one")
      println(f"BENCH $name ${failure.getOrElse("clean")}: ${r.seconds}%.3f s" +
        failure.fold("")(_ => f", Spark's restart ${clock.seconds}%.3f s"))
      (r, clock.seconds)
    }
    def recovery(strategy: String, conf: Map[String, String]): Seq[Raw] = {
      val runs = (1 to p.recoveryRepeats).map { _ =>
        (stage(conf, None)._1, stage(conf, Some("executor")), stage(conf, Some("task")))
      }
      val clean = median(runs.map(_._1.seconds))
      Seq("executor" -> runs.map(_._2), "task" -> runs.map(_._3)).map { case (failure, fs) =>
        val hashes = (runs.map(_._1.modelHash) ++ fs.map(_._1.modelHash)).distinct
        Raw(
          json(
            "strategy" -> strategy,
            "failure" -> failure,
            "clean_s" -> clean,
            "failure_s" -> median(fs.map(_._1.seconds)),
            "failure_runs" -> fs.map(f => f"${f._1.seconds}%.2f").mkString(","),
            "spark_restart_s" -> median(fs.map(_._2)),
            "hashes" -> hashes.mkString("/")
          )
        )
      }
    }
    val retryOne = recovery("retry-one", Map.empty)
    val failAll = p.failAllDir.toSeq.flatMap { dir =>
      val base = Files.createDirectories(java.nio.file.Paths.get(dir)).toString
      recovery("fail-all", Map("recovery" -> "fail-all", "checkpointDir" -> base, "durableEvery" -> p.durableEvery.toString))
    }
    // Elastic (retry-one with spark.warren.elastic=true): a lost worker is dropped after the
    // rejoin timeout and the others go on from the last checkpoint without it.
    val elastic = recovery(
      "elastic",
      Map("elastic" -> "true", "minWorkers" -> (p.workers - 1).toString, "rejoinTimeout" -> p.rejoinTimeout.toString)
    )
    sc.removeSparkListener(clock)

    val fields = json(
        "workers" -> p.workers,
        "executors" -> executors,
        "slots" -> slots0,
        "rows" -> p.rows,
        "features" -> p.features,
        "short_iters" -> p.shortIters,
        "long_iters" -> p.longIters,
        "repeats" -> p.repeats,
        "recovery_only" -> p.recoveryOnly,
        "kill_iter" -> p.killIter,
        "recovery_repeats" -> p.recoveryRepeats,
        "durable_every" -> p.durableEvery,
        "recovery" -> Raw((retryOne ++ failAll ++ elastic).map(_.json).mkString("[", ",", "]"))
    )
    // (a) and (c)'s fields, if they ran, in the same object.
    println("BENCH_JSON " + fields.stripSuffix("}") + versusMLlib.fold("")("," + _.json.stripPrefix("{")) +
      (if (versusMLlib.isEmpty) "}" else ""))
  }
}
