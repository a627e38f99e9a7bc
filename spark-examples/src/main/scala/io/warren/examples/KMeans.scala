package io.warren.examples

import io.warren.{CallOptions, Communicator, Op}
import io.warren.examples.data.ModelHash
import io.warren.spark._
import org.apache.spark.{SparkConf, SparkContext}

/** Distributed k-means (Lloyd's algorithm) on an RDD with Warren: one allreduce of the
  * per-cluster sums, counts and cost per iteration, a checkpoint per iteration, and retry-one
  * recovery. The data has `k` known clusters ([[KMeansData]]). Rank 0 picks the initial
  * centers from its rows (farthest-point) and broadcasts them once, a bootstrap call.
  * Prints the cost before each update, the final cost, how each true cluster's rows were
  * assigned and `MODEL_HASH` (SHA-256 of the centers), the same with and without a failure.
  * The command line is [[KMeansCommandLine]]'s; its failures are [[FaultHarness]]'s.
  * {{{
  * spark-submit --class io.warren.examples.KMeans --jars $WARREN_JARS \
  *   warren-spark-examples_2.13.jar --workers 3 --rows 90000 --dims 10 --k 5 --iters 15
  * }}}
  */
object KMeans {

  /** The job's parameters.
    *
    * @param workers Warren workers (Spark tasks running together)
    * @param rows rows of synthetic data in all
    * @param dims coordinates per row
    * @param k clusters generated and clusters sought (at most `dims`)
    * @param iters Lloyd iterations
    * @param spread distance of each true center from the origin
    * @param noise standard deviation of the noise on each coordinate
    * @param seed seed of the data
    * @param conf `spark.warren.*` settings for the runner
    * @param hooks calls into the worker loop ([[FaultHarness]] injects failures through them)
    */
  case class Params(workers: Int = 3, rows: Int = 90000, dims: Int = 10, k: Int = 5, iters: Int = 15,
      spread: Double = 10.0, noise: Double = 1.0, seed: Long = 20240607L,
      conf: Map[String, String] = Map("bootstrapCache" -> "true"), hooks: Hooks = Hooks.none) {
    require(workers >= 1, s"workers must be at least 1, got $workers")
    require(rows >= workers, s"rows ($rows) must be at least workers ($workers)")
    require(k >= 1 && k <= dims, s"k must be between 1 and dims ($dims), got $k")
    require(iters >= 1, s"iters must be at least 1, got $iters")
    require(noise >= 0, s"noise must not be negative, got $noise")
  }

  /** What a run gives back (rank 0's view; every rank has the same).
    *
    * @param centers the final centers, row-major (`k` rows of `dims`)
    * @param costs the cost before each update (sum of the squared distances to the nearest center)
    * @param finalCost the cost of the final centers
    * @param confusion `confusion(a * k + t)`: rows of true cluster `t` assigned to center `a`
    * @param recoveries recoveries rank 0 took part in
    * @param seconds wall time of the Warren stage as the driver saw it
    */
  case class Result(centers: Array[Double], costs: Array[Double], finalCost: Double, confusion: Array[Long],
      recoveries: Long, seconds: Double) {

    /** SHA-256 of the centers (little-endian doubles), in hex ([[ModelHash]]). */
    def modelHash: String = ModelHash.of(centers)
  }

  /** What each checkpoint holds: the centers and the cost before each update so far. */
  private final case class Checkpointed(centers: Array[Double], costs: Array[Double])
  private object Checkpointed {
    implicit val codec: Codec[Checkpointed] = Codec.caseClass2(Checkpointed.apply _, Checkpointed.unapply _)
  }

  /** The squared distance between row `xo / d` of `x` and row `co / d` of `c`. */
  private def sqDist(x: Array[Double], xo: Int, c: Array[Double], co: Int, d: Int): Double = {
    var s = 0.0
    var j = 0 // a plain while loop: this is the hot loop
    while (j < d) { val t = x(xo + j) - c(co + j); s += t * t; j += 1 }
    s
  }

  /** The nearest center of row `i` (the lowest index on ties) and its squared distance. */
  private def nearest(x: Array[Double], i: Int, centers: Array[Double], k: Int, d: Int): (Int, Double) = {
    var best = 0
    var bestD = Double.PositiveInfinity
    var c = 0
    while (c < k) {
      val dist = sqDist(x, i * d, centers, c * d, d)
      if (dist < bestD) { bestD = dist; best = c }
      c += 1
    }
    (best, bestD)
  }

  /** Farthest-point initial centers from the `n` rows of `x`: the first row, then repeatedly the
    * row farthest from the centers chosen so far. */
  private def initialCenters(x: Array[Double], n: Int, k: Int, d: Int): Array[Double] = {
    require(n >= k, s"rank 0 has $n rows, fewer than k = $k: use fewer workers or more rows")
    val centers = new Array[Double](k * d)
    System.arraycopy(x, 0, centers, 0, d)
    val minD = Array.tabulate(n)(i => sqDist(x, i * d, centers, 0, d))
    for (c <- 1 until k) {
      val far = (1 until n).foldLeft(0)((f, i) => if (minD(i) > minD(f)) i else f)
      System.arraycopy(x, far * d, centers, c * d, d)
      for (i <- 0 until n) minD(i) = math.min(minD(i), sqDist(x, i * d, centers, c * d, d))
    }
    centers
  }

  /** One worker: bootstrap calls, then a checkpointed Lloyd loop from the last checkpoint. */
  private def worker(p: Params)(comm: Communicator, parts: Iterator[Int]): Result = {
    val (x, truth) =
      parts.map(KMeansData.generate(p, _)).toSeq.headOption.getOrElse((Array.empty[Double], Array.empty[Int]))
    val (n, k) = (truth.length, p.k)
    // Bootstrap calls: made once before the first checkpoint, replayed to a restarted worker.
    val d = comm.allreduce(Array(if (n > 0) p.dims else 0), Op.MAX, CallOptions.bootstrap())(0)
    val mine = if (comm.rank() == 0) Codec.doubles.encode(initialCenters(x, n, k, d)) else null
    val init = Codec.doubles.decode(comm.broadcast(mine, 0, CallOptions.bootstrap()))
    val loaded = comm.loadCheckpointAs[Checkpointed]
    val Checkpointed(centers, costs) = loaded.fold(Checkpointed(init, new Array[Double](p.iters)))(_._2)
    val hooks = p.hooks.worker(p.workers, comm)
    val buf = new Array[Double](k * d + k + 1) // sums (k * d), counts (k), cost (1)
    for (it <- loaded.fold(0)(_._1) until p.iters) {
      hooks.beforeIteration(it)
      java.util.Arrays.fill(buf, 0.0)
      for (i <- 0 until n) {
        val (c, dist) = nearest(x, i, centers, k, d)
        for (j <- 0 until d) buf(c * d + j) += x(i * d + j)
        buf(k * d + c) += 1
        buf(k * d + k) += dist
      }
      comm.allreduce(buf, Op.SUM)
      hooks.afterAllreduce(it)
      costs(it) = buf(k * d + k)
      // An empty cluster keeps its center.
      for (c <- 0 until k; count = buf(k * d + c) if count > 0; j <- 0 until d)
        centers(c * d + j) = buf(c * d + j) / count
      comm.checkpoint(Checkpointed(centers, costs))
      hooks.afterCheckpoint(it, None)
    }
    // The final cost and how each true cluster's rows were assigned.
    val report = new Array[Double](k * k + 1)
    for (i <- 0 until n) {
      val (c, dist) = nearest(x, i, centers, k, d)
      report(c * k + truth(i)) += 1
      report(k * k) += dist
    }
    comm.allreduce(report, Op.SUM)
    Result(centers, costs, report(k * k), report.take(k * k).map(_.toLong), comm.recoveries(), 0.0)
  }

  /** Trains on `sc` (which needs `p.workers` free task slots) and returns rank 0's result. */
  def run(sc: SparkContext, p: Params): Result = {
    val rdd = sc.parallelize(0 until p.workers, p.workers) // one partition per worker
    val started = System.nanoTime()
    val results = WarrenSpark.train(rdd, p.workers, p.conf)(worker(p))
    results.head.copy(seconds = (System.nanoTime() - started) / 1e9)
  }

  /** Entry point for spark-submit: the arguments are [[KMeansCommandLine]]'s. */
  def main(args: Array[String]): Unit = {
    val p = KMeansCommandLine.parse(args.toList)
    val sc = new SparkContext(new SparkConf().setAppName("warren-kmeans"))
    try {
      WarrenSpark.awaitSlots(sc, p.workers, 120) // a fresh context's executors register in seconds
      val r = run(sc, p)
      r.costs.zipWithIndex.foreach { case (c, i) => println(f"iter ${i + 1}%3d cost $c%.6f") }
      println(f"FINAL_COST ${r.finalCost}%.6f")
      for (t <- 0 until p.k)
        println(s"true cluster $t -> centers ${(0 until p.k).map(a => r.confusion(a * p.k + t)).mkString(" ")}")
      println(s"RECOVERIES ${r.recoveries}")
      println(f"TRAIN_SECONDS ${r.seconds}%.3f")
      println(s"MODEL_HASH ${r.modelHash}")
    } finally sc.stop()
  }
}
