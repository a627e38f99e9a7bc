package io.warren.examples

import java.nio.{ByteBuffer, ByteOrder}
import java.security.MessageDigest
import java.util.SplittableRandom

import io.warren.ps.{PsClient, PsGradients, PsJob, PsOptimizer, PsPulls}
import io.warren.spark.{PsServers, WarrenSpark}
import org.apache.spark.{SparkConf, SparkContext, TaskContext}

/** Sparse logistic regression over hashed features with parameter servers
  * ([[io.warren.spark.WarrenSpark.trainPS]]): each row has a few categorical features, hashed
  * into `2^bits` keys of a sparse table `w` (one float per key) beside a dense bias `b`; each
  * trainer, at each step, pulls the rows of its mini-batch's keys, pushes their gradients, and
  * the servers apply them with SGD. `--mode sync` (the default) gives the same model on every
  * run, failures or not; `async` and `ssp` (with `--staleness K`) do not wait for each other.
  * The command line is [[PsCommandLine]]'s; its failures (`--kill-task STEP`, `--kill-server
  * STEP`, `--pause-ms MS`) are [[FaultHarness.PsFaults]]'s.
  *
  * {{{
  * spark-submit --master 'local-cluster[2,1,1024]' --class io.warren.examples.SparseLogisticRegressionPS \
  *   --jars warren-core.jar,warren-runner.jar,warren-spark_2.13.jar warren-spark-examples_2.13.jar \
  *   --workers 2 --servers 2 --iters 30 --kill-task 10 --kill-server 20
  * }}}
  *
  * Prints the mean log loss of the last steps, `LOST_UPDATES` (async/SSP server restarts) and
  * `MODEL_HASH <hex>` (SHA-256 of the final `w` rows of every key and `b`, little-endian floats).
  */
object SparseLogisticRegressionPS {

  /** The job's parameters.
    *
    * @param workers trainers (Spark tasks running together)
    * @param servers parameter servers (in the driver, or child JVMs of it with `ps.servers=process`)
    * @param rowsPerWorker rows of synthetic data per trainer
    * @param fields categorical features per row
    * @param vocab distinct values of each feature
    * @param bits the features are hashed into `2^bits` keys
    * @param batch rows per mini-batch
    * @param iters steps
    * @param lr SGD learning rate
    * @param mode `sync`, `async` or `ssp`
    * @param staleness the SSP bound
    * @param seed seed of the data
    * @param conf `spark.warren.*` settings
    * @param hooks calls into the trainer loop and the driver ([[FaultHarness.PsFaults]]
    *   injects failures through them)
    */
  case class Params(
      workers: Int = 2,
      servers: Int = 2,
      rowsPerWorker: Int = 4000,
      fields: Int = 8,
      vocab: Int = 500,
      bits: Int = 12,
      batch: Int = 200,
      iters: Int = 30,
      lr: Float = 0.5f,
      mode: String = "sync",
      staleness: Long = 2,
      seed: Long = 20251125L,
      conf: Map[String, String] = Map.empty,
      hooks: PsHooks = PsHooks.none
  ) {
    require(Set("sync", "async", "ssp").contains(mode), s"mode must be sync, async or ssp, got $mode")

    /** The job the trainers define. */
    def job: PsJob =
      PsJob
        .builder(workers)
        .mode(mode, staleness)
        .sparse("w", 1, 1L << bits, PsJob.zeros(), PsOptimizer.sgd(lr)) // room for every hashed key
        .dense("b", 1, PsJob.zeros(), PsOptimizer.sgd(lr))
        .build()
  }

  /** What a run gives back.
    *
    * @param model the final `w` (every key in order) then `b`
    * @param loss the mean log loss of the last step's mini-batches (trainer 0's)
    * @param lostUpdates updates lost in server restarts, all trainers
    * @param seconds wall time of the Spark job
    */
  case class Result(model: Array[Float], loss: Double, lostUpdates: Long, seconds: Double) {

    /** SHA-256 of the model (little-endian floats), in hex. */
    def modelHash: String = {
      val b = ByteBuffer.allocate(4 * model.length).order(ByteOrder.LITTLE_ENDIAN)
      model.foreach(b.putFloat)
      MessageDigest.getInstance("SHA-256").digest(b.array()).map(x => f"$x%02x").mkString
    }
  }

  /** The hashed key of value `v` of field `f`. */
  private def key(p: Params, f: Int, v: Int): Long = {
    var h = (f.toLong << 32 | v) * 0x9e3779b97f4a7c15L
    h ^= h >>> 29
    h & ((1L << p.bits) - 1)
  }

  /** Trainer `pid`'s rows: each `fields` keys, then the label (0 or 1), from a hidden model. */
  private[examples] def generate(p: Params, pid: Int): (Array[Array[Long]], Array[Float]) = {
    val truth = new SplittableRandom(p.seed)
    val weight = Array.fill(p.fields, p.vocab)(truth.nextDouble() * 2 - 1)
    val r = new SplittableRandom(p.seed * 31 + pid + 1)
    val keys = Array.ofDim[Array[Long]](p.rowsPerWorker)
    val labels = new Array[Float](p.rowsPerWorker)
    for (i <- 0 until p.rowsPerWorker) {
      val vs = Array.fill(p.fields)(r.nextInt(p.vocab))
      val z = vs.indices.map(f => weight(f)(vs(f))).sum
      labels(i) = if (r.nextDouble() < 1 / (1 + math.exp(-z))) 1f else 0f
      keys(i) = vs.indices.map(f => key(p, f, vs(f))).toArray
    }
    (keys, labels)
  }

  /** One trainer: from the servers' step on, a mini-batch per step. */
  private def trainer(p: Params)(ps: PsClient, parts: Iterator[Int]): Result = {
    val pid = TaskContext.getPartitionId()
    parts.foreach(_ => ())
    val (rows, labels) = generate(p, pid)
    ps.define(p.job)
    var loss = 0.0
    for (step <- ps.step().toInt until p.iters) {
      p.hooks.beforeStep(step)
      val first = (step * p.batch) % rows.length
      val batch = (first until first + p.batch).map(_ % rows.length)
      val keys = batch.flatMap(i => rows(i)).distinct.sorted.toArray
      val at = keys.zipWithIndex.toMap
      val w = new Array[Float](keys.length)
      val bias = new Array[Float](1)
      ps.pull(new PsPulls().sparse("w", keys, w).dense("b", 0, bias)) // both in one round trip
      val b = bias(0)
      val gw = new Array[Float](keys.length)
      var gb = 0f
      loss = 0.0
      for (i <- batch) {
        val z = b + rows(i).map(k => w(at(k))).sum
        val prob = 1 / (1 + math.exp(-z))
        val y = labels(i)
        loss -= (if (y > 0) math.log(prob.max(1e-12)) else math.log((1 - prob).max(1e-12)))
        val err = ((prob - y) / p.batch).toFloat
        rows(i).foreach(k => gw(at(k)) += err)
        gb += err
      }
      ps.push(new PsGradients().sparse("w", keys, gw).dense("b", 0, Array(gb)))
      p.hooks.afterPush(step)
      loss /= p.batch
    }
    // Trainer 0's pull after its last push waits (sync) for every trainer's last push.
    val model = if (pid == 0) ps.pullSparse("w", Array.tabulate(1 << p.bits)(_.toLong)) :+ ps.pullDense("b", 0, 1)(0) else Array.empty[Float]
    Result(model, loss, ps.lostUpdates(), 0)
  }

  /** Trains on `sc`.
    *
    * @param sc the context
    * @param p the parameters
    * @param watch called on the driver with the run's servers once they run (tests look at them)
    * @return trainer 0's result, with every trainer's lost updates
    */
  def run(sc: SparkContext, p: Params, watch: PsServers => Unit = _ => ()): Result = {
    val rdd = sc.parallelize(0 until p.workers, p.workers)
    val started = System.nanoTime()
    val onServers: PsServers => Unit = { s => watch(s); p.hooks.onServers(s) }
    p.hooks.around(p.conf) { conf =>
      val results = WarrenSpark.trainPS(rdd, p.workers, p.servers, conf, onServers)(trainer(p))
      results.head.copy(lostUpdates = results.map(_.lostUpdates).sum, seconds = (System.nanoTime() - started) / 1e9)
    }
  }

  /** Entry point for spark-submit: the arguments are [[PsCommandLine]]'s. */
  def main(args: Array[String]): Unit = {
    val p = PsCommandLine.parse(args.toList)
    val sc = new SparkContext(new SparkConf().setAppName("warren-sparse-lr-ps"))
    try {
      WarrenSpark.awaitSlots(sc, p.workers, 120)
      val r = run(sc, p)
      println(f"LOSS ${r.loss}%.10f")
      println(s"LOST_UPDATES ${r.lostUpdates}")
      println(f"TRAIN_SECONDS ${r.seconds}%.3f")
      println(s"MODEL_HASH ${r.modelHash}")
    } finally {
      sc.stop()
    }
  }
}
