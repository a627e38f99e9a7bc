package io.warren.examples

import java.util.SplittableRandom

/** The synthetic data of [[KMeans]]: `k` known clusters. Row `g` (counted over all partitions)
  * belongs to cluster `g % k`, whose center is `spread` times the unit vector of axis `g % k`,
  * plus Gaussian noise of standard deviation `noise` on every coordinate.
  */
object KMeansData {

  /** The rows of partition `pid`, row-major in the first array, their true clusters in the second.
    *
    * @param p the job's parameters (rows, workers, dims, k, spread, noise, seed)
    * @param pid the partition
    */
  def generate(p: KMeans.Params, pid: Int): (Array[Double], Array[Int]) = {
    val (base, extra) = (p.rows / p.workers, p.rows % p.workers)
    val n = base + (if (pid < extra) 1 else 0)
    val first = pid.toLong * base + math.min(pid, extra)
    val r = new SplittableRandom(p.seed * 1000003L + pid)
    val label = Array.tabulate(n)(i => ((first + i) % p.k).toInt)
    val x = new Array[Double](n * p.dims)
    for (i <- 0 until n; j <- 0 until p.dims)
      x(i * p.dims + j) = (if (j == label(i)) p.spread else 0.0) + p.noise * r.nextGaussian()
    (x, label)
  }
}
