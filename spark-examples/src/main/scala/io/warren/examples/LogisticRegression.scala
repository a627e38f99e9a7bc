package io.warren.examples

import java.nio.{ByteBuffer, ByteOrder}
import java.security.MessageDigest
import java.util.SplittableRandom

import io.warren.{CallOptions, Communicator, Op, RolledBackException, Tracker}
import io.warren.spark._
import org.apache.spark.{SparkConf, SparkContext, TaskContext}

/** Distributed logistic regression on an RDD with Warren: full-batch gradient descent (or
  * L-BFGS with `--optimizer lbfgs`), one gradient allreduce and one checkpoint per iteration,
  * and retry-one recovery.
  *
  * {{{
  * spark-submit --master 'local-cluster[3,1,1024]' --class io.warren.examples.LogisticRegression \
  *   --jars warren-core.jar,warren-runner.jar,warren-scala_2.13.jar,warren-spark_2.13.jar warren-spark-examples_2.13.jar \
  *   --workers 3 --rows 100000 --features 20 --iters 20 --kill-executor 8
  * }}}
  *
  * With `--recovery fail-all --checkpoint-dir DIR` the workers run as a barrier stage that
  * Spark re-runs whole after a failure, every worker resuming from the last durable checkpoint.
  *
  * With `--target-loss X` the training stops at the first iteration whose loss is at most `X`
  * (every worker sees the same allreduced loss, so all stop together).
  *
  * Prints the loss per iteration, the training accuracy and `MODEL_HASH <hex>` (SHA-256 of the
  * final weights as little-endian doubles), which is the same with and without a failure.
  */
object LogisticRegression {

  /** The job's parameters.
    *
    * @param workers Warren workers (Spark tasks running together)
    * @param rows rows of synthetic data in all
    * @param features features per row
    * @param iters iterations at most (one pass over the rows and one allreduce each)
    * @param stepSize the learning rate of gradient descent
    * @param optimizer `gd` (gradient descent with `stepSize`) or `lbfgs` (L-BFGS, [[Lbfgs]])
    * @param lbfgsMemory past steps L-BFGS keeps
    * @param targetLoss stop after the first iteration whose loss is at most this (NaN: never)
    * @param seed seed of the data and of the initial weights
    * @param killTask throw in partition 1's first attempt at this iteration (-1: never)
    * @param killExecutor halt partition 1's executor JVM (first attempt) at this iteration (-1: never)
    * @param pauseMs milliseconds each worker sleeps after each checkpoint (0: none; gives a test
    *   time to kill a process from outside mid-run; the model does not change)
    * @param pauseUntilGrown in an elastic job, stop pausing once this worker is in a view of all
    *   `workers` it joined late or grew back to (a test that waits for a join pays for the wait
    *   only; before the join the pace is as with `pauseMs` alone)
    * @param conf `spark.warren.*` settings for the runner
    * @param failures more injected failures (tests)
    */
  case class Params(
      workers: Int = 3,
      rows: Int = 100000,
      features: Int = 20,
      iters: Int = 20,
      stepSize: Double = 1.0,
      optimizer: String = "gd",
      lbfgsMemory: Int = 10,
      targetLoss: Double = Double.NaN,
      seed: Long = 20240601L,
      killTask: Int = -1,
      killExecutor: Int = -1,
      pauseMs: Int = 0,
      pauseUntilGrown: Boolean = false,
      conf: Map[String, String] = Map("bootstrapCache" -> "true"),
      failures: Seq[Failure] = Nil
  ) {
    require(Set("gd", "lbfgs").contains(optimizer), s"optimizer must be gd or lbfgs, got $optimizer")
    require(lbfgsMemory >= 1, s"lbfgs-memory must be at least 1, got $lbfgsMemory")

    /** Every injected failure, `killTask` and `killExecutor` included. */
    def allFailures: Seq[Failure] =
      failures ++ Seq(Failure(1, killTask), Failure(1, killExecutor, halt = true)).filter(_.iter >= 0)
  }

  /** A failure injected at the start of an iteration, in the attempts of one task numbered
    * below `attempts` (the attempt number counts Spark's task attempts and, in fail-all mode,
    * its stage attempts).
    *
    * @param partition the task (partition) that fails
    * @param iter the iteration at whose start it fails
    * @param halt halt the executor JVM (`Runtime.halt`) instead of throwing
    * @param attempts how many attempts fail (1: the first only)
    * @param pause pause the executor JVM with SIGSTOP instead of throwing (as a frozen VM would:
    *   every thread stops, no socket closes); it goes on only if someone continues it
    * @param afterLeaving elastic jobs: fail right after this worker left the job (it was
    *   removed), in place of at `iter` (give -1)
    */
  case class Failure(
      partition: Int,
      iter: Int,
      halt: Boolean = false,
      attempts: Int = 1,
      pause: Boolean = false,
      afterLeaving: Boolean = false
  )

  /** What a run gives back (rank 0's view; every rank has the same).
    *
    * @param weights the final weights (the last one is the intercept)
    * @param losses the mean log loss of each iteration's pass (as many as iterations ran)
    * @param accuracy training accuracy of the final weights
    * @param recoveries recoveries rank 0 took part in
    * @param seconds wall time of the Warren stage as the driver saw it
    * @param startVersion the checkpoint version rank 0 started from (0 unless it was restarted)
    * @param iterMs milliseconds per gradient iteration of rank 0's loop (its wall time / iterations)
    * @param taskId the worker's task id (its partition)
    * @param rollbacks elastic jobs: how many times this worker rolled back (a lost worker was
    *   dropped from the view: `RolledBackException`)
    * @param rolledBackTo elastic jobs: the checkpoint version of the last roll-back (-1: none)
    * @param world the number of workers in the view at the end (0: this worker left the job)
    * @param viewChanges elastic jobs: each change of membership this worker was told of
    *   (`Communicator.takeViewChange()`), as (checkpoint version, old world size, new world
    *   size), in order
    */
  case class Result(
      weights: Array[Double],
      losses: Array[Double],
      accuracy: Double,
      recoveries: Long,
      seconds: Double,
      startVersion: Int,
      iterMs: Double = 0.0,
      taskId: Int = 0,
      rollbacks: Int = 0,
      rolledBackTo: Int = -1,
      world: Int = 0,
      viewChanges: Seq[(Int, Int, Int)] = Seq.empty
  ) {

    /** SHA-256 of the weights (little-endian doubles), in hex. */
    def modelHash: String = hash(weights)
  }

  /** SHA-256 of `w` as little-endian doubles, in hex.
    *
    * @param w the weights
    * @return 64 hex digits
    */
  def hash(w: Array[Double]): String = {
    val b = ByteBuffer.allocate(8 * w.length).order(ByteOrder.LITTLE_ENDIAN)
    w.foreach(b.putDouble)
    MessageDigest.getInstance("SHA-256").digest(b.array()).map(x => f"$x%02x").mkString
  }

  /** The true weights of the synthetic problem (features + intercept). */
  private def trueWeights(p: Params): Array[Double] = {
    val r = new SplittableRandom(p.seed)
    Array.fill(p.features + 1)(r.nextDouble(-1.0, 1.0))
  }

  /** Partition `pid`'s rows, row-major in `x` (with a trailing 1 for the intercept), labels in `y`. */
  private[examples] def generate(p: Params, pid: Int): (Array[Double], Array[Double]) = {
    val n = p.rows / p.workers + (if (pid < p.rows % p.workers) 1 else 0)
    val d = p.features + 1
    val wt = trueWeights(p)
    val r = new SplittableRandom(p.seed * 1000003L + pid)
    val x = new Array[Double](n * d)
    val y = new Array[Double](n)
    for (i <- 0 until n) {
      var z = 0.0
      for (j <- 0 until d) {
        val v = if (j == p.features) 1.0 else r.nextGaussian()
        x(i * d + j) = v
        z += v * wt(j)
      }
      y(i) = if (r.nextDouble() < 1.0 / (1.0 + math.exp(-3.0 * z))) 1.0 else 0.0
    }
    (x, y)
  }

  /** What each checkpoint holds: the optimizer's state ([[Optimizer.state]]) and the loss of
    * every iteration so far (the rest zero), from which a restored worker decides to stop as
    * the others did.
    */
  private final case class Checkpointed(state: Array[Double], losses: Array[Double])

  private object Checkpointed {
    implicit val codec: Codec[Checkpointed] = Codec.caseClass2(Checkpointed.apply _, Checkpointed.unapply _)
  }

  /** The optimizer's state between iterations: gradient descent's weights or L-BFGS's state. */
  private sealed trait Optimizer {

    /** The point whose loss and gradient the next pass computes. */
    def point: Array[Double]

    /** Takes the pass's mean loss and gradient (`sums(j) / total`); `last` marks the iteration
      * that ends training.
      */
    def step(loss: Double, sums: Array[Double], total: Double, last: Boolean): Unit

    /** The model: the weights the training ends with. */
    def weights: Array[Double]

    /** The state as doubles, for the checkpoint. */
    def state: Array[Double]
  }

  private final class GradientDescent(w: Array[Double], stepSize: Double) extends Optimizer {
    def point: Array[Double] = w
    def step(loss: Double, sums: Array[Double], total: Double, last: Boolean): Unit =
      for (j <- w.indices) w(j) -= stepSize * sums(j) / total
    def weights: Array[Double] = w
    def state: Array[Double] = w
  }

  private final class Quasinewton(o: Lbfgs) extends Optimizer {
    def point: Array[Double] = o.trial
    // The iteration that ends training (target loss reached) makes its point the model.
    private val grad = new Array[Double](o.dim)
    def step(loss: Double, sums: Array[Double], total: Double, last: Boolean): Unit = {
      for (j <- grad.indices) grad(j) = sums(j) / total
      o.observe(loss, grad, accept = last)
    }
    def weights: Array[Double] = o.x
    def state: Array[Double] = o.toDoubles
  }

  /** The optimizer at the loaded checkpoint (`None`: a fresh start), and the losses so far. */
  private def restore(p: Params, d: Int, initSeed: Long, loaded: Option[Checkpointed]): (Optimizer, Array[Double]) = {
    val (state, losses) = loaded match {
      case Some(c) => (c.state, c.losses)
      case None =>
        val r = new SplittableRandom(initSeed ^ 0x5deece66dL)
        val w = Array.fill(d)(r.nextDouble(-0.01, 0.01))
        (if (p.optimizer == "gd") w else Lbfgs.start(w, p.lbfgsMemory).toDoubles, new Array[Double](p.iters))
    }
    val opt = if (p.optimizer == "gd") new GradientDescent(state, p.stepSize) else new Quasinewton(Lbfgs.fromDoubles(state))
    (opt, losses)
  }

  /** Adds partition rows' gradient sums at `w` to `buf(0 until d)`, their log-loss sum to `buf(d)`. */
  private def accumulate(x: Array[Double], y: Array[Double], w: Array[Double], buf: Array[Double]): Unit = {
    val d = w.length
    val n = y.length
    // The hot loop: plain while loops (a Scala `for` over a Range goes through a closure that
    // the JIT does not always inline; this is the part the benchmark against MLlib times).
    var i = 0
    while (i < n) {
      var z = 0.0
      val o = i * d
      var j = 0
      while (j < d) {
        z += x(o + j) * w(j)
        j += 1
      }
      val prob = 1.0 / (1.0 + math.exp(-z))
      val g = prob - y(i)
      j = 0
      while (j < d) {
        buf(j) += g * x(o + j)
        j += 1
      }
      // log loss, computed stably
      buf(d) += (if (z > 0) math.log1p(math.exp(-z)) + (1 - y(i)) * z else math.log1p(math.exp(z)) - y(i) * z)
      i += 1
    }
  }

  /** One worker: bootstrap calls, then a checkpointed gradient loop from the last checkpoint. */
  private def worker(p: Params)(comm: Communicator, parts: Iterator[Int]): Result = {
    val pid = TaskContext.getPartitionId()
    // A re-run barrier stage (fail-all) numbers its task attempts from 0 again.
    val attempt = TaskContext.get().attemptNumber() + TaskContext.get().stageAttemptNumber()
    val (x, y) = parts.map(generate(p, _)).toSeq.headOption.getOrElse((Array.empty[Double], Array.empty[Double]))
    // Bootstrap calls (CallOptions.bootstrap()): made once before the first checkpoint, served
    // from the cache to a restarted worker.
    val dims = Array(p.features + 1)
    comm.allreduce(dims, Op.MAX, CallOptions.bootstrap())
    val d = dims(0)
    val seedBytes = comm.broadcast(ByteBuffer.allocate(8).putLong(p.seed).array(), 0, CallOptions.bootstrap())
    val initSeed = ByteBuffer.wrap(seedBytes).getLong
    val loaded = comm.loadCheckpointAs[Checkpointed]
    val startVersion = loaded.fold(0)(_._1)
    var (opt, losses) = restore(p, d, initSeed, loaded.map(_._2))
    val n = y.length
    val buf = new Array[Double](d + 2)
    // Stop after the first iteration whose loss reached the target: decided from the losses,
    // which the checkpoint holds, so a restored worker decides as the others did.
    def reached(it: Int): Boolean = it > 0 && losses(it - 1) <= p.targetLoss
    var it = startVersion
    var (rollbacks, rolledBackTo) = (0, -1)
    val views = Seq.newBuilder[(Int, Int, Int)]
    // Whether this worker is in a view of all `workers` that it joined late or grew back to.
    var grown = startVersion > 0 && comm.worldSize() == p.workers
    // Elastic jobs: the view changed (a worker joined, left, or was given up on). The gradient
    // is already the mean over the members' rows (the row count is allreduced), so nothing
    // rescales; log it and keep it for the result.
    var left = false
    def viewChanged(): Unit = Option(comm.takeViewChange()).foreach { c =>
      grown = c.newWorldSize() == p.workers
      left = c.left()
      System.err.println(s"task $pid: view changed after checkpoint ${comm.version()}: $c")
      views += ((comm.version(), c.oldWorldSize(), c.newWorldSize()))
    }
    val loopStart = System.nanoTime()
    var result: Option[Result] = None
    while (result.isEmpty) {
      try {
        while (it < p.iters && !reached(it) && !left) {
          for (fl <- p.allFailures if fl.partition == pid && fl.iter == it && attempt < fl.attempts) inject(fl, pid, it, attempt)
          java.util.Arrays.fill(buf, 0.0)
          accumulate(x, y, opt.point, buf)
          buf(d + 1) = n.toDouble
          comm.allreduce(buf, Op.SUM)
          val total = buf(d + 1)
          losses(it) = buf(d) / total
          opt.step(losses(it), buf, total, last = losses(it) <= p.targetLoss)
          comm.checkpoint(Checkpointed(opt.state, losses))
          viewChanged()
          if (p.pauseMs > 0 && !(p.pauseUntilGrown && grown)) Thread.sleep(p.pauseMs.toLong)
          it += 1
        }
        val loopMs = (System.nanoTime() - loopStart) / 1e6
        if (left) {
          // Removed from the job: no more collective calls; the model so far is its result.
          for (fl <- p.failures if fl.partition == pid && fl.afterLeaving && attempt < fl.attempts) inject(fl, pid, it, attempt)
          return Result(opt.weights.clone(), losses.take(it), Double.NaN, comm.recoveries(), 0.0, startVersion, 0.0,
            pid, rollbacks, rolledBackTo, 0, views.result())
        }
        val w = opt.weights
        val acc = Array(0.0, n.toDouble)
        for (i <- 0 until n) {
          var z = 0.0
          for (j <- 0 until d) z += x(i * d + j) * w(j)
          if ((z > 0) == (y(i) > 0.5)) acc(0) += 1
        }
        comm.allreduce(acc, Op.SUM)
        val iterMs = if (it > startVersion) loopMs / (it - startVersion) else 0.0
        result = Some(
          Result(w.clone(), losses.take(it), acc(0) / acc(1), comm.recoveries(), 0.0, startVersion, iterMs, pid,
            rollbacks, rolledBackTo, comm.worldSize(), views.result())
        )
      } catch {
        // Elastic jobs: a lost worker was dropped from the view; the calls since the last
        // checkpoint did not count. Go on from it with the workers left (this partition's rows
        // are the same; the lost one's are skipped until it rejoins).
        case e: RolledBackException =>
          val c = comm.loadCheckpointAs[Checkpointed]
          val version = c.fold(0)(_._1)
          System.err.println(s"task $pid: ${e.getMessage}; going on from checkpoint $version with ${comm.worldSize()} workers")
          viewChanged()
          val (o, l) = restore(p, d, initSeed, c.map(_._2))
          opt = o
          losses = l
          it = version
          rollbacks += 1
          rolledBackTo = version
      }
    }
    result.get
  }

  /** Fails this task as `fl` says: halts or pauses its executor JVM, or throws. */
  private def inject(fl: Failure, pid: Int, it: Int, attempt: Int): Unit = {
    if (fl.halt) {
      System.err.println(s"halting this executor at iteration $it (attempt $attempt)")
      Runtime.getRuntime.halt(1)
    }
    if (fl.pause) {
      System.err.println(s"pausing this executor (SIGSTOP) at iteration $it (attempt $attempt)")
      val self = ProcessHandle.current().pid().toString
      new ProcessBuilder("kill", "-STOP", self).inheritIO().start().waitFor()
      throw new RuntimeException(s"task $pid was paused and continued: it was fenced meanwhile")
    }
    throw new RuntimeException(s"injected failure of task $pid at iteration $it (attempt $attempt)")
  }

  /** Trains on `sc`: one partition per worker, each generating its rows deterministically.
    *
    * @param sc the context (needs `p.workers` free task slots)
    * @param p the parameters
    * @return rank 0's result
    */
  def run(sc: SparkContext, p: Params): Result = runAll(sc, p).head

  /** Trains on `sc` as [[run]] does, and returns every worker's result (elastic jobs: those
    * of the final view's members), each with the stage's wall time.
    *
    * @param sc the context
    * @param p the parameters
    * @param onTracker given the job's tracker on the driver before any task starts
    * @return the results in task-id order
    */
  def runAll(sc: SparkContext, p: Params, onTracker: Tracker => Unit = _ => ()): Seq[Result] = {
    val rdd = sc.parallelize(0 until p.workers, p.workers)
    val started = System.nanoTime()
    val results = WarrenSpark.train(rdd, p.workers, p.conf, onTracker)(worker(p))
    val seconds = (System.nanoTime() - started) / 1e9
    results.map(_.copy(seconds = seconds))
  }

  private def parse(args: List[String], p: Params): Params = args match {
    case Nil                            => p
    case "--workers" :: v :: rest       => parse(rest, p.copy(workers = v.toInt))
    case "--rows" :: v :: rest          => parse(rest, p.copy(rows = v.toInt))
    case "--features" :: v :: rest      => parse(rest, p.copy(features = v.toInt))
    case "--iters" :: v :: rest         => parse(rest, p.copy(iters = v.toInt))
    case "--step-size" :: v :: rest     => parse(rest, p.copy(stepSize = v.toDouble))
    case "--optimizer" :: v :: rest     => parse(rest, p.copy(optimizer = v))
    case "--lbfgs-memory" :: v :: rest  => parse(rest, p.copy(lbfgsMemory = v.toInt))
    case "--target-loss" :: v :: rest   => parse(rest, p.copy(targetLoss = v.toDouble))
    case "--seed" :: v :: rest          => parse(rest, p.copy(seed = v.toLong))
    case "--kill-task" :: v :: rest     => parse(rest, p.copy(killTask = v.toInt))
    case "--kill-executor" :: v :: rest => parse(rest, p.copy(killExecutor = v.toInt))
    case "--pause-ms" :: v :: rest      => parse(rest, p.copy(pauseMs = v.toInt))
    case "--pause-until-grown" :: rest  => parse(rest, p.copy(pauseUntilGrown = true))
    case "--recovery" :: v :: rest       => parse(rest, p.copy(conf = p.conf + ("recovery" -> v)))
    case "--checkpoint-dir" :: v :: rest => parse(rest, p.copy(conf = p.conf + ("checkpointDir" -> v)))
    case "--elastic" :: v :: rest        => parse(rest, p.copy(conf = p.conf + ("elastic" -> "true") + ("minWorkers" -> v)))
    case other :: _ =>
      throw new IllegalArgumentException(
        s"unknown argument $other; usage: [--workers N] [--rows N] [--features N] [--iters N] " +
          "[--step-size X] [--optimizer gd|lbfgs] [--lbfgs-memory M] [--target-loss X] [--seed N] [--kill-task ITER] [--kill-executor ITER] [--pause-ms MS] [--pause-until-grown] [--recovery retry-one|fail-all] " +
          "[--checkpoint-dir DIR] [--elastic MIN_WORKERS]"
      )
  }

  /** Entry point for spark-submit (the master comes from spark-submit).
    *
    * @param args see the usage in the error message of an unknown argument
    */
  def main(args: Array[String]): Unit = {
    val p = parse(args.toList, Params())
    val sc = new SparkContext(new SparkConf().setAppName("warren-logistic-regression"))
    try {
      // Executors of a fresh context register a few seconds after it starts.
      WarrenSpark.awaitSlots(sc, p.workers, 120)
      val r = run(sc, p)
      r.losses.zipWithIndex.foreach { case (l, i) => println(f"iter ${i + 1}%3d loss $l%.10f") }
      println(f"ACCURACY ${r.accuracy}%.6f")
      println(s"RECOVERIES ${r.recoveries}")
      println(f"TRAIN_SECONDS ${r.seconds}%.3f")
      println(f"ITER_MS ${r.iterMs}%.3f")
      println(s"MODEL_HASH ${r.modelHash}")
    } finally {
      sc.stop()
    }
  }
}
