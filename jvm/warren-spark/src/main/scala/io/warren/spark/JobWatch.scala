package io.warren.spark

import java.util.concurrent.{ConcurrentHashMap, ConcurrentLinkedQueue}

import scala.jdk.CollectionConverters._

import org.apache.spark.{ExceptionFailure, Success, TaskKilled}
import org.apache.spark.scheduler.{SparkListener, SparkListenerStageSubmitted, SparkListenerTaskEnd, SparkListenerTaskStart}

/** Watches the stages of one Warren run on the driver: records which worker tasks failed (to
  * name them when the job fails) and, in fail-all mode, reports the first failure of each
  * attempt of the workers' barrier stage (so that the runner closes that attempt's tracker and
  * the surviving tasks of the attempt fail at once instead of waiting for a replacement that
  * Spark will never send).
  *
  * @param runId the value of the local property [[JobWatch.RunKey]] of the run's jobs
  * @param workersRddId the id of the RDD whose tasks are the workers
  * @param failAll the run is fail-all: count only the first failed task of each stage attempt
  *   as lost (the other tasks of the attempt fail because of it), and number worker attempts
  *   as [[JobWatch.workerAttempt]] does
  * @param onWorkerFailure called (on the listener thread) with the stage attempt number of
  *   every failed or killed worker task
  * @param onFinalFailure called (on the listener thread) with the stage id and the failure,
  *   once, when a worker task fails with an error that cannot succeed on retry
  *   ([[JobWatch.FinalErrors]]): the runner stops the job rather than let Spark retry it
  */
private[spark] final class JobWatch(
    val runId: String,
    workersRddId: Int,
    failAll: Boolean,
    onWorkerFailure: Int => Unit,
    onFinalFailure: (Int, String) => Unit = (_, _) => ()
) extends SparkListener {
  @volatile private var finalError: Option[(Int, String)] = None
  private val stages = ConcurrentHashMap.newKeySet[Int]()
  private val workerStages = ConcurrentHashMap.newKeySet[Int]()
  private val failures = new ConcurrentLinkedQueue[(Int, String)]()
  private val failedAttempts = ConcurrentHashMap.newKeySet[(Int, Int)]()
  // Running worker task attempts: Spark task id -> (partition, worker attempt, executor).
  private val running = new ConcurrentHashMap[Long, (Int, Int, String)]()
  // Worker attempts that ended: (partition, worker attempt).
  private val ended = ConcurrentHashMap.newKeySet[(Int, Int)]()

  override def onTaskStart(e: SparkListenerTaskStart): Unit =
    if (workerStages.contains(e.stageId)) {
      val attempt = JobWatch.workerAttempt(failAll, e.stageAttemptId, e.taskInfo.attemptNumber)
      running.put(e.taskInfo.taskId, (e.taskInfo.partitionId, attempt, e.taskInfo.executorId))
    }

  override def onStageSubmitted(e: SparkListenerStageSubmitted): Unit = {
    val props = e.properties
    if (props != null && runId == props.getProperty(JobWatch.RunKey)) {
      stages.add(e.stageInfo.stageId)
      if (e.stageInfo.rddInfos.exists(_.id == workersRddId)) workerStages.add(e.stageInfo.stageId)
    }
  }

  override def onTaskEnd(e: SparkListenerTaskEnd): Unit = {
    if (!stages.contains(e.stageId)) return
    Option(running.remove(e.taskInfo.taskId)).foreach { case (p, attempt, _) => ended.add((p, attempt)) }
    e.reason match {
      case Success =>
      case _: TaskKilled =>
        if (workerStages.contains(e.stageId)) onWorkerFailure(e.stageAttemptId)
      case f: ExceptionFailure if workerStages.contains(e.stageId) && JobWatch.FinalErrors(f.className) =>
        failures.add((e.taskInfo.partitionId, f.toErrorString.linesIterator.take(1).toList.headOption.getOrElse("")))
        if (finalError.isEmpty) {
          finalError = Some((e.taskInfo.partitionId, s"${f.className.split('.').last}: ${f.description}"))
          onFinalFailure(e.stageId, f.description)
        }
        onWorkerFailure(e.stageAttemptId)
      case other =>
        if (workerStages.contains(e.stageId)) {
          val first = failedAttempts.add((e.stageId, e.stageAttemptId))
          if (first || !failAll) {
            failures.add((e.taskInfo.partitionId, other.toString.linesIterator.take(1).toList.headOption.getOrElse("")))
          }
          onWorkerFailure(e.stageAttemptId)
        }
    }
  }

  /** Waits until every worker task attempt that started has ended, as the listener bus
    * reports (after a failed job, the tasks Spark kills free their slots only as each ends).
    *
    * @param sc the context (whose listener bus is drained first)
    * @param timeoutMs the most milliseconds to wait
    * @return whether none runs any more
    */
  def awaitTasksEnded(sc: org.apache.spark.SparkContext, timeoutMs: Long): Boolean = {
    val deadline = System.nanoTime() + timeoutMs * 1000000L
    // The listener bus may not have delivered the tasks' starts yet: let it catch up first.
    org.apache.spark.WarrenSlots.drainListeners(sc, timeoutMs)
    while (!running.isEmpty && System.nanoTime() < deadline) Thread.sleep(20)
    running.isEmpty
  }

  /** A worker's task attempt, if it runs, as the listener bus has reported so far.
    *
    * @param partition the task id (partition id)
    * @param attempt the worker attempt ([[JobWatch.workerAttempt]], what it registered with)
    * @return its Spark task id and executor id, if it runs
    */
  def runningAttempt(partition: Int, attempt: Int): Option[(Long, String)] =
    running.asScala.collectFirst { case (taskId, (p, a, executor)) if p == partition && a == attempt => (taskId, executor) }

  /** Whether a worker's task attempt has ended, as the listener bus has reported so far.
    *
    * @param partition the task id (partition id)
    * @param attempt the worker attempt ([[JobWatch.workerAttempt]])
    */
  def hasEnded(partition: Int, attempt: Int): Boolean = ended.contains((partition, attempt))

  /** Whether a worker task attempt is still running, as the listener bus has reported so far.
    *
    * @param taskId the Spark task id
    * @return true until its end is reported
    */
  def isRunning(taskId: Long): Boolean = running.containsKey(taskId)

  /** The first worker failure that cannot succeed on retry, if any: its task id and error. */
  def finalFailure: Option[(Int, String)] = finalError

  /** The failed worker tasks so far (not those Spark killed), as task id -> failed attempts,
    * in task-id order.
    */
  def failedTasks: Seq[(Int, Int)] =
    failures.asScala.toSeq.groupBy(_._1).map { case (id, fs) => id -> fs.size }.toSeq.sortBy(_._1)
}

/** The local property that marks a Warren run's jobs. */
private[spark] object JobWatch {

  /** Key of the local property holding the run id. */
  val RunKey = "warren.run.id"

  /** How long a failed run waits for its killed tasks to end (milliseconds). */
  val KilledTasksWaitMs = 10000L

  /** The exceptions of native errors that cannot succeed on retry (`warren::Error::is_final`):
    * a collective call that differs between ranks, a bad setting, another dataset than the
    * job's, a job that cannot be recovered; and a typed checkpoint that the worker's codec
    * cannot read (`io.warren.scaladsl.CheckpointFormatException`: a re-run reads the same bytes).
    */
  val FinalErrors: Set[String] = Set(
    "io.warren.CollectiveMismatchException",
    "io.warren.WarrenConfigException",
    "io.warren.DatasetMismatchException",
    "io.warren.RecoveryImpossibleException",
    "io.warren.JobFailedException",
    "io.warren.scaladsl.CheckpointFormatException"
  )

  /** The attempt number a worker task registers with (`WARREN_ATTEMPT`): Spark's attempt
    * number; in fail-all runs plus the stage attempt, since in a re-run barrier stage every
    * task's attempt number is 0 again.
    *
    * @param failAll the run is fail-all
    * @param stageAttempt the stage attempt number
    * @param attemptNumber the task's attempt number
    */
  def workerAttempt(failAll: Boolean, stageAttempt: Int, attemptNumber: Int): Int =
    if (failAll) stageAttempt + attemptNumber else attemptNumber
}
