package io.warren.examples

import java.nio.ByteBuffer
import java.util.SplittableRandom

import io.warren.{CallOptions, Communicator, Op, RolledBackException, Tracker, ViewChange}
import io.warren.examples.data.{LogisticData, ModelHash}
import io.warren.spark._
import org.apache.spark.{SparkConf, SparkContext, TaskContext}

/** Distributed logistic regression on an RDD with Warren: gradient descent (or L-BFGS,
  * [[Lbfgs]]), one gradient allreduce and one checkpoint per iteration. A lost worker resumes
  * from its peers' checkpoint (retry-one), the stage restarts from the last durable one
  * (`--recovery fail-all --checkpoint-dir DIR`), or an elastic job (`--elastic MIN_WORKERS`)
  * goes on without it. Prints the losses, the accuracy and `MODEL_HASH` (SHA-256 of the
  * weights), the same with and without a failure. The command line is [[CommandLine]]'s; its
  * failures (`--kill-task ITER`, `--kill-executor ITER`, `--pause-ms MS`) are [[FaultHarness]]'s.
  * {{{
  * spark-submit --class io.warren.examples.LogisticRegression --jars $WARREN_JARS \
  *   warren-spark-examples_2.13.jar --workers 3 --rows 100000 --features 20 --iters 20
  * }}}
  */
object LogisticRegression {

  /** The job's parameters.
    *
    * @param workers Warren workers (Spark tasks running together)
    * @param rows rows of synthetic data in all ([[LogisticData]])
    * @param features features per row
    * @param iters iterations at most (one pass over the rows and one allreduce each)
    * @param stepSize the learning rate of gradient descent
    * @param optimizer `gd` (gradient descent) or `lbfgs` ([[Optimizer]])
    * @param lbfgsMemory past steps L-BFGS keeps
    * @param targetLoss stop after the first iteration whose loss is at most this (NaN: never)
    * @param seed seed of the data and of the initial weights
    * @param conf `spark.warren.*` settings for the runner
    * @param hooks calls into the worker loop ([[FaultHarness]] injects failures through them)
    */
  case class Params(workers: Int = 3, rows: Int = 100000, features: Int = 20, iters: Int = 20,
      stepSize: Double = 1.0, optimizer: String = "gd", lbfgsMemory: Int = 10, targetLoss: Double = Double.NaN,
      seed: Long = 20240601L, conf: Map[String, String] = Map("bootstrapCache" -> "true"), hooks: Hooks = Hooks.none) {
    require(Optimizer.names.contains(optimizer), s"optimizer must be gd or lbfgs, got $optimizer")
    require(lbfgsMemory >= 1, s"lbfgs-memory must be at least 1, got $lbfgsMemory")
  }

  /** One worker's result (every worker ends with the same weights and losses): its task id, the
    * wall time of the stage as the driver saw it, the checkpoint version it started from, and,
    * in elastic jobs, its roll-backs (the version of the last, -1: none), the final view's size
    * (0: it left the job) and each view change as (version, old size, new size).
    */
  case class Result(weights: Array[Double], losses: Array[Double], accuracy: Double, recoveries: Long,
      seconds: Double, startVersion: Int, iterMs: Double = 0.0, taskId: Int = 0, rollbacks: Int = 0,
      rolledBackTo: Int = -1, world: Int = 0, viewChanges: Seq[(Int, Int, Int)] = Seq.empty) {

    /** SHA-256 of the weights (little-endian doubles), in hex ([[ModelHash]]). */
    def modelHash: String = ModelHash.of(weights)
  }

  /** What each checkpoint holds: the optimizer's state and every iteration's loss so far. */
  private final case class Checkpointed(state: Array[Double], losses: Array[Double])
  private object Checkpointed {
    implicit val codec: Codec[Checkpointed] = Codec.caseClass2(Checkpointed.apply _, Checkpointed.unapply _)
  }

  /** One worker: bootstrap calls, then a checkpointed gradient loop from the last checkpoint. */
  private def worker(p: Params)(comm: Communicator, parts: Iterator[Int]): Result = {
    val pid = TaskContext.getPartitionId()
    val xy = parts.map(LogisticData.generate(p.rows, p.workers, p.features, p.seed, _)).toSeq.headOption.getOrElse(Array.empty[Double])
    // Bootstrap calls: made once before the first checkpoint, replayed to a restarted worker.
    val d = comm.allreduce(Array(p.features + 1), Op.MAX, CallOptions.bootstrap())(0)
    val n = xy.length / (d + 1)
    val initSeed = ByteBuffer.wrap(comm.broadcast(ByteBuffer.allocate(8).putLong(p.seed).array(), 0, CallOptions.bootstrap())).getLong
    def restore(c: Option[Checkpointed]): (Optimizer, Array[Double]) = {
      val Checkpointed(state, losses) = c.getOrElse { // a fresh start: small random weights
        val r = new SplittableRandom(initSeed ^ 0x5deece66dL)
        val w = Array.fill(d)(r.nextDouble(-0.01, 0.01))
        Checkpointed(Optimizer.initial(p.optimizer, w, p.lbfgsMemory), new Array[Double](p.iters))
      }
      (Optimizer(p.optimizer, state, p.stepSize), losses)
    }
    val loaded = comm.loadCheckpointAs[Checkpointed]
    val startVersion = loaded.fold(0)(_._1)
    var (opt, losses) = restore(loaded.map(_._2))
    var it = startVersion
    val hooks = p.hooks.worker(p.workers, comm)
    val buf = new Array[Double](d + 2)
    var (rollbacks, rolledBackTo, left) = (0, -1, false)
    val views = Seq.newBuilder[(Int, Int, Int)]
    // Elastic jobs: the view changed (a worker joined, left, or was given up on). The gradient
    // is the mean over the members' rows (the row count is allreduced): nothing rescales.
    def viewChanged(): Option[ViewChange] = Option(comm.takeViewChange()).map { c =>
      left = c.left()
      System.err.println(s"task $pid: view changed after checkpoint ${comm.version()}: $c")
      views += ((comm.version(), c.oldWorldSize(), c.newWorldSize()))
      c
    }
    // Stop after the first iteration whose loss reached the target (from the checkpointed losses).
    def reached(it: Int): Boolean = it > 0 && losses(it - 1) <= p.targetLoss
    val loopStart = System.nanoTime()
    var done: Result = null
    while (done == null) {
      try {
        while (it < p.iters && !reached(it) && !left) {
          hooks.beforeIteration(it)
          java.util.Arrays.fill(buf, 0.0)
          LogisticData.accumulate(xy, n, d, opt.point, buf)
          buf(d + 1) = n.toDouble
          comm.allreduce(buf, Op.SUM)
          hooks.afterAllreduce(it)
          losses(it) = buf(d) / buf(d + 1)
          opt.step(losses(it), buf, buf(d + 1), last = losses(it) <= p.targetLoss)
          comm.checkpoint(Checkpointed(opt.state, losses))
          hooks.afterCheckpoint(it, viewChanged())
          it += 1
        }
        val iterMs = if (it > startVersion) (System.nanoTime() - loopStart) / 1e6 / (it - startVersion) else 0.0
        def result(accuracy: Double, world: Int) = Result(opt.weights.clone(), losses.take(it), accuracy,
          comm.recoveries(), 0.0, startVersion, iterMs, pid, rollbacks, rolledBackTo, world, views.result())
        if (left) { // removed from the job: no more collective calls
          hooks.afterLeaving(it)
          done = result(Double.NaN, 0).copy(iterMs = 0.0)
        } else {
          val acc = comm.allreduce(Array(LogisticData.correct(xy, n, d, opt.weights).toDouble, n.toDouble), Op.SUM)
          done = result(acc(0) / acc(1), comm.worldSize())
        }
      } catch {
        // Elastic jobs: a lost worker was dropped from the view, and the calls since the last
        // checkpoint did not count: go on from it with the workers left.
        case e: RolledBackException =>
          val c = comm.loadCheckpointAs[Checkpointed]
          it = c.fold(0)(_._1)
          System.err.println(s"task $pid: ${e.getMessage}; going on from checkpoint $it with ${comm.worldSize()} workers")
          viewChanged()
          restore(c.map(_._2)) match { case (o, l) => opt = o; losses = l }
          rollbacks += 1
          rolledBackTo = it
      }
    }
    done
  }

  /** Trains on `sc` (which needs `p.workers` free task slots) and returns rank 0's result. */
  def run(sc: SparkContext, p: Params): Result = runAll(sc, p).head

  /** Trains on `sc` and returns every worker's result (elastic jobs: the final view's members)
    * in task-id order; `onTracker` is given the job's tracker before any task starts.
    */
  def runAll(sc: SparkContext, p: Params, onTracker: Tracker => Unit = _ => ()): Seq[Result] = {
    val rdd = sc.parallelize(0 until p.workers, p.workers) // one partition per worker
    val started = System.nanoTime()
    val results = WarrenSpark.train(rdd, p.workers, p.conf, onTracker)(worker(p))
    results.map(_.copy(seconds = (System.nanoTime() - started) / 1e9))
  }

  /** Entry point for spark-submit: the arguments are [[CommandLine]]'s. */
  def main(args: Array[String]): Unit = {
    val p = CommandLine.parse(args.toList)
    val sc = new SparkContext(new SparkConf().setAppName("warren-logistic-regression"))
    try {
      WarrenSpark.awaitSlots(sc, p.workers, 120) // a fresh context's executors register in seconds
      val r = run(sc, p)
      r.losses.zipWithIndex.foreach { case (l, i) => println(f"iter ${i + 1}%3d loss $l%.10f") }
      println(f"ACCURACY ${r.accuracy}%.6f")
      println(s"RECOVERIES ${r.recoveries}")
      println(f"TRAIN_SECONDS ${r.seconds}%.3f")
      println(f"ITER_MS ${r.iterMs}%.3f")
      println(s"MODEL_HASH ${r.modelHash}")
    } finally sc.stop()
  }
}
