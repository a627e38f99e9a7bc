package io.warren.spark

import scala.util.control.NonFatal

import io.warren.Communicator
import org.slf4j.LoggerFactory

/** Reports a worker's progress to the job's log on the driver: every `intervalS` seconds, a
  * daemon thread sends (with `Communicator.print`, through the tracker, which logs it at INFO
  * under `io.warren.native.warren.tracker.server`) a line
  * {{{
  * [rank 0] progress: job 3, checkpoint version 7, recoveries 1, 12.4 s; allreduce(tree): n=9 p50=2100us p99=5300us max=5300us; ...
  * }}}
  * with the checkpoint version, the recoveries this worker took part in and the latency
  * percentiles of its collective calls (`Communicator.stats`: each call from its start to its
  * return on rank 0, waiting for slower workers and for recoveries included). The runner
  * starts one for rank 0.
  *
  * The calls on a communicator are serialised, so a line is sent between two of the worker's
  * collective calls (never during one): a worker blocked in a long call (waiting for a lost
  * peer, say) delays the next line until the call returns.
  */
private[spark] final class Progress private (comm: Communicator, label: String, intervalMs: Long) {
  private val started = System.nanoTime()
  @volatile private var stopped = false
  private val thread = new Thread(() => loop(), s"warren-progress-$label")
  thread.setDaemon(true)

  private def loop(): Unit = {
    try {
      while (!stopped) {
        Thread.sleep(intervalMs)
        if (!stopped) Progress.report(comm, label, "progress", started)
      }
    } catch {
      case _: InterruptedException => ()
      case NonFatal(e) => Progress.log.warn(s"warren job $label: progress reports stopped: $e")
    }
  }

  /** Stops the thread, waiting for a line being sent (up to 5 s). */
  def stop(): Unit = {
    stopped = true
    thread.interrupt()
    thread.join(5000)
  }

  /** Nanosecond time this reporter started. */
  def startedAt: Long = started
}

/** Starts [[Progress]] reporters and formats their lines. */
private[spark] object Progress {
  private val log = LoggerFactory.getLogger(classOf[Progress])

  /** Starts a reporter thread for `comm`.
    *
    * @param comm the worker's communicator
    * @param label the job's label in the lines
    * @param intervalS seconds between lines (more than 0)
    * @return the running reporter; stop it before closing `comm`
    */
  def start(comm: Communicator, label: String, intervalS: Double): Progress = {
    require(intervalS > 0, s"the progress interval must be positive, got $intervalS")
    val p = new Progress(comm, label, math.max(1L, (intervalS * 1000).toLong))
    p.thread.start()
    p
  }

  /** The text of one line (without the `[rank r]` prefix the tracker adds).
    *
    * @param what `progress` or `finished`
    * @param label the job's label
    * @param version the checkpoint version
    * @param recoveries recoveries the worker took part in
    * @param seconds seconds since the worker started
    * @param stats `Communicator.stats()`
    * @return the line
    */
  def line(what: String, label: String, version: Int, recoveries: Long, seconds: Double, stats: String): String =
    f"$what: job $label, checkpoint version $version, recoveries $recoveries, $seconds%.1f s; " +
      (if (stats.isEmpty) "no collective calls yet" else stats)

  /** Sends one line about `comm` to the tracker (one atomic look at the communicator).
    *
    * @param comm the communicator
    * @param label the job's label
    * @param what `progress` or `finished`
    * @param started `System.nanoTime()` when the worker started
    */
  def report(comm: Communicator, label: String, what: String, started: Long): Unit = comm.synchronized {
    if (!comm.isClosed) {
      val s = (System.nanoTime() - started) / 1e9
      comm.print(line(what, label, comm.version(), comm.recoveries(), s, comm.stats()))
    }
  }
}
