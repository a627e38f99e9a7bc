package io.warren.examples

import java.nio.file.Files

import org.apache.spark.{SparkConf, SparkContext}
import org.apache.spark.ml.classification.{LogisticRegression => MLlibLogisticRegression}
import org.apache.spark.ml.feature.LabeledPoint
import org.apache.spark.ml.linalg.Vectors
import org.apache.spark.sql.SparkSession
import org.apache.spark.storage.StorageLevel

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
  *  - (b) the Warren stage's total time without failures and with one executor halted at
  *    iteration `killIter` under retry-one (and fail-all, with `--fail-all-dir DIR`).
  *
  * Prints `BENCH_JSON {...}` with every figure (bench/spark.sh turns it into a table).
  */
object SparkBench {

  /** Benchmark parameters.
    *
    * @param workers Warren workers = MLlib partitions = executors
    * @param rows rows in all
    * @param features features per row
    * @param shortIters iterations of the short runs
    * @param longIters iterations of the long runs (and of the recovery runs)
    * @param repeats runs per timing (median)
    * @param killIter iteration at which the recovery runs halt an executor
    * @param recoveryRepeats runs per recovery timing (median)
    * @param failAllDir checkpoint directory for the fail-all runs (None: no fail-all runs)
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
      failAllDir: Option[String] = None
  ) {
    require(workers >= 2, s"workers must be at least 2 (an executor is halted), got $workers")
    require(shortIters >= 1 && longIters > shortIters, s"need 1 <= short-iters < iters, got $shortIters, $longIters")
    require(repeats >= 1 && recoveryRepeats >= 1, "repeats must be at least 1")
    require(killIter >= 1 && killIter < longIters, s"kill-iter must be in [1, iters), got $killIter")
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
    case other :: _ =>
      throw new IllegalArgumentException(
        s"unknown argument $other; usage: [--workers N] [--rows N] [--features N] [--short-iters N] " +
          "[--iters N] [--repeats N] [--kill-iter N] [--recovery-repeats N] [--fail-all-dir DIR]"
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

  private def run(sc: SparkContext, p: Params): Unit = {
    def slots(): Unit =
      require(WarrenSpark.awaitSlots(sc, p.workers, 180) >= p.workers, s"fewer than ${p.workers} executors registered")
    slots()
    val lr = LogisticRegression.Params(workers = p.workers, rows = p.rows, features = p.features)

    // (a) Warren, warm-up then short and long runs, alternating with MLlib.
    val spark = SparkSession.builder().getOrCreate()
    val d = p.features + 1
    val points = sc.parallelize(0 until p.workers, p.workers).flatMap { pid =>
      val (x, y) = LogisticRegression.generate(lr, pid)
      // The generator's rows end with a constant 1 (Warren's intercept); MLlib fits its own.
      Iterator.tabulate(y.length)(i => LabeledPoint(y(i), Vectors.dense(java.util.Arrays.copyOfRange(x, i * d, i * d + p.features))))
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

    // (b) recovery: failure-free vs one halted executor, retry-one (and fail-all).
    def stage(conf: Map[String, String], kill: Int): LogisticRegression.Result = {
      slots()
      LogisticRegression.run(sc, lr.copy(iters = p.longIters, killExecutor = kill, conf = lr.conf ++ conf))
    }
    def recovery(conf: Map[String, String]): (Double, Double, String, String) = {
      val runs = (1 to p.recoveryRepeats).map(_ => (stage(conf, -1), stage(conf, p.killIter)))
      val hashes = runs.flatMap { case (a, b) => Seq(a.modelHash, b.modelHash) }.distinct
      (median(runs.map(_._1.seconds)), median(runs.map(_._2.seconds)), hashes.mkString("/"), runs.map(_._2.seconds).mkString(","))
    }
    val (r1Clean, r1Kill, r1Hash, r1Kills) = recovery(Map.empty)
    val failAll = p.failAllDir.map { dir =>
      val base = Files.createDirectories(java.nio.file.Paths.get(dir)).toString
      recovery(Map("recovery" -> "fail-all", "checkpointDir" -> base))
    }

    println(
      "BENCH_JSON " + json(
        "workers" -> p.workers,
        "rows" -> p.rows,
        "features" -> p.features,
        "short_iters" -> p.shortIters,
        "long_iters" -> p.longIters,
        "repeats" -> p.repeats,
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
        "kill_iter" -> p.killIter,
        "recovery_repeats" -> p.recoveryRepeats,
        "retry_one_clean_s" -> r1Clean,
        "retry_one_kill_s" -> r1Kill,
        "retry_one_kill_runs" -> r1Kills,
        "retry_one_hashes" -> r1Hash,
        "fail_all_clean_s" -> failAll.fold(Double.NaN)(_._1),
        "fail_all_kill_s" -> failAll.fold(Double.NaN)(_._2),
        "fail_all_kill_runs" -> failAll.fold("")(_._4),
        "fail_all_hashes" -> failAll.fold("")(_._3)
      )
    )
  }
}
