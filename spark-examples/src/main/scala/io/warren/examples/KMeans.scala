package io.warren.examples

import java.nio.{ByteBuffer, ByteOrder}
import java.util.SplittableRandom

import io.warren.{CallOptions, Communicator, Op}
import io.warren.examples.data.ModelHash
import io.warren.spark.WarrenSpark
import org.apache.spark.{SparkConf, SparkContext, TaskContext}

/** Distributed k-means (Lloyd's algorithm) on an RDD with Warren: one allreduce of the
  * per-cluster sums, counts and cost per iteration, a checkpoint per iteration, and retry-one
  * recovery.
  *
  * {{{
  * spark-submit --master 'local-cluster[3,1,1024]' --class io.warren.examples.KMeans \
  *   --jars warren-core.jar,warren-runner.jar,warren-spark_2.13.jar warren-spark-examples_2.13.jar \
  *   --workers 3 --rows 90000 --dims 10 --k 5 --iters 15 --kill-executor 6
  * }}}
  *
  * The data has `k` known clusters: row `g` (counted over all partitions) belongs to cluster
  * `g % k`, whose center is `spread` times the unit vector of axis `g % k`, plus Gaussian
  * noise of standard deviation `noise` on every coordinate. The initial centers are chosen by
  * rank 0 from its rows (farthest-point: its first row, then repeatedly the row farthest from
  * the centers chosen so far) and broadcast once (a bootstrap call).
  *
  * Prints the cost (sum of squared distances to the nearest center) before each update, the
  * final cost, how the points of each true cluster were assigned, and `MODEL_HASH <hex>`
  * (SHA-256 of the final centers as little-endian doubles), which is the same with and without
  * a failure.
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
    * @param killTask throw in partition 1's first attempt at this iteration (-1: never)
    * @param killExecutor halt partition 1's executor JVM (first attempt) at this iteration (-1: never)
    * @param conf `spark.warren.*` settings for the runner
    */
  case class Params(
      workers: Int = 3,
      rows: Int = 90000,
      dims: Int = 10,
      k: Int = 5,
      iters: Int = 15,
      spread: Double = 10.0,
      noise: Double = 1.0,
      seed: Long = 20240607L,
      killTask: Int = -1,
      killExecutor: Int = -1,
      conf: Map[String, String] = Map("bootstrapCache" -> "true")
  ) {
    require(workers >= 1, s"workers must be at least 1, got $workers")
    require(rows >= workers, s"rows ($rows) must be at least workers ($workers)")
    require(k >= 1 && k <= dims, s"k must be between 1 and dims ($dims), got $k")
    require(iters >= 1, s"iters must be at least 1, got $iters")
    require(noise >= 0, s"noise must not be negative, got $noise")
  }

  /** What a run gives back (rank 0's view; every rank has the same).
    *
    * @param centers the final centers, row-major (`k` rows of `dims`)
    * @param costs the cost before each update (sum over all rows of the squared distance to
    *   the nearest center)
    * @param finalCost the cost of the final centers
    * @param confusion `confusion(a * k + t)`: rows of true cluster `t` assigned to center `a`
    * @param recoveries recoveries rank 0 took part in
    * @param seconds wall time of the Warren stage as the driver saw it
    */
  case class Result(
      centers: Array[Double],
      costs: Array[Double],
      finalCost: Double,
      confusion: Array[Long],
      recoveries: Long,
      seconds: Double
  ) {

    /** SHA-256 of the centers (little-endian doubles), in hex. */
    def modelHash: String = ModelHash.of(centers)
  }

  /** The rows of partition `pid`, row-major in the first array, their true clusters in the second. */
  private[examples] def generate(p: Params, pid: Int): (Array[Double], Array[Int]) = {
    val base = p.rows / p.workers
    val extra = p.rows % p.workers
    val n = base + (if (pid < extra) 1 else 0)
    val first = pid.toLong * base + math.min(pid, extra)
    val r = new SplittableRandom(p.seed * 1000003L + pid)
    val x = new Array[Double](n * p.dims)
    val label = new Array[Int](n)
    for (i <- 0 until n) {
      val c = ((first + i) % p.k).toInt
      label(i) = c
      for (j <- 0 until p.dims) {
        x(i * p.dims + j) = (if (j == c) p.spread else 0.0) + p.noise * r.nextGaussian()
      }
    }
    (x, label)
  }

  private def sqDist(x: Array[Double], xo: Int, c: Array[Double], co: Int, d: Int): Double = {
    var s = 0.0
    var j = 0
    while (j < d) {
      val t = x(xo + j) - c(co + j)
      s += t * t
      j += 1
    }
    s
  }

  /** The nearest center of row `i` (the lowest index on ties) and its squared distance. */
  private def nearest(x: Array[Double], i: Int, centers: Array[Double], k: Int, d: Int): (Int, Double) = {
    var best = 0
    var bestD = Double.PositiveInfinity
    var c = 0
    while (c < k) {
      val dist = sqDist(x, i * d, centers, c * d, d)
      if (dist < bestD) {
        bestD = dist
        best = c
      }
      c += 1
    }
    (best, bestD)
  }

  /** Farthest-point initial centers from `x` (`n` rows): the first row, then repeatedly the row
    * farthest from the centers chosen so far. */
  private def initialCenters(x: Array[Double], n: Int, k: Int, d: Int): Array[Double] = {
    require(n >= k, s"rank 0 has $n rows, fewer than k = $k: use fewer workers or more rows")
    val centers = new Array[Double](k * d)
    System.arraycopy(x, 0, centers, 0, d)
    val minD = Array.tabulate(n)(i => sqDist(x, i * d, centers, 0, d))
    for (c <- 1 until k) {
      var far = 0
      for (i <- 1 until n) if (minD(i) > minD(far)) far = i
      System.arraycopy(x, far * d, centers, c * d, d)
      for (i <- 0 until n) minD(i) = math.min(minD(i), sqDist(x, i * d, centers, c * d, d))
    }
    centers
  }

  private def toBytes(a: Array[Double]): Array[Byte] = {
    val b = ByteBuffer.allocate(8 * a.length).order(ByteOrder.LITTLE_ENDIAN)
    a.foreach(b.putDouble)
    b.array()
  }

  private def fromBytes(bytes: Array[Byte], into: Array[Double], from: Int, count: Int): Unit = {
    val b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN)
    for (i <- from until from + count) into(i) = b.getDouble
  }

  /** One worker: bootstrap calls, then a checkpointed Lloyd loop from the last checkpoint. */
  private def worker(p: Params)(comm: Communicator, parts: Iterator[Int]): Result = {
    val pid = TaskContext.getPartitionId()
    val attempt = TaskContext.get().attemptNumber()
    val (x, truth) = parts.map(generate(p, _)).toSeq.headOption.getOrElse((Array.empty[Double], Array.empty[Int]))
    val n = truth.length
    // Bootstrap calls (CallOptions.bootstrap()), made once before the first checkpoint and
    // served from the cache to a restarted worker: the dimension, and rank 0's initial centers.
    val dims = Array(if (n > 0) p.dims else 0)
    comm.allreduce(dims, Op.MAX, CallOptions.bootstrap())
    val d = dims(0)
    val k = p.k
    val mine = if (comm.rank() == 0) toBytes(initialCenters(x, n, k, d)) else null
    val init = comm.broadcast(mine, 0, CallOptions.bootstrap())
    val ckpt = comm.loadCheckpoint()
    val centers = new Array[Double](k * d)
    val costs = new Array[Double](p.iters)
    if (ckpt.version == 0) fromBytes(init, centers, 0, k * d)
    else {
      val model = new Array[Double](k * d + p.iters)
      fromBytes(ckpt.global, model, 0, model.length)
      System.arraycopy(model, 0, centers, 0, k * d)
      System.arraycopy(model, k * d, costs, 0, p.iters)
    }
    // sums (k * d), counts (k), cost (1)
    val buf = new Array[Double](k * d + k + 1)
    for (it <- ckpt.version until p.iters) {
      if (pid == 1 && attempt == 0 && it == p.killTask) {
        throw new RuntimeException(s"injected task failure at iteration $it (--kill-task)")
      }
      if (pid == 1 && attempt == 0 && it == p.killExecutor) {
        System.err.println(s"halting this executor at iteration $it (--kill-executor)")
        Runtime.getRuntime.halt(1)
      }
      java.util.Arrays.fill(buf, 0.0)
      for (i <- 0 until n) {
        val (c, dist) = nearest(x, i, centers, k, d)
        for (j <- 0 until d) buf(c * d + j) += x(i * d + j)
        buf(k * d + c) += 1
        buf(k * d + k) += dist
      }
      comm.allreduce(buf, Op.SUM)
      costs(it) = buf(k * d + k)
      for (c <- 0 until k) {
        val count = buf(k * d + c)
        // An empty cluster keeps its center.
        if (count > 0) for (j <- 0 until d) centers(c * d + j) = buf(c * d + j) / count
      }
      comm.checkpoint(toBytes(centers ++ costs), null)
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

  /** Trains on `sc`: one partition per worker, each generating its rows deterministically.
    *
    * @param sc the context (needs `p.workers` free task slots)
    * @param p the parameters
    * @return rank 0's result
    */
  def run(sc: SparkContext, p: Params): Result = {
    val rdd = sc.parallelize(0 until p.workers, p.workers)
    val started = System.nanoTime()
    val results = WarrenSpark.train(rdd, p.workers, p.conf)(worker(p))
    results.head.copy(seconds = (System.nanoTime() - started) / 1e9)
  }

  /** Parses command-line arguments over `p`.
    *
    * @param args `--name value` pairs (see the usage in the error message)
    * @param p the defaults
    * @return the parameters
    * @throws IllegalArgumentException on an unknown argument or a bad value
    */
  def parse(args: List[String], p: Params): Params = args match {
    case Nil                            => p
    case "--workers" :: v :: rest       => parse(rest, p.copy(workers = v.toInt))
    case "--rows" :: v :: rest          => parse(rest, p.copy(rows = v.toInt))
    case "--dims" :: v :: rest          => parse(rest, p.copy(dims = v.toInt))
    case "--k" :: v :: rest             => parse(rest, p.copy(k = v.toInt))
    case "--iters" :: v :: rest         => parse(rest, p.copy(iters = v.toInt))
    case "--spread" :: v :: rest        => parse(rest, p.copy(spread = v.toDouble))
    case "--noise" :: v :: rest         => parse(rest, p.copy(noise = v.toDouble))
    case "--seed" :: v :: rest          => parse(rest, p.copy(seed = v.toLong))
    case "--kill-task" :: v :: rest     => parse(rest, p.copy(killTask = v.toInt))
    case "--kill-executor" :: v :: rest => parse(rest, p.copy(killExecutor = v.toInt))
    case other :: _ =>
      throw new IllegalArgumentException(
        s"unknown argument $other; usage: [--workers N] [--rows N] [--dims N] [--k N] [--iters N] " +
          "[--spread X] [--noise X] [--seed N] [--kill-task ITER] [--kill-executor ITER]"
      )
  }

  /** Entry point for spark-submit (the master comes from spark-submit).
    *
    * @param args see [[parse]]
    */
  def main(args: Array[String]): Unit = {
    val p = parse(args.toList, Params())
    val sc = new SparkContext(new SparkConf().setAppName("warren-kmeans"))
    try {
      // Executors of a fresh context register a few seconds after it starts.
      WarrenSpark.awaitSlots(sc, p.workers, 120)
      val r = run(sc, p)
      r.costs.zipWithIndex.foreach { case (c, i) => println(f"iter ${i + 1}%3d cost $c%.6f") }
      println(f"FINAL_COST ${r.finalCost}%.6f")
      for (t <- 0 until p.k) {
        val row = (0 until p.k).map(a => r.confusion(a * p.k + t))
        println(s"true cluster $t -> centers ${row.mkString(" ")}")
      }
      println(s"RECOVERIES ${r.recoveries}")
      println(f"TRAIN_SECONDS ${r.seconds}%.3f")
      println(s"MODEL_HASH ${r.modelHash}")
    } finally {
      sc.stop()
    }
  }
}
