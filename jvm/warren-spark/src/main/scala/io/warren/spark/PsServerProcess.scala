package io.warren.spark

import java.io.{BufferedReader, File, InputStreamReader}
import java.nio.charset.StandardCharsets
import java.nio.file.Paths
import java.time.{Duration => JDuration}
import java.util.concurrent.{LinkedBlockingQueue, TimeUnit}

import io.warren.TlsSettings
import io.warren.ps.{PsServer, PsServerMain}

/** One parameter server as a child JVM of the driver ([[io.warren.ps.PsServerMain]]), for
  * `spark.warren.ps.servers=process`: it runs the same native server as the in-driver mode, on
  * the classpath of `warren-core` and `slf4j-api` (the jars that hold those classes here), with
  * the job secret and the run's TLS settings in its environment. It serves until its stdin closes, so it ends with the
  * driver even if the driver dies without closing it.
  *
  * A child JVM rather than the `warren ps` binary: the binary is not among the jars Spark ships,
  * while a JVM and these jars are wherever the driver runs.
  *
  * @param process the child
  * @param uri the `host:port` it listens on
  */
final class PsServerProcess private (val process: Process, val uri: String) {

  /** The child's process id. */
  def pid: Long = process.pid()

  /** Kills the child with SIGKILL (as a crash would) and reaps it. */
  def kill(): Unit = {
    process.destroyForcibly()
    process.waitFor()
  }

  /** Stops the child: closes its stdin (it closes its server and exits), SIGKILLs it if it has
    * not exited within 10 s.
    */
  def stop(): Unit = {
    try process.getOutputStream.close()
    catch { case _: java.io.IOException => () }
    if (!process.waitFor(10, TimeUnit.SECONDS)) kill()
  }
}

/** Starts [[PsServerProcess]]es. */
object PsServerProcess {

  /** System properties of the driver passed on to the child (where the native library is). */
  private val Inherited = Seq("warren.native.lib", "warren.native.tmpdir")

  /** The classpath of the child: the jars (or class directories) holding warren-core and
    * slf4j-api in this JVM.
    */
  private lazy val classpath: String =
    Seq(classOf[PsServer], classOf[org.slf4j.Logger])
      .map(c => Paths.get(c.getProtectionDomain.getCodeSource.getLocation.toURI).toString)
      .distinct
      .mkString(File.pathSeparator)

  /** Starts server `index` of `count` in a child JVM and waits until it listens.
    *
    * @param secret the job secret (given in the child's environment)
    * @param index the server's index
    * @param count the number of servers
    * @param host the address to bind and advertise
    * @param port the port (0: any free one)
    * @param settings the `spark.warren.ps.*` settings (pull timeout, checkpoints)
    * @param timeout how long it may take to start
    * @param tls encryption in transit (given in the child's environment as `WARREN_TLS*`, in
    *   place of any the driver's environment holds)
    * @return the running child
    * @throws WarrenSparkException if it exits or says nothing within `timeout`
    */
  def start(
      secret: String,
      index: Int,
      count: Int,
      host: String,
      port: Int,
      settings: PsSettings,
      timeout: JDuration,
      tls: TlsSettings = TlsSettings.OFF
  ): PsServerProcess = {
    val javaBin = Paths.get(System.getProperty("java.home"), "bin", "java").toString
    val props = Inherited.flatMap(p => Option(System.getProperty(p)).map(v => s"-D$p=$v"))
    val checkpoint = settings.checkpointDir.toSeq.flatMap(d =>
      Seq("--checkpoint-dir", d, "--checkpoint-every-steps", settings.checkpointEvery.toString)
    )
    val cmd = Seq(javaBin) ++ props ++ Seq("-cp", classpath, classOf[PsServerMain].getName) ++
      Seq("--index", index.toString, "--servers", count.toString, "--host", host, "--port", port.toString) ++
      Seq("--pull-timeout-ms", settings.pullTimeout.toMillis.toString, "--threads", settings.threads.toString) ++
      checkpoint
    val pb = new ProcessBuilder(cmd: _*).redirectError(ProcessBuilder.Redirect.INHERIT)
    pb.environment().put(PsServerMain.SECRET_ENV, secret)
    // The servers' TLS is the run's, whatever the driver's own environment says.
    pb.environment().keySet().removeIf(_.startsWith(TlsSettings.TLS_KEY))
    pb.environment().putAll(tls.workerSettings())
    val process = pb.start()
    val lines = new LinkedBlockingQueue[String]()
    val reader = new Thread(
      () => {
        val in = new BufferedReader(new InputStreamReader(process.getInputStream, StandardCharsets.UTF_8))
        try Iterator.continually(in.readLine()).takeWhile(_ != null).foreach(lines.put)
        catch { case _: java.io.IOException => () }
      },
      s"warren-ps-server-$index-stdout"
    )
    reader.setDaemon(true)
    reader.start()
    val prefix = s"${PsServerMain.URI_LINE}$index="
    val deadline = System.nanoTime() + timeout.toNanos
    var uri: String = null
    while (uri == null) {
      val left = deadline - System.nanoTime()
      val line = if (left > 0) lines.poll(math.min(left, 100000000L), TimeUnit.NANOSECONDS) else null
      if (line != null && line.startsWith(prefix)) uri = line.substring(prefix.length)
      else if (line == null && (left <= 0 || (!process.isAlive && lines.isEmpty))) {
        process.destroyForcibly()
        val why = if (process.isAlive || left <= 0) s"did not start within ${timeout.toMillis} ms" else
          s"exited with status ${process.waitFor()} (its stderr is the driver's)"
        throw new WarrenSparkException(s"parameter server $index of $count (a child JVM: ${cmd.mkString(" ")}) $why", null)
      }
    }
    new PsServerProcess(process, uri)
  }
}
