package io.warren.spark

import java.time.Duration

import scala.jdk.CollectionConverters._

import io.warren.runner.{RunnerException, Setting, ElasticSettings => RunnerElasticSettings}

/** The elastic-membership settings of [[WarrenSpark.train]] (`spark.warren.elastic`,
  * `spark.warren.minWorkers`, `spark.warren.rejoinTimeout`), parsed.
  *
  * @param enabled `elastic`: the job goes on without a lost worker (and starts with fewer free
  *   slots than workers)
  * @param minWorkers `minWorkers`: never fewer workers
  * @param rejoinTimeout `rejoinTimeout`: how long the others wait for a lost worker's
  *   replacement before going on without it
  */
final case class ElasticSettings(enabled: Boolean, minWorkers: Int, rejoinTimeout: Duration)

/** The declarations of the elastic settings: warren-runner's (`io.warren.runner.ElasticSettings`,
  * also Flink's) with Spark's doc lines, validated like the others and rendered into the same
  * docs table.
  */
object ElasticSettings extends SettingGroup {

  /** The engine-neutral declarations (warren-runner's, also Flink's), with Spark's doc lines. */
  private val Declared: RunnerElasticSettings.Declarations = RunnerElasticSettings.declarations(
    "retry-one: elastic membership. A lost worker whose re-run task has not registered within" +
      " `rejoinTimeout` is dropped: the others roll back to their last checkpoint and go on" +
      " without it (its partition is skipped) instead of waiting for Spark to start a new" +
      " executor, and the re-run task joins again at a checkpoint boundary; a job starts with" +
      " at least `minWorkers` free slots and the other tasks join as slots free up",
    "elastic: never fewer workers; going on without a lost one, or starting with fewer free" +
      " slots, below it fails naming the missing tasks",
    "elastic: seconds the others wait for a lost worker's re-run task (a thrown task is re-run" +
      " on its executor well within it; a lost executor's task waits 2-4 s for a new one) before" +
      " going on without it"
  )

  /** `elastic`. */
  val Elastic: Setting[java.lang.Boolean] = Declared.elastic

  /** `minWorkers`. */
  val MinWorkers: Setting[Integer] = Declared.minWorkers

  /** `rejoinTimeout`. */
  val RejoinTimeout: Setting[java.lang.Double] = Declared.rejoinTimeout

  /** Every elastic setting, in the order of the docs. */
  val All: Seq[Setting[_]] = Seq(Elastic, MinWorkers, RejoinTimeout)

  /** Whether `key` (without `spark.warren.`) is an elastic setting. */
  def owns(key: String): Boolean = All.exists(_.name == key)

  /** Parses the elastic keys of `raw` (keys without `spark.warren.`), ignoring the others.
    *
    * @param raw the job's settings
    * @return the typed settings
    * @throws WarrenSparkException for an invalid value
    */
  def parse(raw: Map[String, String]): ElasticSettings = {
    val javaRaw = raw.filter(kv => owns(kv._1)).asJava
    try {
      val r = RunnerElasticSettings.parse(javaRaw, WarrenSettings.Prefix, Declared)
      ElasticSettings(enabled = r.enabled, minWorkers = r.minWorkers, rejoinTimeout = r.rejoinTimeout)
    } catch { case e: RunnerException => throw new WarrenSparkException(e.getMessage, null) }
  }
}
