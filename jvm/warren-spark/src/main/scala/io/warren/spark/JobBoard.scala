package io.warren.spark

import scala.collection.mutable

/** A worker task attempt of a Warren job, as the driver last heard of it.
  *
  * @param partition the task id (the worker's partition)
  * @param attempt Spark's attempt number of the task (0 for the first run)
  * @param stageAttempt the attempt of the stage it ran in (fail-all jobs re-run the stage)
  * @param executor the executor it ran on
  * @param host that executor's host
  * @param state `running`, `finished`, `failed` or `killed`
  * @param checkpointVersion the checkpoint version its worker committed last, as of the last
  *   executor heartbeat or of its end (0: none heard of yet)
  * @param updatedMs when the driver last heard of it (epoch milliseconds)
  */
final case class WarrenTaskStatus(
    partition: Int,
    attempt: Int,
    stageAttempt: Int,
    executor: String,
    host: String,
    state: String,
    checkpointVersion: Long,
    updatedMs: Long
)

/** One Warren job, as the driver sees it: what the Spark UI's Warren tab shows.
  *
  * @param label the job's label (the `warren.job` local property, numbered from 1 per driver)
  * @param workers the number of workers
  * @param recovery `retry-one` or `fail-all`, with `elastic` for an elastic job
  * @param startedMs when it started (epoch milliseconds)
  * @param endedMs when it ended, if it did
  * @param state `running`, `succeeded` or `failed`
  * @param failure why it failed, if it did
  * @param tasks every task attempt so far, in the order they started
  */
final case class WarrenJobStatus(
    label: String,
    workers: Int,
    recovery: String,
    startedMs: Long,
    endedMs: Option[Long],
    state: String,
    failure: Option[String],
    tasks: Seq[WarrenTaskStatus]
) {

  /** The newest attempt of each task, in task-id order. */
  def latestAttempts: Seq[WarrenTaskStatus] =
    tasks.groupBy(_.partition).values.map(_.last).toSeq.sortBy(_.partition)

  /** The job's progress: the highest checkpoint version of its tasks' newest attempts (in a
    * job of one checkpoint per iteration, the iterations done). */
  def checkpointVersion: Long = latestAttempts.map(_.checkpointVersion).reduceOption(_ max _).getOrElse(0L)

  /** Task attempts that failed or were killed. */
  def failedAttempts: Int = tasks.count(t => t.state == "failed" || t.state == "killed")

  /** Re-run task attempts (each recovers from its peers, unless the job fails). */
  def reruns: Int = tasks.size - tasks.map(t => t.partition).distinct.size

  /** Seconds it ran (until `nowMs` while it runs). */
  def seconds(nowMs: Long): Double = (endedMs.getOrElse(nowMs) - startedMs) / 1000.0
}

/** What the driver knows of its Warren jobs, fed by [[WarrenListener]] from Spark's listener
  * events (task starts and ends, and the executors' heartbeats with each running task's
  * [[CheckpointVersionAccumulator]]). Pure state, safe from any thread; keeps the last `keep`
  * jobs.
  *
  * @param keep how many jobs it remembers
  * @param clock the time in epoch milliseconds
  */
final class JobBoard(keep: Int = JobBoard.KeptJobs, clock: () => Long = () => System.currentTimeMillis()) {
  private val jobs = mutable.LinkedHashMap.empty[String, WarrenJobStatus]
  // Spark task id -> (job label, index in the job's tasks).
  private val taskIndex = mutable.HashMap.empty[Long, (String, Int)]

  /** A job started.
    *
    * @param label its label
    * @param workers its workers
    * @param recovery its recovery mode, as [[WarrenJobStatus.recovery]]
    */
  def jobStarted(label: String, workers: Int, recovery: String): Unit = synchronized {
    jobs.put(label, WarrenJobStatus(label, workers, recovery, clock(), None, "running", None, Vector.empty))
    while (jobs.size > keep) {
      val (oldest, _) = jobs.head
      jobs.remove(oldest)
      taskIndex.collect { case (t, (l, _)) if l == oldest => t }.toList.foreach(taskIndex.remove)
    }
  }

  /** A job ended.
    *
    * @param label its label
    * @param failure why it failed; `None` if it succeeded
    */
  def jobEnded(label: String, failure: Option[String]): Unit = synchronized {
    // The ends of its tasks can come later (the listener bus is asynchronous): they are
    // still recorded.
    update(label)(_.copy(endedMs = Some(clock()), state = if (failure.isEmpty) "succeeded" else "failed", failure = failure))
  }

  /** A task attempt of job `label` started.
    *
    * @param label the job
    * @param taskId Spark's task id
    * @param partition the worker's task id
    * @param attempt Spark's attempt number
    * @param stageAttempt the stage's attempt
    * @param executor the executor
    * @param host its host
    */
  def taskStarted(label: String, taskId: Long, partition: Int, attempt: Int, stageAttempt: Int, executor: String, host: String): Unit =
    synchronized {
      update(label) { j =>
        taskIndex.put(taskId, (label, j.tasks.size))
        j.copy(tasks = j.tasks :+ WarrenTaskStatus(partition, attempt, stageAttempt, executor, host, "running", 0L, clock()))
      }
    }

  /** A heartbeat's value of a running task's checkpoint version (ignored for tasks of no job
    * on the board, and for tasks that ended).
    *
    * @param taskId Spark's task id
    * @param version the version
    */
  def taskProgress(taskId: Long, version: Long): Unit = synchronized {
    task(taskId)(t => if (t.state == "running") t.copy(checkpointVersion = version, updatedMs = clock()) else t)
  }

  /** A task attempt ended.
    *
    * @param taskId Spark's task id
    * @param state `finished`, `failed` or `killed`
    * @param version its final checkpoint version, if its end reported one
    */
  def taskEnded(taskId: Long, state: String, version: Option[Long]): Unit = synchronized {
    task(taskId)(t => t.copy(state = state, checkpointVersion = version.getOrElse(t.checkpointVersion), updatedMs = clock()))
  }

  /** Whether the task belongs to a job on the board. */
  def tracks(taskId: Long): Boolean = synchronized(taskIndex.contains(taskId))

  /** Every job remembered, the newest first. */
  def all: Seq[WarrenJobStatus] = synchronized(jobs.values.toList.reverse)

  /** The job labelled `label`, if remembered. */
  def job(label: String): Option[WarrenJobStatus] = synchronized(jobs.get(label))

  private def update(label: String)(f: WarrenJobStatus => WarrenJobStatus): Unit =
    jobs.get(label).foreach(j => jobs.put(label, f(j)))

  private def task(taskId: Long)(f: WarrenTaskStatus => WarrenTaskStatus): Unit =
    taskIndex.get(taskId).foreach { case (label, i) =>
      update(label)(j => j.copy(tasks = j.tasks.updated(i, f(j.tasks(i)))))
    }
}

/** Defaults of [[JobBoard]]. */
object JobBoard {

  /** How many jobs a board remembers. */
  val KeptJobs = 100
}
