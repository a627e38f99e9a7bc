package io.warren.examples

import java.nio.file.{Files, Path}

import io.warren.{Communicator, ViewChange}
import io.warren.spark.PsServers
import org.apache.spark.TaskContext

/** Failure injection and pacing for the examples ([[LogisticRegression]], [[KMeans]],
  * [[RecordIOTraining]], [[SparseLogisticRegressionPS]]), for the tests and the demos: the
  * [[FaultHarness.Faults]] go into the job as its [[Hooks]] (`Params(hooks =
  * Faults(killExecutor = 8))`, or `--kill-executor 8` on the command line), the
  * [[FaultHarness.PsFaults]] as its [[PsHooks]].
  */
object FaultHarness {

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
    * @param point where in iteration `iter`: `start` (at its start), `allreduce` (after its
    *   allreduce, before its checkpoint) or `checkpoint` (right after its checkpoint)
    */
  case class Failure(
      partition: Int,
      iter: Int,
      halt: Boolean = false,
      attempts: Int = 1,
      pause: Boolean = false,
      afterLeaving: Boolean = false,
      point: String = "start"
  ) {
    require(points(point), s"point must be start, allreduce or checkpoint, got $point")
  }

  /** Where in an iteration a [[Failure]] may fail. */
  val points: Set[String] = Set("start", "allreduce", "checkpoint")

  /** The failures and pacing of one job.
    *
    * @param killTask throw in partition 1's first attempt at this iteration (-1: never)
    * @param killExecutor halt partition 1's executor JVM (first attempt) at this iteration (-1: never)
    * @param pauseMs milliseconds each worker sleeps after each checkpoint (0: none; gives a test
    *   time to kill a process from outside mid-run; the model does not change)
    * @param pauseUntilGrown in an elastic job, stop pausing once this worker is in a view of all
    *   `workers` it joined late or grew back to (a test that waits for a join pays for the wait
    *   only; before the join the pace is as with `pauseMs` alone)
    * @param pauseUntilFile stop pausing once a file exists at this path ("": never), which a
    *   test on the same machine creates when what it waits for has happened
    * @param failures more injected failures
    * @param killPoint where in their iteration `killTask` and `killExecutor` fail (see [[Failure]])
    */
  case class Faults(
      killTask: Int = -1,
      killExecutor: Int = -1,
      pauseMs: Int = 0,
      pauseUntilGrown: Boolean = false,
      pauseUntilFile: String = "",
      failures: Seq[Failure] = Nil,
      killPoint: String = "start"
  ) extends Hooks {
    require(points(killPoint), s"kill point must be start, allreduce or checkpoint, got $killPoint")

    /** Every injected failure, `killTask` and `killExecutor` included. */
    def allFailures: Seq[Failure] =
      failures ++ Seq(Failure(1, killTask, point = killPoint), Failure(1, killExecutor, halt = true, point = killPoint))
        .filter(_.iter >= 0)

    override def worker(workers: Int, comm: Communicator): WorkerHooks = new FaultyWorker(this, workers, comm)
  }

  /** The faults `hooks` are (none if they are not [[Faults]]). */
  def faults(hooks: Hooks): Faults = hooks match {
    case f: Faults => f
    case _         => Faults()
  }

  /** The faults of `p`'s hooks (none if they are not [[Faults]]). */
  def faults(p: LogisticRegression.Params): Faults = faults(p.hooks)

  /** `p` with its faults changed by `f`.
    *
    * @param p the parameters
    * @param f from the faults `p` has (see [[faults]]) to the ones it gets
    */
  def withFaults(p: LogisticRegression.Params)(f: Faults => Faults): LogisticRegression.Params =
    p.copy(hooks = f(faults(p)))

  /** One worker attempt under `faults`. */
  private final class FaultyWorker(faults: Faults, workers: Int, comm: Communicator) extends WorkerHooks {
    private val pid = TaskContext.getPartitionId()
    // A re-run barrier stage (fail-all) numbers its task attempts from 0 again.
    private val attempt = TaskContext.get().attemptNumber() + TaskContext.get().stageAttemptNumber()
    // Whether this worker is in a view of all `workers` that it joined late or grew back to.
    private var grown = comm.version() > 0 && comm.worldSize() == workers

    override def beforeIteration(it: Int): Unit = injectAt("start", it)

    override def afterAllreduce(it: Int): Unit = injectAt("allreduce", it)

    override def afterCheckpoint(it: Int, change: Option[ViewChange]): Unit = {
      injectAt("checkpoint", it)
      change match {
        case Some(c) => grown = c.newWorldSize() == workers
        case None    => if (comm.worldSize() != workers) grown = false // rolled back to fewer
      }
      if (faults.pauseMs > 0 && !(faults.pauseUntilGrown && grown) && !released) Thread.sleep(faults.pauseMs.toLong)
    }

    /** Whether `pauseUntilFile` exists (checked until it does). */
    private def released: Boolean = {
      if (!wasReleased && faults.pauseUntilFile.nonEmpty) wasReleased = Files.exists(Path.of(faults.pauseUntilFile))
      wasReleased
    }
    private var wasReleased = false

    override def afterLeaving(it: Int): Unit =
      for (fl <- faults.failures if fl.partition == pid && fl.afterLeaving && attempt < fl.attempts) inject(fl, it)

    /** Injects the failures of this task's attempt at `point` of iteration `it`. */
    private def injectAt(point: String, it: Int): Unit =
      for (fl <- faults.allFailures if fl.partition == pid && fl.iter == it && fl.point == point && attempt < fl.attempts)
        inject(fl, it)

    /** Fails this task as `fl` says: halts or pauses its executor JVM, or throws. */
    private def inject(fl: Failure, it: Int): Unit = {
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
      throw new RuntimeException(s"injected failure of task $pid at iteration $it, ${fl.point} (attempt $attempt)")
    }
  }

  /** The failures and pacing of a parameter-server job.
    *
    * @param killTask throw in trainer 1's first attempt at the start of this step (-1: never)
    * @param killServer restart server 0 from its checkpoint once it applied this many steps
    *   (-1: never; with `ps.servers=process`: SIGKILL its process, which the driver restarts).
    *   Without `ps.checkpointDir`, the run gets a temporary one (a checkpoint every 3 steps),
    *   removed when it ends.
    * @param pauseMs milliseconds each trainer sleeps after each push (0: none; gives a restart
    *   time to happen mid-run; the model does not change)
    */
  case class PsFaults(killTask: Int = -1, killServer: Int = -1, pauseMs: Int = 0) extends PsHooks {

    override def around[A](conf: Map[String, String])(body: Map[String, String] => A): A = {
      val own =
        if (killServer >= 0 && !conf.contains("ps.checkpointDir")) Some(Files.createTempDirectory("warren-ps-")) else None
      val settings = conf ++ own.map(d => Map("ps.checkpointDir" -> d.toString, "ps.checkpointEvery" -> "3")).getOrElse(Map.empty)
      try body(settings)
      finally own.foreach(TempDirs.deleteTree)
    }

    override def onServers(servers: PsServers): Unit = if (killServer >= 0) {
      val t = new Thread(() => {
        val deadline = System.nanoTime() + 600L * 1000000000L
        while (servers.status(0).applied() < killServer && System.nanoTime() < deadline) Thread.sleep(5)
        val how = servers.pid(0).fold("restarting")(pid => s"killing (SIGKILL, pid $pid)")
        println(s"$how parameter server 0 at step ${servers.status(0).applied()}")
        servers.restart(0)
      }, "kill-server")
      t.setDaemon(true)
      t.start()
    }

    override def beforeStep(step: Int): Unit = {
      val pid = TaskContext.getPartitionId()
      if (step == killTask && pid == 1 && TaskContext.get().attemptNumber() == 0) {
        throw new IllegalStateException(s"injected failure of trainer $pid at step $step")
      }
    }

    override def afterPush(step: Int): Unit = if (pauseMs > 0) Thread.sleep(pauseMs.toLong)
  }

  /** The parameter-server faults `hooks` are (none if they are not [[PsFaults]]). */
  def psFaults(hooks: PsHooks): PsFaults = hooks match {
    case f: PsFaults => f
    case _           => PsFaults()
  }
}
