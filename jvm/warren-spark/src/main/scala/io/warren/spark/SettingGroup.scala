package io.warren.spark

import java.time.Duration

import io.warren.runner.Setting

/** A group of Spark-only settings declared beside the runner's (elastic membership, the
  * parameter server): its rows in the same docs table, and the reading of its values.
  */
trait SettingGroup {

  /** Every setting of the group, in the order of the docs. */
  def All: Seq[Setting[_]]

  /** The rows of the docs table for these settings (same columns as the others).
    *
    * @param prefix the engine's prefix
    * @return the Markdown rows
    */
  def markdownRows(prefix: String): Seq[String] =
    All.map(s => s"| `$prefix${s.name}` | ${s.kind.expected} | ${s.defaultDoc} | ${s.doc} |")

  /** The value of `s` in `raw` (keys without `spark.warren.`), or its default.
    *
    * @throws io.warren.runner.RunnerException for an invalid value
    */
  protected def value[T](s: Setting[T], raw: java.util.Map[String, String]): T =
    s.from(raw, WarrenSettings.Prefix).orElseThrow()

  /** The value of the seconds setting `s` in `raw`, or its default.
    *
    * @throws io.warren.runner.RunnerException for an invalid value
    */
  protected def duration(s: Setting[java.lang.Double], raw: java.util.Map[String, String]): Duration =
    Duration.ofMillis((value(s, raw).doubleValue() * 1000).toLong)
}
