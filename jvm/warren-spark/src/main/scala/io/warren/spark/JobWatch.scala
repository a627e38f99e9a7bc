package io.warren.spark

import java.util.concurrent.{ConcurrentHashMap, ConcurrentLinkedQueue}

import scala.jdk.CollectionConverters._

import org.apache.spark.{Success, TaskKilled}
import org.apache.spark.scheduler.{SparkListener, SparkListenerStageSubmitted, SparkListenerTaskEnd, SparkListenerTaskStart}

/** Watches the stages of one Warren run on the driver: records which worker tasks failed (to
  * name them when the job fails) and, in fail-all mode, reports the first failure of each
  * attempt of the workers' barrier stage (so that the runner closes that attempt's tracker and
  * the surviving tasks of the attempt fail at once instead of waiting for a replacement that
  * Spark will never send).
  *
  * @param runId the value of the local property [[JobWatch.RunKey]] of the run's jobs
  * @param workersRddId the id of the RDD whose tasks are the workers
  * @param firstPerAttempt count only the first failed task of each stage attempt as lost
  *   (fail-all: the other tasks of the attempt fail because of it)
  * @param onWorkerFailure called (on the listener thread) with the stage attempt number of
  *   every failed or killed worker task
  */
private[spark] final class JobWatch(
    val runId: String,
    workersRddId: Int,
    firstPerAttempt: Boolean,
    onWorkerFailure: Int => Unit
) extends SparkListener {
  private val stages = ConcurrentHashMap.newKeySet[Int]()
  private val workerStages = ConcurrentHashMap.newKeySet[Int]()
  private val failures = new ConcurrentLinkedQueue[(Int, String)]()
  private val failedAttempts = ConcurrentHashMap.newKeySet[(Int, Int)]()
  // Running worker task attempts: Spark task id -> (partition, executor).
  private val running = new ConcurrentHashMap[Long, (Int, String)]()

  override def onTaskStart(e: SparkListenerTaskStart): Unit =
    if (workerStages.contains(e.stageId)) running.put(e.taskInfo.taskId, (e.taskInfo.partitionId, e.taskInfo.executorId))

  override def onStageSubmitted(e: SparkListenerStageSubmitted): Unit = {
    val props = e.properties
    if (props != null && runId == props.getProperty(JobWatch.RunKey)) {
      stages.add(e.stageInfo.stageId)
      if (e.stageInfo.rddInfos.exists(_.id == workersRddId)) workerStages.add(e.stageInfo.stageId)
    }
  }

  override def onTaskEnd(e: SparkListenerTaskEnd): Unit = {
    if (!stages.contains(e.stageId)) return
    running.remove(e.taskInfo.taskId)
    e.reason match {
      case Success =>
      case _: TaskKilled =>
        if (workerStages.contains(e.stageId)) onWorkerFailure(e.stageAttemptId)
      case other =>
        if (workerStages.contains(e.stageId)) {
          val first = failedAttempts.add((e.stageId, e.stageAttemptId))
          if (first || !firstPerAttempt) {
            failures.add((e.taskInfo.partitionId, other.toString.linesIterator.nextOption().getOrElse("")))
          }
          onWorkerFailure(e.stageAttemptId)
        }
    }
  }

  /** The running attempt of a worker task, as the listener bus has reported so far.
    *
    * @param partition the task id (partition id)
    * @return its Spark task id and executor id, if one runs
    */
  def runningAttempt(partition: Int): Option[(Long, String)] =
    running.asScala.collectFirst { case (taskId, (p, executor)) if p == partition => (taskId, executor) }

  /** Whether a worker task attempt is still running, as the listener bus has reported so far.
    *
    * @param taskId the Spark task id
    * @return true until its end is reported
    */
  def isRunning(taskId: Long): Boolean = running.containsKey(taskId)

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
}
