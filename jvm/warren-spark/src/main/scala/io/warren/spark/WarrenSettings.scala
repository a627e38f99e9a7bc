package io.warren.spark

/** The type of a `spark.warren.*` setting: parses a raw value, and says what it accepts.
  *
  * @param expected what a valid value is, for error messages and the docs ("an integer in 0..1000")
  * @tparam T the parsed type
  */
sealed abstract class SettingType[T](val expected: String) {

  /** The value of `raw`, or `None` if it is not one `expected` accepts. */
  def parse(raw: String): Option[T]
}

/** The setting types. */
object SettingType {

  /** A whole number in `min..max`. */
  final case class IntIn(min: Int, max: Int) extends SettingType[Int](s"an integer in $min..$max") {
    override def parse(raw: String): Option[Int] = raw.trim.toIntOption.filter(v => v >= min && v <= max)
  }

  /** A number of seconds, at most `max`, and above 0 (`positive`) or at least 0. */
  final case class Seconds(positive: Boolean, max: Double)
      extends SettingType[Double](
        if (positive) s"a number of seconds > 0 and <= ${fmt(max)}" else s"a number of seconds in 0..${fmt(max)}"
      ) {
    override def parse(raw: String): Option[Double] =
      raw.trim.toDoubleOption.filter(v => !v.isNaN && v <= max && (if (positive) v > 0 else v >= 0))
  }

  /** `true` or `false` (also `1`/`0`, `yes`/`no`, `on`/`off`, as the native library accepts). */
  case object Bool extends SettingType[Boolean]("true or false") {
    override def parse(raw: String): Option[Boolean] = raw.trim.toLowerCase match {
      case "true" | "1" | "yes" | "on"  => Some(true)
      case "false" | "0" | "no" | "off" => Some(false)
      case _                            => None
    }
  }

  /** One of `values` (case-insensitive). */
  final case class OneOf(values: String*) extends SettingType[String](values.mkString("one of ", ", ", "")) {
    override def parse(raw: String): Option[String] = Some(raw.trim.toLowerCase).filter(values.contains)
  }

  /** Any non-empty text. */
  case object Text extends SettingType[String]("a non-empty string") {
    override def parse(raw: String): Option[String] = Some(raw.trim).filter(_.nonEmpty)
  }

  private def fmt(d: Double): String = if (d == d.floor) d.toLong.toString else d.toString
}

/** One `spark.warren.*` setting.
  *
  * @param name the key without the `spark.warren.` prefix
  * @param kind its type and accepted values
  * @param default its value when absent (`None`: absent means "not set", see `defaultDoc`)
  * @param defaultDoc the default as the docs show it
  * @param worker the `WARREN_*` worker setting it becomes, if any
  * @param doc one line: what it does
  * @tparam T the parsed type
  */
final case class Setting[T](
    name: String,
    kind: SettingType[T],
    default: Option[T],
    defaultDoc: String,
    worker: Option[String],
    doc: String
) {

  /** The full key, `spark.warren.<name>`. */
  def key: String = WarrenSettings.Prefix + name

  /** Parses this setting from `raw` (keys without the prefix).
    *
    * @throws WarrenSparkException naming the setting, the value and what it accepts
    */
  def from(raw: Map[String, String]): Option[T] = raw.get(name).map(parse).orElse(default)

  /** Parses one value of this setting.
    *
    * @throws WarrenSparkException naming the setting, the value and what it accepts
    */
  def parse(value: String): T = kind.parse(value).getOrElse {
    throw new WarrenSparkException(s"""$key = "$value": expected ${kind.expected}""", null)
  }
}

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
  * @param workerSettings the `WARREN_*` settings for every worker: the mapped settings that are
  *   set, then the `setting.WARREN_*` ones as given (which win)
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
    workerSettings: Map[String, String]
)

/** The one declaration of every `spark.warren.*` setting: name, type, default, accepted values
  * and a doc line, from which [[parse]] validates a job's settings on the driver (before any
  * task starts) and [[markdownTable]] renders the table of jvm/README.md (a test checks that
  * the two agree).
  *
  * Unknown keys fail: the prefix belongs to Warren, so an unknown key is a typo or a setting of
  * another version, and ignoring it would run the job with a default the user meant to change
  * (a misspelt `timeout` leaves the 30-minute deadline). The error names the closest known key.
  */
object WarrenSettings {
  import SettingType._

  /** The prefix of every setting. */
  val Prefix = "spark.warren."

  /** The prefix (after [[Prefix]]) of the settings passed to every worker as is. */
  val PassThrough = "setting."

  private val Day = 86400.0

  /** `spark.warren.recovery`. */
  val RecoveryMode: Setting[String] = Setting(
    "recovery",
    OneOf("retry-one", "fail-all"),
    Some("retry-one"),
    "`retry-one`",
    None,
    "`retry-one`: Spark re-runs only a failed task, which catches up from its peers; `fail-all`: a barrier stage, all tasks re-run from the durable checkpoint"
  )

  /** `spark.warren.checkpointDir`. */
  val CheckpointDir: Setting[String] = Setting(
    "checkpointDir",
    Text,
    None,
    "",
    Some("WARREN_CHECKPOINT_DIR"),
    "fail-all (required): directory of the durable checkpoints, a local path of a shared file system or a Hadoop URI (`hdfs://nn:8020/dir`); a new subdirectory per run"
  )

  /** `spark.warren.durableEvery`. */
  val DurableEvery: Setting[Int] = Setting(
    "durableEvery",
    IntIn(0, 1000000),
    Some(1),
    "1",
    Some("WARREN_DURABLE_EVERY"),
    "fail-all: make every k-th checkpoint durable (0 is taken as 1)"
  )

  /** `spark.warren.checkpointDirTimeout`. */
  val CheckpointDirTimeout: Setting[Double] = Setting(
    "checkpointDirTimeout",
    Seconds(positive = true, Day),
    Some(HadoopCheckpoints.DefaultDriverTimeoutS),
    "60",
    None,
    "fail-all, remote `checkpointDir`: seconds the driver may take to create (and remove) the run's directory"
  )

  /** `spark.warren.timeout`. */
  val Timeout: Setting[Double] = Setting(
    "timeout",
    Seconds(positive = true, Day),
    None,
    "1800",
    Some("WARREN_TIMEOUT_S"),
    "seconds one collective call may take"
  )

  /** `spark.warren.connectTimeout`. */
  val ConnectTimeout: Setting[Double] = Setting(
    "connectTimeout",
    Seconds(positive = true, Day),
    None,
    "300",
    Some("WARREN_CONNECT_TIMEOUT_S"),
    "seconds to join the job and to re-link after a failure"
  )

  /** `spark.warren.bootstrapCache`. */
  val BootstrapCache: Setting[Boolean] = Setting(
    "bootstrapCache",
    Bool,
    None,
    "true",
    Some("WARREN_BOOTSTRAP_CACHE"),
    "keep the results of bootstrap calls for the whole job, so that a worker restarted at any time can replay them"
  )

  /** `spark.warren.localReplicas`. */
  val LocalReplicas: Setting[Int] = Setting(
    "localReplicas",
    IntIn(0, 1000),
    None,
    "2",
    Some("WARREN_LOCAL_REPLICAS"),
    "ring successors that keep a copy of each worker's local model"
  )

  /** `spark.warren.trackerHost`. */
  val TrackerHost: Setting[String] = Setting(
    "trackerHost",
    Text,
    None,
    "`spark.driver.host`",
    None,
    "address the tracker binds and advertises to the workers"
  )

  /** `spark.warren.rendezvousTimeout`. */
  val RendezvousTimeout: Setting[Double] = Setting(
    "rendezvousTimeout",
    Seconds(positive = true, Day),
    Some(600.0),
    "600",
    None,
    "seconds all workers have to arrive at the tracker (fail-all re-runs: bounded by `connectTimeout`)"
  )

  /** `spark.warren.slotWaitTimeout`. */
  val SlotWaitTimeout: Setting[Double] = Setting(
    "slotWaitTimeout",
    Seconds(positive = false, Day),
    Some(0.0),
    "0",
    None,
    "seconds the driver waits for enough free task slots (executors registering) before failing"
  )

  /** `spark.warren.progressInterval`. */
  val ProgressInterval: Setting[Double] = Setting(
    "progressInterval",
    Seconds(positive = false, Day),
    Some(Observation.DefaultProgressIntervalS),
    "10",
    None,
    "seconds between rank 0's progress lines in the driver log (0: none)"
  )

  /** Every setting, in the order of the docs. */
  val All: Seq[Setting[_]] = Seq(
    RecoveryMode,
    CheckpointDir,
    DurableEvery,
    CheckpointDirTimeout,
    Timeout,
    ConnectTimeout,
    BootstrapCache,
    LocalReplicas,
    TrackerHost,
    RendezvousTimeout,
    SlotWaitTimeout,
    ProgressInterval
  )

  private val byName: Map[String, Setting[_]] = All.map(s => s.name -> s).toMap

  /** Worker settings a `setting.` key may name: `WARREN_` and upper-case letters, digits, `_`. */
  private val WorkerKey = "WARREN_[A-Z0-9_]+".r

  /** Parses and validates `raw` (keys without the prefix): every value, every key.
    *
    * @param raw the job's `spark.warren.*` settings, without the prefix
    * @return the typed settings
    * @throws WarrenSparkException for the first invalid value (naming the setting, the value and
    *   the accepted values) or unknown key (naming the closest known one)
    */
  def parse(raw: Map[String, String]): WarrenSettings = {
    raw.keys.toSeq.sorted.foreach(checkKey)
    val durable = DurableEvery.from(raw.get(DurableEvery.name) match {
      case Some(_) => raw
      case None    => raw.get(PassThrough + "WARREN_DURABLE_EVERY").map(DurableEvery.name -> _).toMap
    })
    val mapped = Seq(Timeout, ConnectTimeout, LocalReplicas).flatMap { s =>
      s.from(raw).map(v => s.worker.get -> number(v))
    } ++ BootstrapCache.from(raw).map(b => BootstrapCache.worker.get -> (if (b) "1" else "0"))
    val passed = raw.collect { case (k, v) if k.startsWith(PassThrough) => k.stripPrefix(PassThrough) -> v }
    WarrenSettings(
      recovery = Recovery.parse(RecoveryMode.from(raw)),
      checkpointDir = CheckpointDir.from(raw),
      durableEvery = durable.get.max(1),
      checkpointDirTimeout = CheckpointDirTimeout.from(raw).get,
      trackerHost = TrackerHost.from(raw),
      rendezvousTimeout = RendezvousTimeout.from(raw).get,
      slotWaitTimeout = SlotWaitTimeout.from(raw).get,
      progressInterval = ProgressInterval.from(raw).get,
      workerSettings = mapped.toMap ++ passed
    )
  }

  private def number(v: Any): String = v match {
    case d: Double if d == d.floor && !d.isInfinite => d.toLong.toString
    case other                                      => other.toString
  }

  private def checkKey(name: String): Unit = {
    if (name.startsWith(PassThrough)) {
      val w = name.stripPrefix(PassThrough)
      if (!WorkerKey.matches(w)) {
        throw new WarrenSparkException(
          s"$Prefix$name: a worker setting must be named WARREN_ and upper-case letters, digits or _ (such as ${Prefix}setting.WARREN_TIMEOUT_S)",
          null
        )
      }
    } else if (!byName.contains(name)) {
      val closest = byName.keys.minBy(k => distance(k.toLowerCase, name.toLowerCase))
      throw new WarrenSparkException(
        s"$Prefix$name is not a Warren setting (did you mean $Prefix$closest? the settings are " +
          s"${All.map(_.name).mkString(", ")}, and ${Prefix}setting.WARREN_* for worker settings)",
        null
      )
    }
  }

  /** Levenshtein distance of `a` and `b`. */
  private[spark] def distance(a: String, b: String): Int = {
    var prev = Array.tabulate(b.length + 1)(identity)
    for (i <- 1 to a.length) {
      val cur = new Array[Int](b.length + 1)
      cur(0) = i
      for (j <- 1 to b.length) {
        val sub = prev(j - 1) + (if (a(i - 1) == b(j - 1)) 0 else 1)
        cur(j) = sub.min(prev(j) + 1).min(cur(j - 1) + 1)
      }
      prev = cur
    }
    prev(b.length)
  }

  /** The settings table of the docs (jvm/README.md), rendered from the declarations. */
  def markdownTable: String = {
    val rows = All.map { s =>
      val worker = s.worker.map(w => s" (`$w`)").getOrElse("")
      s"| `${s.key}` | ${s.kind.expected} | ${s.defaultDoc} | ${s.doc}$worker |"
    }
    val pass =
      s"| `${Prefix}setting.WARREN_X` | any | | passed to every worker as `WARREN_X` (wins over the mapped settings above) |"
    (Seq("| Spark setting | accepted values | default | meaning (worker setting) |", "|---|---|---|---|") ++
      rows :+ pass).mkString("\n")
  }
}
