package io.warren.spark

import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.AtomicLong

import scala.collection.mutable

import org.apache.spark.{SparkContext, TaskFailedReason, TaskKilled}
import org.apache.spark.scheduler._
import org.slf4j.LoggerFactory

/** What happened to the tasks of one Warren job, as Spark's scheduler reported it.
  *
  * @param label the job's label (the `warren.job` local property the runner sets)
  * @param failedAttempts task attempts that failed or were killed
  * @param recoveredTasks re-run task attempts that finished (each recovered from its peers)
  * @param recoveriesAccumulator the stage's value of the `warren.recoveries` accumulator (the one
  *   the Spark UI shows), if it had one
  */
final case class WarrenJobSummary(label: String, failedAttempts: Long, recoveredTasks: Long, recoveriesAccumulator: Option[Long])

/** A `SparkListener` that logs (SLF4J logger `io.warren.spark.WarrenListener`) what happens
  * to the tasks of Warren jobs: a failed attempt ("Spark re-runs it; the other workers wait"),
  * a re-run attempt starting and finishing ("re-run, recovered from its peers"), and a summary
  * when the stage ends, with the `warren.recoveries` accumulator the Spark UI shows on the
  * stage page. Stages of other jobs are ignored. It also keeps the [[board]] that the Spark
  * UI's Warren tab shows: each job's tasks, and their checkpoint versions from the executors'
  * heartbeats.
  *
  * [[WarrenSpark.train]] installs one per SparkContext ([[WarrenListener.of]]); don't also
  * list it in `spark.extraListeners` (the lines would appear twice).
  */
class WarrenListener extends SparkListener {
  private val log = LoggerFactory.getLogger(classOf[WarrenListener])
  private val stageJob = new ConcurrentHashMap[Int, String]()
  private val jobStages = new ConcurrentHashMap[Int, (String, Seq[Int])]()
  private val failed = new ConcurrentHashMap[String, AtomicLong]()
  private val recovered = new ConcurrentHashMap[String, AtomicLong]()
  private val done = mutable.ArrayBuffer.empty[WarrenJobSummary]

  /** The jobs of this context, as the Warren tab shows them. */
  val board: JobBoard = new JobBoard()

  private def count(m: ConcurrentHashMap[String, AtomicLong], label: String): AtomicLong =
    m.computeIfAbsent(label, _ => new AtomicLong())

  private def warren(stageId: Int)(body: String => Unit): Unit =
    Option(stageJob.get(stageId)).foreach(body)

  override def onJobStart(e: SparkListenerJobStart): Unit = {
    val label = Option(e.properties).flatMap(p => Option(p.getProperty(WarrenListener.JobProperty)))
    label.foreach { l =>
      e.stageIds.foreach(stageJob.put(_, l))
      jobStages.put(e.jobId, (l, e.stageIds))
    }
  }

  override def onTaskStart(e: SparkListenerTaskStart): Unit = warren(e.stageId) { label =>
    val t = e.taskInfo
    board.taskStarted(label, t.taskId, t.partitionId, t.attemptNumber, e.stageAttemptId, t.executorId, t.host)
    if (t.attemptNumber > 0) {
      log.warn(
        s"warren job $label: task of partition ${t.partitionId} re-run (attempt ${t.attemptNumber}) on " +
          s"executor ${t.executorId}: it asks its peers for the last checkpoint"
      )
    }
  }

  override def onExecutorMetricsUpdate(e: SparkListenerExecutorMetricsUpdate): Unit =
    e.accumUpdates.foreach { case (taskId, _, _, updates) =>
      if (board.tracks(taskId)) WarrenListener.checkpointVersion(updates, _.update).foreach(board.taskProgress(taskId, _))
    }

  override def onTaskEnd(e: SparkListenerTaskEnd): Unit = warren(e.stageId) { label =>
    val t = e.taskInfo
    val state = if (t.successful) "finished" else if (e.reason.isInstanceOf[TaskKilled]) "killed" else "failed"
    board.taskEnded(t.taskId, state, WarrenListener.checkpointVersion(t.accumulables.toSeq, _.update))
    if (t.successful) {
      if (t.attemptNumber > 0) {
        count(recovered, label).incrementAndGet()
        log.warn(
          s"warren job $label: task of partition ${t.partitionId} attempt ${t.attemptNumber} finished: " +
            "re-run and recovered from its peers"
        )
      }
    } else {
      count(failed, label).incrementAndGet()
      val why = e.reason match {
        case r: TaskFailedReason => r.toErrorString.linesIterator.take(1).toList.headOption.getOrElse("")
        case other               => other.toString
      }
      log.warn(
        s"warren job $label: task of partition ${t.partitionId} attempt ${t.attemptNumber} failed ($why); " +
          "Spark re-runs it and the other workers wait for it in their next collective call"
      )
    }
  }

  override def onStageCompleted(e: SparkListenerStageCompleted): Unit = {
    val info = e.stageInfo
    warren(info.stageId) { label =>
      val acc = info.accumulables.values
        .find(_.name.contains(WarrenListener.RecoveriesAccumulator))
        .flatMap(_.value)
        .collect { case n: java.lang.Number => n.longValue() }
      info.failureReason match {
        case Some(why) =>
          log.warn(s"warren job $label: stage ${info.stageId} (attempt ${info.attemptNumber()}) failed: $why")
        // The workers' stage (the only one whose tasks update the accumulator; fail-all
        // jobs hand the results over through a second stage).
        case None if acc.isDefined =>
          val s = WarrenJobSummary(label, count(failed, label).get(), count(recovered, label).get(), acc)
          log.info(
            s"warren job $label: stage ${info.stageId} finished; ${s.failedAttempts} failed task attempt(s), " +
              s"${s.recoveredTasks} re-run task(s) recovered from peers, ${WarrenListener.RecoveriesAccumulator} = ${acc.get}"
          )
          done.synchronized {
            done += s
            if (done.size > WarrenListener.KeptSummaries) done.remove(0)
          }
        case None => ()
      }
    }
  }

  override def onJobEnd(e: SparkListenerJobEnd): Unit =
    Option(jobStages.remove(e.jobId)).foreach { case (label, stages) =>
      stages.foreach(stageJob.remove)
      failed.remove(label)
      recovered.remove(label)
    }

  /** Summaries of the Warren jobs whose stage has ended (the last
    * [[WarrenListener.KeptSummaries]]), oldest first.
    *
    * @return a copy
    */
  def summaries: Seq[WarrenJobSummary] = done.synchronized(done.toList)
}

/** The listener of each SparkContext, and the names it relies on. */
object WarrenListener {

  /** Local property the runner sets to the job's label while its stage runs. */
  val JobProperty = "warren.job"

  /** Name of the accumulator (shown on the Spark UI's stage page) that counts the re-run task
    * attempts of a Warren job that finished, i.e. workers that recovered from their peers. */
  val RecoveriesAccumulator = "warren.recoveries"

  /** The [[CheckpointVersionAccumulator]]'s value among a task's accumulator updates.
    *
    * @param updates the task's accumulables (a heartbeat's or its end's)
    * @param value which value of an entry to read (a heartbeat carries the task's in `update`)
    * @return the version, if the updates hold one
    */
  private[spark] def checkpointVersion(updates: Seq[AccumulableInfo], value: AccumulableInfo => Option[Any]): Option[Long] =
    updates
      .find(_.name.contains(CheckpointVersionAccumulator.Name))
      .flatMap(value)
      .collect { case n: java.lang.Number => n.longValue() }

  /** How many job summaries a listener keeps. */
  val KeptSummaries = 1000

  private val installed = new java.util.WeakHashMap[SparkContext, WarrenListener]()

  /** The listener installed on `sc`, installing it on first use.
    *
    * @param sc the context
    * @return its listener
    */
  def of(sc: SparkContext): WarrenListener = installed.synchronized {
    Option(installed.get(sc)).getOrElse {
      val l = new WarrenListener
      sc.addSparkListener(l)
      org.apache.spark.warren.WarrenTab.attach(sc, l.board)
      installed.put(sc, l)
      l
    }
  }
}
