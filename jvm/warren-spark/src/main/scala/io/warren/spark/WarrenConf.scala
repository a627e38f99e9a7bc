package io.warren.spark

import scala.concurrent.duration._
import scala.jdk.CollectionConverters._
import scala.jdk.OptionConverters._
import scala.language.implicitConversions

import io.warren.runner.{RunnerSettings, Setting}

/** The `spark.warren.*` settings of [[WarrenSpark.train]] as a Scala value, with their
  * defaults: pass it where a settings map goes.
  *
  * {{{
  * import scala.concurrent.duration._
  *
  * WarrenSpark.train(rdd, numWorkers = 3,
  *   conf = WarrenConf(recovery = Recovery.FailAll, checkpointDir = Some("hdfs://nn:8020/ckpt"),
  *     timeout = 10.minutes)) { (comm, rows) => ... }
  * }}}
  *
  * [[toMap]] holds only the fields that differ from their defaults, so a setting left at its
  * default keeps the value the SparkConf gives it (`--conf spark.warren.timeout=...`), as a map
  * without that key would. The values are checked when `train` parses them, as a map's are.
  * Each field's doc names its setting; docs/spark.md's table says what it does.
  *
  * @param recovery `spark.warren.recovery`
  * @param checkpointDir `spark.warren.checkpointDir` (fail-all: required)
  * @param durableEvery `spark.warren.durableEvery`
  * @param checkpointDirTimeout `spark.warren.checkpointDirTimeout`
  * @param timeout `spark.warren.timeout`: one collective call at most
  * @param connectTimeout `spark.warren.connectTimeout`
  * @param peerTimeout `spark.warren.peerTimeout` (zero: no heartbeats)
  * @param bootstrapCache `spark.warren.bootstrapCache`
  * @param localReplicas `spark.warren.localReplicas`
  * @param reductionOrder `spark.warren.reductionOrder`: `ranks` or `hosts`
  * @param tls `spark.warren.tls`
  * @param tlsCa `spark.warren.tls.ca`
  * @param tlsCert `spark.warren.tls.cert`
  * @param tlsKey `spark.warren.tls.key`
  * @param trackerHost `spark.warren.trackerHost` (`None`: the driver's host)
  * @param rendezvousTimeout `spark.warren.rendezvousTimeout`
  * @param slotWaitTimeout `spark.warren.slotWaitTimeout`
  * @param progressInterval `spark.warren.progressInterval` (zero: no progress lines)
  * @param elastic `spark.warren.elastic`
  * @param minWorkers `spark.warren.minWorkers`
  * @param rejoinTimeout `spark.warren.rejoinTimeout`
  * @param ps the parameter-server settings of [[WarrenSpark.trainPS]] (`spark.warren.ps.*`)
  * @param workerSettings `spark.warren.setting.WARREN_X` for each `WARREN_X -> value`: passed
  *   to every worker as is (they win over the fields above)
  */
final case class WarrenConf(
    recovery: Recovery = Recovery.RetryOne,
    checkpointDir: Option[String] = None,
    durableEvery: Int = 1,
    checkpointDirTimeout: FiniteDuration = 60.seconds,
    timeout: FiniteDuration = 30.minutes,
    connectTimeout: FiniteDuration = 5.minutes,
    peerTimeout: FiniteDuration = 30.seconds,
    bootstrapCache: Boolean = true,
    localReplicas: Int = 2,
    reductionOrder: String = "ranks",
    tls: Boolean = false,
    tlsCa: Option[String] = None,
    tlsCert: Option[String] = None,
    tlsKey: Option[String] = None,
    trackerHost: Option[String] = None,
    rendezvousTimeout: FiniteDuration = 10.minutes,
    slotWaitTimeout: FiniteDuration = Duration.Zero,
    progressInterval: FiniteDuration = 10.seconds,
    elastic: Boolean = false,
    minWorkers: Int = 1,
    rejoinTimeout: FiniteDuration = 1.second,
    ps: PsConf = PsConf(),
    workerSettings: Map[String, String] = Map.empty
) {

  /** Every setting's key (with `spark.warren.`) and value (`None`: not set), the
    * parameter-server ones and the worker settings included.
    */
  private[spark] def values: Seq[(String, Option[String])] = {
    import WarrenConf.{seconds, text}
    Seq(
      "recovery" -> Some(recovery.name),
      "checkpointDir" -> checkpointDir,
      "durableEvery" -> Some(durableEvery.toString),
      "checkpointDirTimeout" -> Some(seconds(checkpointDirTimeout)),
      "timeout" -> Some(seconds(timeout)),
      "connectTimeout" -> Some(seconds(connectTimeout)),
      "peerTimeout" -> Some(seconds(peerTimeout)),
      "bootstrapCache" -> Some(bootstrapCache.toString),
      "localReplicas" -> Some(localReplicas.toString),
      "reductionOrder" -> Some(reductionOrder),
      "tls" -> Some(tls.toString),
      "tls.ca" -> tlsCa,
      "tls.cert" -> tlsCert,
      "tls.key" -> tlsKey,
      "trackerHost" -> trackerHost,
      "rendezvousTimeout" -> Some(seconds(rendezvousTimeout)),
      "slotWaitTimeout" -> Some(seconds(slotWaitTimeout)),
      "progressInterval" -> Some(seconds(progressInterval)),
      "elastic" -> Some(elastic.toString),
      "minWorkers" -> Some(minWorkers.toString),
      "rejoinTimeout" -> Some(seconds(rejoinTimeout))
    ).map(kv => text(kv._1) -> kv._2) ++ ps.values ++
      workerSettings.toSeq.sorted.map(kv => text(RunnerSettings.PASS_THROUGH + kv._1) -> Some(kv._2))
  }

  /** The settings that differ from their defaults, as `spark.warren.*` keys and values: what
    * `train` takes as its `conf` (this conversion is implicit).
    *
    * @return the settings map
    */
  def toMap: Map[String, String] = {
    val defaults = WarrenConf.Defaults.values.toMap
    values.collect { case (k, Some(v)) if !defaults.get(k).contains(Some(v)) => k -> v }.toMap
  }
}

/** Reading a [[WarrenConf]] from a settings map, and its conversion to one. */
object WarrenConf {

  private val Defaults = WarrenConf()

  /** `key` under `spark.warren.`. */
  private def text(key: String): String = WarrenSettings.Prefix + key

  /** A duration as the settings write it: seconds, as a decimal without trailing zeros. */
  private[spark] def seconds(d: FiniteDuration): String =
    java.math.BigDecimal.valueOf(d.toNanos, 9).stripTrailingZeros().toPlainString

  /** Seconds as a duration, to the nanosecond. */
  private[spark] def duration(seconds: java.lang.Double): FiniteDuration =
    math.round(seconds.doubleValue() * 1e9).nanos

  /** The value of `s` in `raw` (keys without the prefix), or its default. */
  private[spark] def value[T](s: Setting[T], raw: java.util.Map[String, String]): Option[T] =
    s.from(raw, WarrenSettings.Prefix).toScala

  /** The settings of `conf`, checked as `train` checks them.
    *
    * @param conf `spark.warren.*` settings, the prefix optional; absent ones take their defaults
    * @return the typed settings
    * @throws WarrenSparkException for an invalid value or an unknown key, as `train` would
    */
  def fromMap(conf: Map[String, String]): WarrenConf = {
    val raw = conf.map { case (k, v) => k.stripPrefix(WarrenSettings.Prefix) -> v }
    WarrenSettings.parse(raw) // every value and key, with train's messages
    val j = raw.asJava
    val d = Defaults
    import RunnerSettings._
    WarrenConf(
      recovery = value(RECOVERY, j).map(v => Recovery.parse(Some(v))).getOrElse(d.recovery),
      checkpointDir = value(CHECKPOINT_DIR, j),
      durableEvery = value(DURABLE_EVERY, j).fold(d.durableEvery)(_.intValue),
      checkpointDirTimeout = value(CHECKPOINT_DIR_TIMEOUT, j).fold(d.checkpointDirTimeout)(duration),
      timeout = value(TIMEOUT, j).fold(d.timeout)(duration),
      connectTimeout = value(CONNECT_TIMEOUT, j).fold(d.connectTimeout)(duration),
      peerTimeout = value(PEER_TIMEOUT, j).fold(d.peerTimeout)(duration),
      bootstrapCache = value(BOOTSTRAP_CACHE, j).fold(d.bootstrapCache)(_.booleanValue),
      localReplicas = value(LOCAL_REPLICAS, j).fold(d.localReplicas)(_.intValue),
      reductionOrder = value(REDUCTION_ORDER, j).getOrElse(d.reductionOrder),
      tls = value(TLS, j).fold(d.tls)(_.booleanValue),
      tlsCa = value(TLS_CA, j),
      tlsCert = value(TLS_CERT, j),
      tlsKey = value(TLS_KEY, j),
      trackerHost = value(TRACKER_HOST, j),
      rendezvousTimeout = value(RENDEZVOUS_TIMEOUT, j).fold(d.rendezvousTimeout)(duration),
      slotWaitTimeout = value(SLOT_WAIT_TIMEOUT, j).fold(d.slotWaitTimeout)(duration),
      progressInterval = value(PROGRESS_INTERVAL, j).fold(d.progressInterval)(duration),
      elastic = value(ElasticSettings.Elastic, j).fold(d.elastic)(_.booleanValue),
      minWorkers = value(ElasticSettings.MinWorkers, j).fold(d.minWorkers)(_.intValue),
      rejoinTimeout = value(ElasticSettings.RejoinTimeout, j).fold(d.rejoinTimeout)(duration),
      ps = PsConf.fromMap(conf),
      workerSettings = raw.collect { case (k, v) if k.startsWith(PASS_THROUGH) => k.stripPrefix(PASS_THROUGH) -> v }
    )
  }

  /** Lets a [[WarrenConf]] stand where a settings map goes (`WarrenSpark.train(rdd, n, conf =
    * WarrenConf(...))`).
    *
    * @param conf the settings
    * @return `conf.toMap`
    */
  implicit def toSettingsMap(conf: WarrenConf): Map[String, String] = conf.toMap
}

/** The parameter-server settings of [[WarrenSpark.trainPS]] (`spark.warren.ps.*`) as a Scala
  * value, with their defaults; a field of [[WarrenConf]], or passed alone where a settings map
  * goes (`WarrenSpark.trainPS(rdd, 4, 2, conf = PsConf(threads = 4))`). As with
  * [[WarrenConf]], [[toMap]] holds only the fields that differ from their defaults.
  *
  * @param servers `spark.warren.ps.servers`: `driver` or `process`
  * @param checkpointDir `spark.warren.ps.checkpointDir` (`None`: no checkpoints)
  * @param checkpointEvery `spark.warren.ps.checkpointEvery`
  * @param host `spark.warren.ps.host` (`None`: the driver's host)
  * @param pullTimeout `spark.warren.ps.pullTimeout`
  * @param connectTimeout `spark.warren.ps.connectTimeout`
  * @param callTimeout `spark.warren.ps.callTimeout`
  * @param threads `spark.warren.ps.threads`
  */
final case class PsConf(
    servers: String = PsSettings.DriverMode,
    checkpointDir: Option[String] = None,
    checkpointEvery: Int = 0,
    host: Option[String] = None,
    pullTimeout: FiniteDuration = 5.minutes,
    connectTimeout: FiniteDuration = 1.minute,
    callTimeout: FiniteDuration = 10.minutes,
    threads: Int = io.warren.ps.PsServer.DEFAULT_THREADS
) {

  /** Every setting's key (with `spark.warren.`) and value (`None`: not set). */
  private[spark] def values: Seq[(String, Option[String])] = Seq(
    PsSettings.Servers.name -> Some(servers),
    PsSettings.CheckpointDir.name -> checkpointDir,
    PsSettings.CheckpointEvery.name -> Some(checkpointEvery.toString),
    PsSettings.Host.name -> host,
    PsSettings.PullTimeout.name -> Some(WarrenConf.seconds(pullTimeout)),
    PsSettings.ConnectTimeout.name -> Some(WarrenConf.seconds(connectTimeout)),
    PsSettings.CallTimeout.name -> Some(WarrenConf.seconds(callTimeout)),
    PsSettings.Threads.name -> Some(threads.toString)
  ).map(kv => (WarrenSettings.Prefix + kv._1) -> kv._2)

  /** The settings that differ from their defaults, as `spark.warren.ps.*` keys and values.
    *
    * @return the settings map
    */
  def toMap: Map[String, String] = {
    val defaults = PsConf().values.toMap
    values.collect { case (k, Some(v)) if !defaults.get(k).contains(Some(v)) => k -> v }.toMap
  }
}

/** Reading a [[PsConf]] from a settings map, and its conversion to one. */
object PsConf {

  /** The `spark.warren.ps.*` settings of `conf`, checked as `trainPS` checks them; other keys
    * are ignored.
    *
    * @param conf `spark.warren.*` settings, the prefix optional
    * @return the typed settings
    * @throws WarrenSparkException for an invalid value or an unknown `ps.*` key
    */
  def fromMap(conf: Map[String, String]): PsConf = {
    val raw = conf.map { case (k, v) => k.stripPrefix(WarrenSettings.Prefix) -> v }
    val s = PsSettings.parse(raw)
    val j = raw.asJava
    val d = PsConf()
    PsConf(
      servers = s.servers,
      checkpointDir = s.checkpointDir,
      checkpointEvery = s.checkpointEvery,
      host = s.host,
      pullTimeout = WarrenConf.value(PsSettings.PullTimeout, j).fold(d.pullTimeout)(WarrenConf.duration),
      connectTimeout = WarrenConf.value(PsSettings.ConnectTimeout, j).fold(d.connectTimeout)(WarrenConf.duration),
      callTimeout = WarrenConf.value(PsSettings.CallTimeout, j).fold(d.callTimeout)(WarrenConf.duration),
      threads = s.threads
    )
  }

  /** Lets a [[PsConf]] stand where a settings map goes (`WarrenSpark.trainPS(rdd, n, s, conf =
    * PsConf(...))`).
    *
    * @param conf the settings
    * @return `conf.toMap`
    */
  implicit def toSettingsMap(conf: PsConf): Map[String, String] = conf.toMap
}
