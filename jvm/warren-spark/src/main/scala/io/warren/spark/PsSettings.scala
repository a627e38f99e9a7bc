package io.warren.spark

import java.time.Duration

import scala.jdk.CollectionConverters._
import scala.jdk.OptionConverters._

import io.warren.runner.{RunnerException, Setting, SettingType, PsSettings => RunnerPsSettings}

/** The parameter-server settings of [[WarrenSpark.trainPS]] (`spark.warren.ps.*`), parsed.
  *
  * @param checkpointDir `ps.checkpointDir`: where the servers checkpoint their shards
  * @param checkpointEvery `ps.checkpointEvery`: steps between checkpoints
  * @param host `ps.host`: the address the servers bind and advertise
  * @param pullTimeout `ps.pullTimeout`
  * @param connectTimeout `ps.connectTimeout`
  * @param callTimeout `ps.callTimeout`
  * @param servers `ps.servers`: `driver` (threads of the driver) or `process` (child JVMs of the
  *   driver, restarted when they die)
  * @param threads `ps.threads`: threads of each server
  */
final case class PsSettings(
    checkpointDir: Option[String],
    checkpointEvery: Int,
    host: Option[String],
    pullTimeout: Duration,
    connectTimeout: Duration,
    callTimeout: Duration,
    servers: String = PsSettings.DriverMode,
    threads: Int = io.warren.ps.PsServer.DEFAULT_THREADS
) {

  /** The engine-neutral part of these settings, for warren-runner's [[io.warren.runner.PsServers]]. */
  def runner: RunnerPsSettings =
    new RunnerPsSettings(
      checkpointDir.toJava,
      checkpointEvery,
      host.toJava,
      pullTimeout,
      connectTimeout,
      callTimeout,
      threads
    )
}

/** The declarations of the `spark.warren.ps.*` settings: warren-runner's engine-neutral ones
  * (`io.warren.runner.PsSettings`, also Flink's `warren.ps.*`) and Spark's own `ps.servers`,
  * validated like the others and rendered into the same docs table.
  */
object PsSettings extends SettingGroup {

  /** The key prefix (after `spark.warren.`) of the parameter-server settings. */
  val KeyPrefix = "ps."

  /** `ps.servers=driver`: the servers are threads of the driver process. */
  val DriverMode = "driver"

  /** `ps.servers=process`: each server is a child JVM of the driver, started again when it dies. */
  val ProcessMode = "process"

  /** `ps.servers`. */
  val Servers: Setting[String] = new Setting[String](
    "ps.servers",
    SettingType.oneOf(DriverMode, ProcessMode),
    DriverMode,
    DriverMode,
    null,
    "trainPS: where the parameter servers run: `driver` (threads of the driver process) or" +
      " `process` (one child JVM of the driver per server, started again with the same index, port" +
      " and checkpoint directory when it dies)"
  )

  /** The engine-neutral declarations (warren-runner's), with doc lines naming the driver. */
  private val Declared: RunnerPsSettings.Declarations = RunnerPsSettings.declarations("driver", "the driver's host")

  /** `ps.checkpointDir`. */
  val CheckpointDir: Setting[String] = Declared.checkpointDir

  /** `ps.checkpointEvery`. */
  val CheckpointEvery: Setting[Integer] = Declared.checkpointEvery

  /** `ps.host`. */
  val Host: Setting[String] = Declared.host

  /** `ps.pullTimeout`. */
  val PullTimeout: Setting[java.lang.Double] = Declared.pullTimeout

  /** `ps.connectTimeout`. */
  val ConnectTimeout: Setting[java.lang.Double] = Declared.connectTimeout

  /** `ps.callTimeout`. */
  val CallTimeout: Setting[java.lang.Double] = Declared.callTimeout

  /** `ps.threads`. */
  val Threads: Setting[Integer] = Declared.threads

  /** Every parameter-server setting, in the order of the docs. */
  val All: Seq[Setting[_]] =
    Seq(Servers, CheckpointDir, CheckpointEvery, Host, PullTimeout, ConnectTimeout, CallTimeout, Threads)

  /** Parses the `ps.*` keys of `raw` (keys without `spark.warren.`), ignoring the others.
    *
    * @param raw the job's settings
    * @return the typed settings
    * @throws WarrenSparkException for an invalid value or an unknown `ps.*` key
    */
  def parse(raw: Map[String, String]): PsSettings = {
    val javaRaw = raw.filter(kv => RunnerPsSettings.owns(kv._1)).asJava
    try {
      val r = RunnerPsSettings.parse(javaRaw, WarrenSettings.Prefix, Declared, java.util.Collections.singletonList[Setting[_]](Servers))
      PsSettings(
        checkpointDir = r.checkpointDir.toScala,
        checkpointEvery = r.checkpointEvery,
        host = r.host.toScala,
        pullTimeout = r.pullTimeout,
        connectTimeout = r.connectTimeout,
        callTimeout = r.callTimeout,
        servers = value(Servers, javaRaw),
        threads = r.threads
      )
    } catch { case e: RunnerException => throw new WarrenSparkException(e.getMessage, null) }
  }
}
