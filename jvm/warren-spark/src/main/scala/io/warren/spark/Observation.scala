package io.warren.spark

import java.util.concurrent.atomic.AtomicLong

import scala.util.control.NonFatal

import io.warren.Communicator
import org.apache.spark.{SparkContext, TaskContext}
import org.apache.spark.util.LongAccumulator
import org.slf4j.LoggerFactory

/** The task side of a Warren job's observability, shipped with each task.
  *
  * @param label the job's label
  * @param recoveries the `warren.recoveries` accumulator
  * @param progressIntervalS seconds between rank 0's progress lines, 0 for none
  */
private[spark] final case class TaskProbe(label: String, recoveries: LongAccumulator, progressIntervalS: Double) {

  /** `f` with progress reports (rank 0) and the accumulator: a finished task adds its attempt
    * number (the attempts before it that failed and that it replaced). */
  def wrap[T, R](f: (Communicator, Iterator[T]) => R): (Communicator, Iterator[T]) => R = { (comm, rows) =>
    val reporter =
      if (comm.rank() == 0 && progressIntervalS > 0) Some(Progress.start(comm, label, progressIntervalS)) else None
    val result =
      try f(comm, rows)
      finally reporter.foreach(_.stop())
    reporter.foreach { r =>
      try Progress.report(comm, label, "finished", r.startedAt)
      catch { case NonFatal(e) => TaskProbe.log.warn(s"warren job $label: the last progress line was not sent: $e") }
    }
    Option(TaskContext.get()).foreach(ctx => recoveries.add(ctx.attemptNumber().toLong))
    result
  }
}

private[spark] object TaskProbe {
  private val log = LoggerFactory.getLogger(classOf[TaskProbe])
}

/** The driver side: gives each job a label, the `warren.recoveries` accumulator and the
  * [[WarrenListener]], and logs a line when it ends. */
private[spark] object Observation {
  private val log = LoggerFactory.getLogger("io.warren.spark.WarrenSpark")
  private val jobs = new AtomicLong()

  /** Default seconds between progress lines (`spark.warren.progressInterval`). */
  val DefaultProgressIntervalS = 10.0

  /** Runs `body` (which submits the job's stage) with the job's label set as the local
    * property [[WarrenListener.JobProperty]].
    *
    * @param sc the context
    * @param numWorkers the job's workers (for the log line)
    * @param interval seconds between rank 0's progress lines (`spark.warren.progressInterval`), 0 for none
    * @param body submits the stage, shipping the probe to its tasks
    * @return what `body` returns
    */
  def around[R](sc: SparkContext, numWorkers: Int, interval: Double)(body: TaskProbe => R): R = {
    WarrenListener.of(sc)
    val label = jobs.incrementAndGet().toString
    val acc = sc.longAccumulator(WarrenListener.RecoveriesAccumulator)
    val previous = sc.getLocalProperty(WarrenListener.JobProperty)
    val started = System.nanoTime()
    sc.setLocalProperty(WarrenListener.JobProperty, label)
    try {
      val r = body(TaskProbe(label, acc, interval))
      log.info(
        f"warren job $label: $numWorkers workers finished in ${(System.nanoTime() - started) / 1e9}%.2f s; " +
          s"${acc.value} re-run task(s) recovered from their peers"
      )
      r
    } finally sc.setLocalProperty(WarrenListener.JobProperty, previous)
  }
}
