package io.warren.spark

import scala.collection.mutable
import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import io.warren.runner.Trackers
import org.apache.spark.{SparkContext, WarrenSlots}
import org.slf4j.LoggerFactory

/** On the driver: kills the task attempt of every worker the run's trackers fenced, so that
  * Spark runs it again, as it would a failed one.
  *
  * A tracker fences a worker it heard no heartbeat from within the peer timeout
  * (`spark.warren.peerTimeout`): a paused or frozen executor JVM, a hung task, a cut network
  * link. The other workers already go on without it and wait for its replacement, but Spark
  * does not know: the attempt still holds its slot, and a frozen executor is only given up
  * after Spark's own heartbeat timeout (`spark.network.timeout`, 120 s). This watch polls the
  * trackers every [[FenceWatch.PollMs]] ms and, for each fenced worker (a partition id and the
  * attempt that registered), calls `SparkContext.killTaskAttempt` on that attempt if it still
  * runs (never on a later attempt of the partition), with an interrupt (a live executor
  * ends it within milliseconds: the task's communicator is aborted). An executor that has not
  * ended the attempt [[FenceWatch.KillGrace]] later does not answer at all (a SIGSTOPped or
  * frozen JVM cannot, nor one on a host that is gone or cut off): it is killed, replaced and
  * removed from the scheduler at once (what Spark does to an executor whose heartbeats
  * stopped: [[org.apache.spark.WarrenSlots.killAndReplaceExecutor]]), and Spark runs the task
  * again on another executor without waiting for its own timeouts.
  *
  * @param sc the context
  * @param trackers the run's trackers
  * @param watch the run's task watch (which attempts of which partitions run where)
  */
private[spark] final class FenceWatch(sc: SparkContext, trackers: Trackers, watch: JobWatch) {
  private val log = LoggerFactory.getLogger(classOf[FenceWatch])
  @volatile private var stopped = false
  // Fenced (partition, worker attempt)s not seen running or ended yet (the listener bus lags),
  // with when taken.
  private val pending = mutable.LinkedHashMap.empty[(Int, Int), Long]
  // Attempts killed: Spark task id -> (executor, when killed).
  private val killed = mutable.LinkedHashMap.empty[Long, (String, Long)]
  private val thread = new Thread(() => loop(), "warren-fence-watch")
  thread.setDaemon(true)
  thread.start()

  private def loop(): Unit =
    try {
      while (!stopped) {
        step(System.nanoTime())
        Thread.sleep(FenceWatch.PollMs)
      }
    } catch {
      case _: InterruptedException => ()
      case NonFatal(e)             => log.error("warren: the fence watch stopped", e)
    }

  private def step(now: Long): Unit = {
    trackers.takeFenced().asScala.foreach { f =>
      scala.util.Try(f.taskId.toInt).toOption match {
        case Some(p) => pending.getOrElseUpdate((p, f.attempt), now)
        case None    => log.warn(s"warren: the tracker fenced task ${f.taskId}, which is no partition id")
      }
    }
    for (((p, attempt), since) <- pending.toSeq) {
      watch.runningAttempt(p, attempt) match {
        case Some((taskId, executor)) =>
          pending.remove((p, attempt))
          log.warn(
            s"warren: the tracker fenced the worker of partition $p, attempt $attempt (no heartbeat within " +
              s"spark.warren.peerTimeout): killing its task attempt (Spark task $taskId on executor " +
              s"$executor) so that Spark runs it again"
          )
          killed.put(taskId, (executor, now))
          sc.killTaskAttempt(taskId, interruptThread = true, reason = s"Warren fenced the worker of partition $p")
        case None if watch.hasEnded(p, attempt) =>
          // It ended meanwhile (a later attempt may run already: that one is left alone).
          pending.remove((p, attempt))
          log.info(s"warren: the tracker fenced the worker of partition $p, attempt $attempt, which has ended already")
        case None if now - since > FenceWatch.KnownWithinNs =>
          pending.remove((p, attempt))
          log.warn(s"warren: the tracker fenced the worker of partition $p, attempt $attempt, but that attempt is not running")
        case None => ()
      }
    }
    for ((taskId, (executor, at)) <- killed.toSeq) {
      if (!watch.isRunning(taskId)) killed.remove(taskId)
      else if (now - at > FenceWatch.KillGrace * 1000000L) {
        killed.remove(taskId)
        replace(executor, s"executor $executor did not end killed task $taskId within ${FenceWatch.KillGrace} ms")
      }
    }
  }

  /** Kills and replaces `executor`, which does not answer; `why` says what showed it. */
  private def replace(executor: String, why: String): Unit = {
    log.warn(s"warren: $why: it does not answer (paused, frozen or cut off); killing and replacing it")
    try {
      if (!WarrenSlots.killAndReplaceExecutor(sc, executor, s"Warren gave up executor $executor: $why"))
        log.warn(s"warren: the cluster manager cannot kill executor $executor; Spark gives it up after spark.network.timeout")
    } catch { case NonFatal(e) => log.warn(s"warren: could not kill executor $executor", e) }
  }

  /** Stops watching (waits up to 1 s for the thread). Attempts killed that have not ended yet
    * are given the rest of their [[FenceWatch.KillGrace]], and the executors of those still
    * running then are killed and replaced: a job that fails while a fenced executor is paused
    * (SIGSTOP) does not leave that JVM behind, stopped, past `SparkContext.stop()`. Idempotent.
    */
  def stop(): Unit = {
    stopped = true
    thread.interrupt()
    thread.join(1000)
    if (!thread.isAlive) settle()
  }

  /** Waits (at most [[FenceWatch.KillGrace]]) for the killed attempts to end; replaces the
    * executors of those that do not.
    */
  private def settle(): Unit = {
    def overdue(now: Long) = killed.forall { case (_, (_, at)) => now - at > FenceWatch.KillGrace * 1000000L }
    while (killed.nonEmpty && !overdue(System.nanoTime())) {
      for ((taskId, _) <- killed.toSeq if !watch.isRunning(taskId)) killed.remove(taskId)
      if (killed.nonEmpty) Thread.sleep(FenceWatch.PollMs)
    }
    for ((taskId, (executor, _)) <- killed.toSeq if watch.isRunning(taskId)) {
      replace(executor, s"the job ended while executor $executor had not ended killed task $taskId")
    }
    killed.clear()
  }
}

/** Timings of [[FenceWatch]]. */
private[spark] object FenceWatch {

  /** How often the trackers are asked for fenced workers, in milliseconds. */
  val PollMs = 100L

  /** How long an executor has to end a killed task attempt before it is taken for one that
    * does not answer and is killed and replaced, in milliseconds.
    */
  val KillGrace = 5000L

  /** How long a fenced worker may go without its attempt known to run or to have ended
    * before it is dropped.
    */
  private val KnownWithinNs = 30L * 1000000000L
}
