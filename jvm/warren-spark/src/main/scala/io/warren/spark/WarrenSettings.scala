package io.warren.spark

import scala.jdk.CollectionConverters._
import scala.jdk.OptionConverters._

import io.warren.TlsSettings
import io.warren.runner.{RunnerException, RunnerSettings}

/** The `spark.warren.*` settings of a job, parsed and validated.
  *
  * @param recovery `spark.warren.recovery`
  * @param checkpointDir `spark.warren.checkpointDir`
  * @param durableEvery `spark.warren.durableEvery` (0 taken as 1), or `setting.WARREN_DURABLE_EVERY`
  * @param checkpointDirTimeout `spark.warren.checkpointDirTimeout`, seconds
  * @param trackerHost `spark.warren.trackerHost`
  * @param rendezvousTimeout `spark.warren.rendezvousTimeout`, seconds
  * @param slotWaitTimeout `spark.warren.slotWaitTimeout`, seconds
  * @param progressInterval `spark.warren.progressInterval`, seconds
  * @param peerTimeout the trackers' peer timeout: `spark.warren.peerTimeout` (or
  *   `setting.WARREN_PEER_TIMEOUT_S`); `None`: the tracker's default (30 s); zero: none
  * @param workerSettings the `WARREN_*` settings for every worker: the mapped settings that are
  *   set, then the `setting.WARREN_*` ones as given (which win)
  * @param ps the parameter-server settings (`spark.warren.ps.*`) of [[WarrenSpark.trainPS]]
  * @param tls encryption in transit for the trackers, the parameter servers and their clients:
  *   `spark.warren.tls*`, or `setting.WARREN_TLS*` (which win), as the workers get them
  * @param elastic the elastic-membership settings of [[WarrenSpark.train]]
  */
final case class WarrenSettings(
    recovery: Recovery,
    checkpointDir: Option[String],
    durableEvery: Int,
    checkpointDirTimeout: Double,
    trackerHost: Option[String],
    rendezvousTimeout: Double,
    slotWaitTimeout: Double,
    progressInterval: Double,
    peerTimeout: Option[java.time.Duration],
    workerSettings: Map[String, String],
    ps: PsSettings,
    tls: TlsSettings = TlsSettings.OFF,
    elastic: ElasticSettings = ElasticSettings(enabled = false, 1, java.time.Duration.ofSeconds(1))
) {

  /** The engine-neutral settings among these (all but `ps` and `elastic`; the trackers' peer
    * timeout and TLS follow from `workerSettings`), for `io.warren.runner.JobPlan`.
    */
  private[spark] def runner: RunnerSettings =
    new RunnerSettings(
      io.warren.runner.Recovery.of(recovery.name),
      checkpointDir.toJava,
      durableEvery,
      checkpointDirTimeout,
      trackerHost.toJava,
      rendezvousTimeout,
      slotWaitTimeout,
      progressInterval,
      workerSettings.asJava
    )
}

/** The `spark.warren.*` settings: a mapping of the engine-neutral settings of
  * `io.warren.runner.RunnerSettings` (which declares each one once: name, type, default, accepted
  * values, doc line) under the prefix `spark.warren.`. [[parse]] validates a job's settings on
  * the driver (before any task starts) and [[markdownTable]] renders the table of docs/spark.md
  * (a test checks that the two agree).
  *
  * Unknown keys fail: the prefix belongs to Warren, so an unknown key is a typo or a setting of
  * another version, and ignoring it would run the job with a default the user meant to change
  * (a misspelt `timeout` leaves the 30-minute deadline). The error names the closest known key.
  */
object WarrenSettings {

  /** The prefix of every setting. */
  val Prefix = "spark.warren."

  /** The prefix (after [[Prefix]]) of the settings passed to every worker as is. */
  val PassThrough: String = RunnerSettings.PASS_THROUGH

  /** Parses and validates `raw` (keys without the prefix): every value, every key.
    *
    * @param raw the job's `spark.warren.*` settings, without the prefix
    * @return the typed settings
    * @throws WarrenSparkException for the first invalid value (naming the setting, the value and
    *   the accepted values) or unknown key (naming the closest known one)
    */
  def parse(raw: Map[String, String]): WarrenSettings = {
    val ps = PsSettings.parse(raw)
    val r =
      try {
        val engineNeutral = raw.filterNot(kv => kv._1.startsWith(PsSettings.KeyPrefix) || ElasticSettings.owns(kv._1))
        RunnerSettings.parse(engineNeutral.asJava, Prefix)
      }
      catch { case e: RunnerException => throw new WarrenSparkException(e.getMessage, null) }
    WarrenSettings(
      recovery = Recovery.of(r.recovery),
      checkpointDir = r.checkpointDir.toScala,
      durableEvery = r.durableEvery,
      checkpointDirTimeout = r.checkpointDirTimeout,
      trackerHost = r.trackerHost.toScala,
      rendezvousTimeout = r.rendezvousTimeout,
      slotWaitTimeout = r.slotWaitTimeout,
      progressInterval = r.progressInterval,
      peerTimeout = Option(r.trackerPeerTimeout),
      workerSettings = r.workerSettings.asScala.toMap,
      ps = ps,
      tls = r.tls,
      elastic = ElasticSettings.parse(raw)
    )
  }

  /** The settings table of the docs (docs/spark.md), rendered from the declarations. */
  def markdownTable: String = {
    // The elastic and parameter-server rows go before the last row (`setting.WARREN_X`).
    val lines = RunnerSettings.markdownTable(Prefix, "Spark setting").split("\n").toSeq
    (lines.init ++ ElasticSettings.markdownRows(Prefix) ++ PsSettings.markdownRows(Prefix) :+ lines.last).mkString("\n")
  }
}
