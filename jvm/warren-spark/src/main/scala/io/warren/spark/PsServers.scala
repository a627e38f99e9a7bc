package io.warren.spark

import java.nio.file.Paths
import java.time.{Duration => JDuration}

import io.warren.ps.{PsServer, PsStatus}

/** The parameter servers of one [[WarrenSpark.trainPS]] run, in the driver process: server `i`
  * of `count` at `uris(i)`. [[restart]] stops a server and starts it again at the same address
  * from its last checkpoint (what a crashed server's supervisor does), while the trainers wait
  * for it.
  *
  * @param count the number of servers
  * @param secret the run's job secret
  * @param settings the `spark.warren.ps.*` settings
  * @param host the address the servers bind and advertise
  */
final class PsServers private[spark] (val count: Int, secret: String, settings: PsSettings, host: String) {
  private val servers = new Array[PsServer](count)
  private val ports = new Array[Int](count)
  private var closed = false // guarded by this

  private def start(i: Int, port: Int): PsServer = {
    val b = PsServer.builder(secret, i, count).bind(host, port).pullTimeout(settings.pullTimeout)
    settings.checkpointDir.foreach { d =>
      b.checkpoint(Paths.get(d), settings.checkpointEvery.toLong, JDuration.ZERO)
    }
    b.start()
  }

  try {
    for (i <- 0 until count) {
      servers(i) = start(i, 0)
      val uri = servers(i).uri()
      ports(i) = uri.substring(uri.lastIndexOf(':') + 1).toInt
    }
  } catch {
    case e: Throwable =>
      close()
      throw e
  }

  /** The servers' addresses, server `i` at index `i`. */
  val uris: Seq[String] = servers.toSeq.map(_.uri())

  /** Server `i`'s state now.
    *
    * @param i the server's index
    * @return its state
    */
  def status(i: Int): PsStatus = synchronized {
    if (closed) throw new IllegalStateException("the parameter servers of this run are stopped")
    servers(i).status()
  }

  /** Stops server `i` (its connections close; trainers wait for it) and starts it again at the
    * same address, from its last checkpoint if `spark.warren.ps.checkpointDir` is set (else
    * empty: the trainers then find a server that lost the job). Does nothing once the run is
    * over.
    *
    * @param i the server's index
    */
  def restart(i: Int): Unit = synchronized {
    if (!closed) {
      servers(i).close()
      servers(i) = start(i, ports(i))
    }
  }

  /** Stops every server. Idempotent. */
  def close(): Unit = synchronized {
    closed = true
    servers.foreach(s => if (s != null) s.close())
  }
}
