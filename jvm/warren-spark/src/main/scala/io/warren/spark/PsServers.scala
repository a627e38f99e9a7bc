package io.warren.spark

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import io.warren.TlsSettings
import io.warren.ps.{PsClient, PsStatus}
import io.warren.runner.{PsServers => RunnerPsServers}

/** The parameter servers of one [[WarrenSpark.trainPS]] run: server `i` of `count` at
  * `uris(i)`, in the driver process (`spark.warren.ps.servers=driver`, the default: warren-runner's
  * engine-neutral `io.warren.runner.PsServers`, which Flink's `trainPS` uses too) or each in a
  * child JVM of the driver (`process`, see [[PsServerProcess]]) that the driver supervises: a
  * child that dies (killed, crashed) is started again with the same index, port and checkpoint
  * directory, while the trainers wait for it. [[restart]] stops a server and starts it again at
  * the same address from its last checkpoint; in process mode it SIGKILLs the child and waits for
  * the supervisor's replacement.
  *
  * @param count the number of servers
  * @param secret the run's job secret
  * @param settings the `spark.warren.ps.*` settings
  * @param host the address the servers bind and advertise
  * @param tls encryption in transit of the servers (and of [[status]]'s observer in process mode)
  */
final class PsServers private[spark] (
    val count: Int,
    secret: String,
    settings: PsSettings,
    host: String,
    tls: TlsSettings = TlsSettings.OFF
) {
  private val inProcesses = settings.servers == PsSettings.ProcessMode
  private var inDriver: RunnerPsServers = null // driver mode
  private val children = new Array[PsServerProcess](count) // process mode
  private val restarted = new Array[Int](count) // process mode: replacements started
  private val ports = new Array[Int](count)
  private var closed = false // guarded by this
  private var observer: PsClient = null // process mode: for status(), guarded by this

  private def spawn(i: Int, port: Int): PsServerProcess =
    PsServerProcess.start(secret, i, count, host, port, settings, settings.connectTimeout, tls)

  /** Process mode: waits for child `i` to end and, unless the run is over, starts another with
    * the same index and port (retrying every 200 ms while that fails), until [[close]].
    */
  private def supervise(i: Int): Unit = {
    var child = synchronized(children(i))
    while (child != null) {
      child.process.waitFor()
      child = synchronized {
        if (closed) null
        else {
          System.err.println(
            s"warren: parameter server $i (pid ${children(i).pid}) exited with status " +
              s"${children(i).process.exitValue()}; starting it again on port ${ports(i)}"
          )
          var next: PsServerProcess = null
          while (next == null && !closed) {
            try next = spawn(i, ports(i))
            catch {
              case NonFatal(e) =>
                System.err.println(s"warren: restarting parameter server $i failed (${e.getMessage}); retrying")
                wait(200)
            }
          }
          if (next != null) {
            children(i) = next
            restarted(i) += 1
            notifyAll()
          }
          next
        }
      }
    }
  }

  try {
    if (inProcesses) {
      for (i <- 0 until count) {
        children(i) = spawn(i, 0)
        val uri = children(i).uri
        ports(i) = uri.substring(uri.lastIndexOf(':') + 1).toInt
      }
    } else inDriver = RunnerPsServers.start(count, secret, host, settings.runner, tls)
  } catch {
    case e: Throwable =>
      close()
      throw e
  }
  if (inProcesses) {
    for (i <- 0 until count) {
      val t = new Thread(() => supervise(i), s"warren-ps-supervisor-$i")
      t.setDaemon(true)
      t.start()
    }
  }

  /** The servers' addresses, server `i` at index `i`. */
  val uris: Seq[String] =
    if (inProcesses) children.toSeq.map(_.uri) else inDriver.uris.asScala.toSeq

  /** Whether the servers run as child processes (`spark.warren.ps.servers=process`). */
  def separateProcesses: Boolean = inProcesses

  /** Process mode: the process id of server `i`'s child JVM now.
    *
    * @param i the server's index
    * @return its pid, or `None` in driver mode
    */
  def pid(i: Int): Option[Long] = synchronized(if (inProcesses) Some(children(i).pid) else None)

  /** Process mode: how many times server `i` was started again after its child died.
    *
    * @param i the server's index
    * @return the count (0 in driver mode)
    */
  def restarts(i: Int): Int = synchronized(restarted(i))

  /** Server `i`'s state now (process mode: asked over the network, as `warren ps status` does).
    *
    * @param i the server's index
    * @return its state
    */
  def status(i: Int): PsStatus = {
    if (inProcesses) {
      val c = synchronized {
        if (closed) throw new IllegalStateException("the parameter servers of this run are stopped")
        if (observer == null) observer = PsClient.observer(java.util.List.of(uris: _*), secret, tls)
        observer
      }
      c.status().get(i)
    } else inDriver.status(i)
  }

  /** Stops server `i` and starts it again at the same address, from its last checkpoint if
    * `spark.warren.ps.checkpointDir` is set (else empty: the trainers then find a server that
    * lost the job); trainers wait for it meanwhile. In process mode, kills its child JVM with
    * SIGKILL and returns once the supervisor's replacement listens (or after the connect
    * timeout). Does nothing once the run is over.
    *
    * @param i the server's index
    */
  def restart(i: Int): Unit = synchronized {
    if (!closed) {
      if (inProcesses) {
        val before = restarted(i)
        children(i).kill()
        val deadline = System.nanoTime() + settings.connectTimeout.toNanos
        while (restarted(i) == before && !closed && System.nanoTime() < deadline) {
          wait(math.max(1L, (deadline - System.nanoTime()) / 1000000L))
        }
      } else inDriver.restart(i)
    }
  }

  /** Stops every server (process mode: their child JVMs). Idempotent. */
  def close(): Unit = synchronized {
    closed = true
    notifyAll()
    if (observer != null) observer.close()
    if (inDriver != null) inDriver.close()
    children.foreach(c => if (c != null) c.stop())
  }
}
