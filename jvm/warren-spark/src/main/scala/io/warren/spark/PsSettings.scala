package io.warren.spark

import java.time.Duration

import scala.jdk.CollectionConverters._
import scala.jdk.OptionConverters._

import io.warren.runner.{RunnerException, RunnerSettings, Setting, SettingType}

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
)

/** The declarations of the `spark.warren.ps.*` settings (Spark only: the servers run in the
  * driver), validated like the others and rendered into the same docs table.
  */
object PsSettings extends SettingGroup {

  /** The key prefix (after `spark.warren.`) of the parameter-server settings. */
  val KeyPrefix = "ps."

  private val Day = 86400.0

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

  /** `ps.checkpointDir`. */
  val CheckpointDir: Setting[String] = new Setting[String](
    "ps.checkpointDir",
    SettingType.text(),
    null,
    "",
    null,
    "trainPS: local directory of the driver where each parameter server checkpoints its shard;" +
      " a server restarted from it loses nothing in sync mode (none: no checkpoints)"
  )

  /** `ps.checkpointEvery`. */
  val CheckpointEvery: Setting[Integer] = new Setting[Integer](
    "ps.checkpointEvery",
    SettingType.intIn(0, 1000000),
    Integer.valueOf(0),
    "0",
    null,
    "trainPS: steps between a server's checkpoints (0: every 60 s, and when its log holds four times its shard)"
  )

  /** `ps.host`. */
  val Host: Setting[String] = new Setting[String](
    "ps.host",
    SettingType.text(),
    null,
    "the driver's host",
    null,
    "trainPS: address the parameter servers bind and advertise to the trainers"
  )

  /** `ps.pullTimeout`. */
  val PullTimeout: Setting[java.lang.Double] = new Setting[java.lang.Double](
    "ps.pullTimeout",
    SettingType.seconds(true, Day),
    java.lang.Double.valueOf(300.0),
    "300",
    null,
    "trainPS: seconds a trainer's pull may wait for slower trainers (sync, SSP) before it fails" +
      " naming them"
  )

  /** `ps.connectTimeout`. */
  val ConnectTimeout: Setting[java.lang.Double] = new Setting[java.lang.Double](
    "ps.connectTimeout",
    SettingType.seconds(true, Day),
    java.lang.Double.valueOf(60.0),
    "60",
    null,
    "trainPS: seconds a trainer may take to connect to all servers"
  )

  /** `ps.callTimeout`. */
  val CallTimeout: Setting[java.lang.Double] = new Setting[java.lang.Double](
    "ps.callTimeout",
    SettingType.seconds(true, Day),
    java.lang.Double.valueOf(600.0),
    "600",
    null,
    "trainPS: seconds one pull or push may take, waiting for a restarted server included"
  )

  /** `ps.threads`. */
  val Threads: Setting[Integer] = new Setting[Integer](
    "ps.threads",
    SettingType.intIn(1, 1024),
    Integer.valueOf(io.warren.ps.PsServer.DEFAULT_THREADS),
    io.warren.ps.PsServer.DEFAULT_THREADS.toString,
    null,
    "trainPS: threads of each parameter server; a shard's rows are worked on by one at a time, more" +
      " read and write several trainers' frames at once (a dense model's large frames gain from two)"
  )

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
    val mine = raw.filter(_._1.startsWith(KeyPrefix))
    mine.keys.toSeq.sorted.foreach { k =>
      if (!All.exists(_.name == k)) {
        val closest = All.map(_.name).minBy(n => RunnerSettings.distance(n.toLowerCase, k.toLowerCase))
        throw new WarrenSparkException(
          s"${WarrenSettings.Prefix}$k is not a Warren setting (did you mean ${WarrenSettings.Prefix}$closest?" +
            s" the parameter-server settings are ${All.map(_.name).mkString(", ")})",
          null
        )
      }
    }
    val javaRaw = mine.asJava
    try
      PsSettings(
        checkpointDir = CheckpointDir.from(javaRaw, WarrenSettings.Prefix).toScala,
        checkpointEvery = value(CheckpointEvery, javaRaw).intValue(),
        host = Host.from(javaRaw, WarrenSettings.Prefix).toScala,
        pullTimeout = duration(PullTimeout, javaRaw),
        connectTimeout = duration(ConnectTimeout, javaRaw),
        callTimeout = duration(CallTimeout, javaRaw),
        servers = value(Servers, javaRaw),
        threads = value(Threads, javaRaw).intValue()
      )
    catch { case e: RunnerException => throw new WarrenSparkException(e.getMessage, null) }
  }
}
