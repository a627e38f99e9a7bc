package io.warren.spark

import java.util.concurrent.atomic.AtomicLong

import io.warren.Communicator
import org.apache.spark.{SparkContext, TaskContext}
import org.apache.spark.util.LongAccumulator
import org.slf4j.LoggerFactory

/** The task side of a Warren job's observability, shipped with each task.
  *
  * @param label the job's label
  * @param recoveries the `warren.recoveries` accumulator
  * @param progressIntervalS seconds between rank 0's progress lines, 0 for none
  * @param versions the `warren.checkpointVersion` accumulator
  */
private[spark] final case class TaskProbe(
    label: String,
    recoveries: LongAccumulator,
    progressIntervalS: Double,
    versions: CheckpointVersionAccumulator
) {

  /** Records a checkpoint the worker committed, for the driver's Warren tab (sent with the
    * executor's next heartbeat).
    *
    * @param version the version committed
    */
  def checkpointed(version: Int): Unit = versions.add(version.toLong)

  /** `f` with the accumulator: a finished task adds its attempt number (the attempts before it
    * that failed and that it replaced). Rank 0's progress lines are `io.warren.runner.Progress`,
    * started by the worker body (`io.warren.runner.WorkerRun`) with [[label]] and
    * [[progressIntervalS]]. */
  def wrap[T, R](f: (Communicator, Iterator[T]) => R): (Communicator, Iterator[T]) => R = { (comm, rows) =>
    val result = f(comm, rows)
    Option(TaskContext.get()).foreach(ctx => recoveries.add(ctx.attemptNumber().toLong))
    result
  }
}

/** The driver side: gives each job a label, a description in the Spark UI (`warren job 3: 4
  * workers, retry-one`), the `warren.recoveries` and `warren.checkpointVersion` accumulators
  * and the [[WarrenListener]] (whose board the Warren tab shows), and logs a line when it
  * ends. */
private[spark] object Observation {
  private val log = LoggerFactory.getLogger("io.warren.spark.WarrenSpark")
  private val jobs = new AtomicLong()

  /** Default seconds between progress lines (`spark.warren.progressInterval`). */
  val DefaultProgressIntervalS: Double = io.warren.runner.RunnerSettings.DEFAULT_PROGRESS_INTERVAL_S

  /** Runs `body` (which submits the job's stage) with the job's label set as the local
    * property [[WarrenListener.JobProperty]].
    *
    * @param sc the context
    * @param numWorkers the job's workers (for the log line)
    * @param interval seconds between rank 0's progress lines (`spark.warren.progressInterval`), 0 for none
    * @param recovery the recovery mode, as the Warren tab shows it (`retry-one`, `fail-all`,
    *   `retry-one, elastic`)
    * @param body submits the stage, shipping the probe to its tasks
    * @return what `body` returns
    */
  def around[R](sc: SparkContext, numWorkers: Int, interval: Double, recovery: String)(body: TaskProbe => R): R = {
    val board = WarrenListener.of(sc).board
    val label = jobs.incrementAndGet().toString
    val acc = sc.longAccumulator(WarrenListener.RecoveriesAccumulator)
    val versions = new CheckpointVersionAccumulator
    sc.register(versions, CheckpointVersionAccumulator.Name)
    val previous = sc.getLocalProperty(WarrenListener.JobProperty)
    val previousDescription = sc.getLocalProperty("spark.job.description")
    val started = System.nanoTime()
    sc.setLocalProperty(WarrenListener.JobProperty, label)
    sc.setJobDescription(s"warren job $label: $numWorkers workers, $recovery")
    board.jobStarted(label, numWorkers, recovery)
    var failure: Option[String] = Some("the driver stopped waiting for it")
    try {
      val r = body(TaskProbe(label, acc, interval, versions))
      failure = None
      log.info(
        f"warren job $label: $numWorkers workers finished in ${(System.nanoTime() - started) / 1e9}%.2f s; " +
          s"${acc.value} re-run task(s) recovered from their peers"
      )
      r
    } catch {
      case e: Throwable =>
        failure = Some(Option(e.getMessage).flatMap(_.linesIterator.take(1).toList.headOption).getOrElse(e.toString))
        throw e
    } finally {
      board.jobEnded(label, failure)
      sc.setLocalProperty(WarrenListener.JobProperty, previous)
      sc.setLocalProperty("spark.job.description", previousDescription)
    }
  }
}
