package io.warren.spark

import io.warren.Communicator
import org.apache.spark.TaskContext
import org.slf4j.LoggerFactory

/** Aborts a task's communicator when Spark kills the task without interrupting its thread.
  *
  * `sc.cancelJobGroup`, `sc.cancelJob` and a killed stage interrupt task threads only with
  * `interruptOnCancel` (`spark.job.interruptOnCancel`); otherwise Spark merely marks the task
  * killed (`TaskContext.isInterrupted`), which a thread blocked in a collective call never looks
  * at. A daemon thread polls that mark every `pollMs` and calls `Communicator.abort()` (safe
  * from another thread: the blocked call fails with `CollectiveAbortedException` within
  * milliseconds, and the peers see the worker leave). With an interrupt, `Communicator`'s own
  * interrupt watcher is faster; both may fire, `abort()` is idempotent.
  */
private[spark] final class KillWatch private (ctx: TaskContext, comm: Communicator, pollMs: Long) {
  @volatile private var stopped = false
  private val thread = new Thread(() => loop(), s"warren-kill-watch-${ctx.partitionId()}")
  thread.setDaemon(true)

  private def loop(): Unit =
    try {
      while (!stopped && !ctx.isInterrupted()) Thread.sleep(pollMs)
      if (!stopped) {
        KillWatch.log.info(s"task of partition ${ctx.partitionId()} was killed: aborting its Warren calls")
        comm.abort()
      }
    } catch { case _: InterruptedException => () }

  /** Stops watching (waits up to 1 s for the thread to end). */
  def stop(): Unit = {
    stopped = true
    thread.interrupt()
    thread.join(1000)
  }
}

/** Starts [[KillWatch]]es. */
private[spark] object KillWatch {
  private val log = LoggerFactory.getLogger(classOf[KillWatch])

  /** How often a watch looks at the task's kill mark. */
  val PollMs = 100L

  /** Watches `ctx` for a kill until [[KillWatch.stop]]; stop it before closing `comm`. */
  def start(ctx: TaskContext, comm: Communicator): KillWatch = {
    val w = new KillWatch(ctx, comm, PollMs)
    w.thread.start()
    w
  }
}
